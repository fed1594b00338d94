"""``build_tasks`` from a requirement / sdist / directory and ``rubricgym swe build`` (issue 9, items 9-10).

No network: pip is pointed at a local folder holding an sdist built here (``PIP_NO_INDEX``, ``PIP_FIND_LINKS``).
"""

from __future__ import annotations

import asyncio

import pytest
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.envs.swe.env import load_instances
from rubricgym.envs.swe.inject import BuildError, BuildProgress, build_tasks, mutant_timeout
from rubricgym.envs.swe.pypi import KNOWN_PROJECTS, SourceUnavailable

from .sdist import make_sdist


@pytest.fixture
def offline_index(tmp_path, monkeypatch):
    """pip resolves only from a local folder holding tallypkg-0.1; caches under tmp."""
    links = tmp_path / "links"
    links.mkdir()
    archive = make_sdist(links)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path / "cache"))
    return archive


def test_a_requirement_that_cannot_be_fetched_says_so(offline_index, tmp_path):
    with pytest.raises(SourceUnavailable, match="pip download nosuchpkg==1.0 failed"):
        asyncio.run(build_tasks("nosuchpkg==1.0"))
    with pytest.raises(BuildError, match="neither a project directory, an sdist archive nor a requirement"):
        asyncio.run(build_tasks(str(tmp_path / "no" / "such-dir")))


def test_mutant_timeout_is_a_multiple_of_the_suite_time():
    assert mutant_timeout(4.0) == 20.0 and mutant_timeout(4.0, factor=3) == 12.0
    assert mutant_timeout(0.1) == 10.0  # a floor for sandbox start-up jitter on a busy machine


@pytest.mark.slow
@pytest.mark.sandbox
def test_build_from_a_requirement_bounds_a_hanging_mutant(offline_index):
    seen: list[BuildProgress] = []
    # with seed 2 the 4th mutant tried turns `i = i + 1` into `i = i - 1`: total_below never returns
    try:
        tasks = asyncio.run(build_tasks("tallypkg==0.1", n=20, seed=2, max_tries=4, on_progress=seen.append))
    except BuildError:  # a very busy machine can time out the other three mutants too; the bound is what counts
        tasks = []
    assert all(t.repo == "tallypkg" and t.FAIL_TO_PASS for t in tasks)
    assert seen[0].tried == 0 and seen[-1].tried == 4 and seen[-1].kept == len(tasks)
    limit = mutant_timeout(seen[0].baseline_s)
    assert all(p.mutant_timeout_s == limit for p in seen) and limit < 30
    assert any("tallypkg/__init__.py:10" in p.last and "timeout" in p.last for p in seen), [p.last for p in seen]


@pytest.mark.slow
@pytest.mark.sandbox
def test_swe_build_cli_writes_tasks_the_env_runs(offline_index, tmp_path):
    out = tmp_path / "tasks.jsonl"
    r = CliRunner().invoke(app, ["swe", "build", "tallypkg==0.1", "--n", "2", "--out", str(out)])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "mutants tried" in flat and "kept" in flat and "wrote 2 task(s)" in flat
    assert len(load_instances(out)) == 2
    run = CliRunner().invoke(
        app,
        [
            "run",
            "swe-v0",
            "--env-arg",
            f"instances={out}",
            "--agent",
            "oracle",
            "--tasks",
            "2",
            "--out",
            str(tmp_path / "r"),
        ],
    )
    assert run.exit_code == 0, run.output
    local = CliRunner().invoke(
        app, ["swe", "build", str(offline_index), "--n", "1", "--out", str(tmp_path / "a.jsonl")]
    )
    assert local.exit_code == 0, local.output  # an sdist path works too


@pytest.mark.slow
@pytest.mark.sandbox
def test_build_from_a_real_pypi_requirement(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path))
    try:
        tasks = asyncio.run(build_tasks(KNOWN_PROJECTS[0], n=1, timeout_factor=20))  # about fetching, not limits
    except SourceUnavailable as e:
        pytest.skip(f"PyPI unreachable: {e}")
    assert len(tasks) == 1 and tasks[0].repo == KNOWN_PROJECTS[0].split("==")[0]
