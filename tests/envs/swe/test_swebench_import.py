"""``rubricgym swe import`` (issue 28, items 7-9): SWE-bench records with the dataset's mess over a local clone,
a verdict per record, portable tasks files, and test dependencies installed from a local wheelhouse (offline)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.core.rollout import rollout
from rubricgym.core.store import TrajectoryStore
from rubricgym.envs.swe import SweEnv
from rubricgym.envs.swe.deps import install_deps
from rubricgym.envs.swe.inject import BuildError, BuildProgress, build_tasks
from rubricgym.envs.swe.sandbox import Limits
from rubricgym.envs.swe.swebench import import_swebench
from rubricgym.envs.swe.taskfile import load_instances, save_instances
from rubricgym.rewards.leaks import audit_leaks
from rubricgym.rewards.shortcuts import run_battery

from .swebench_samples import make_clone, make_records, make_wheel, write_jsonl_crlf

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]
VERIFIED = ["acme__minicalc-1", "acme__minicalc-2", "acme__minicalc-3"]


@pytest.fixture
def samples(tmp_path, monkeypatch):
    """Clones under ``clones/``, the records file, a wheelhouse holding ``tinydep``; pip offline, cache in tmp."""
    repo, base, fix = make_clone(tmp_path / "clones")
    records = write_jsonl_crlf(tmp_path / "records.jsonl", make_records(repo, base, fix))
    make_wheel(tmp_path / "wheels")
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "empty"))
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path / "cache"))
    return tmp_path, records


def test_import_gives_a_verdict_per_record_and_writes_the_verified_ones(samples):
    tmp, records = samples
    out = tmp / "out" / "tasks.jsonl"
    r = CliRunner().invoke(
        app,
        [
            "swe",
            "import",
            str(records),
            "--repos",
            str(tmp / "clones"),
            "--out",
            str(out),
            "--wheelhouse",
            str(tmp / "wheels"),
        ],
    )
    assert r.exit_code == 1, r.output  # written, but two records were left out: say so in the exit status
    flat = " ".join(r.output.split())
    assert "2 of 5 record(s) not imported (the others were written): acme__minicalc-4: rejected" in flat
    for iid in VERIFIED:
        assert f"{iid}: verified (do-nothing 0.00, gold 1.00)" in flat
    assert "acme__minicalc-4: rejected (do-nothing 0.00, gold 0.00): with the gold patch 1/1 FAIL_TO_PASS" in flat
    assert "other__gone-1: rejected: no local git clone of 'other/gone'" in flat
    assert "wrote 3 task(s)" in flat and "2 rejected and dropped" in flat
    loaded = load_instances(out)
    assert [i.instance_id for i in loaded] == VERIFIED
    first, second = loaded[0], loaded[1]
    assert first.FAIL_TO_PASS == ["tests/test_mean.py::test_mean"] and len(first.PASS_TO_PASS) == 2
    assert set(first.details) == {
        "hints_text",
        "created_at",
        "version",
        "environment_setup_commit",
        "some_future_field",
    }
    assert second.test_patch == "" and second.PASS_TO_PASS == []
    text = out.read_text()
    assert str(tmp) not in text and '"snapshot":"tasks.data/snapshots/' in text  # no absolute cache paths
    assert all(i.deps and Path(i.deps).is_relative_to(out.parent / "tasks.data") for i in loaded)


def test_a_tasks_file_runs_after_moving_it_and_clearing_the_cache(samples, monkeypatch):
    tmp, records = samples
    results = asyncio.run(import_swebench(records, tmp / "clones", wheelhouse=tmp / "wheels"))
    out = save_instances([r.instance for r in results if r.verdict.ok and r.instance], tmp / "built" / "tasks.jsonl")
    moved = tmp / "elsewhere"
    moved.mkdir()
    shutil.copy(out, moved / "tasks.jsonl")
    shutil.copytree(out.parent / "tasks.data", moved / "tasks.data", symlinks=True)
    for gone in (tmp / "built", tmp / "cache", tmp / "clones"):
        shutil.rmtree(gone)
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp / "fresh-cache"))
    env = SweEnv(instances=moved / "tasks.jsonl")
    try:
        tasks = env.task_set(3, seed=0, split="test")
        for task in tasks:
            good = asyncio.run(rollout(env, SweEnv.agents()["oracle"](), task, seed=0))
            assert good.outcome.reward == 1.0, task.id
            env.reset(options={"task": task})
            _, reward, terminated, _, _ = env.step('<tool_call>{"name": "submit", "arguments": {}}</tool_call>')
            assert terminated and reward == 0.0, task.id  # doing nothing earns nothing
    finally:
        env.close()
    assert not (tmp / "fresh-cache").exists()  # everything came from beside the file


def test_tests_needing_a_missing_dependency_are_reported_as_skipped(samples):
    tmp, records = samples
    third = [json.loads(line) for line in records.read_text().splitlines()][2]
    (item,) = asyncio.run(import_swebench([third], tmp / "clones"))  # no wheelhouse: pip finds nothing
    v = item.verdict
    assert not v.ok and v.gold == 0.0
    assert "skipped in the sandbox: could not import 'tinydep'" in v.problems[0]
    assert set(v.skipped) == {"tests/test_fmt.py::test_fmt_mean", "tests/test_fmt.py::test_fmt_add"}
    assert any("could not install tinydep>=0.1" in n for n in v.notes)


def test_a_raw_record_passed_to_run_says_to_import_it(samples):
    tmp, records = samples
    for args in (["--env-arg", f"instances={records}", "--tasks", "1"], ["--task-file", str(records)]):
        r = CliRunner().invoke(app, ["run", "swe-v0", *args, "--agent", "oracle", "--out", str(tmp / "r")])
        flat = " ".join(r.output.split())
        assert r.exit_code != 0 and "is a SWE-bench record, not a task" in flat, r.output
        assert f"rubricgym swe import {records}" in flat and "Extra inputs" not in flat


def test_dependencies_are_read_only_and_outside_the_repository(samples, backend):
    tmp, _ = samples
    deps = install_deps(["tinydep"], wheelhouse=tmp / "wheels", root=tmp / "deps")
    assert deps.installed == ["tinydep==0.1"] and not deps.failed and deps.path is not None
    repo = tmp / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")

    async def go() -> None:
        async with await backend.create(repo, Limits(timeout_s=30), deps.path) as sb:
            res = await sb.exec("python3 -c 'import tinydep; print(tinydep.__file__, tinydep.fmt(1))'")
            assert res.stdout.split() == ["/opt/rubricgym-deps/tinydep/__init__.py", "1.00"], res.describe()
            res = await sb.exec("echo 'def fmt(x): return 42' > /opt/rubricgym-deps/tinydep/__init__.py")
            assert res.exit_code != 0  # the agent cannot edit a dependency to make tests pass
            assert (await sb.diff()) == ""

    asyncio.run(go())


def test_build_installs_the_projects_test_dependencies(samples):
    tmp, _ = samples
    project = tmp / "clones" / "acme" / "minicalc"  # its fix commit: every test passes given tinydep
    seen: list[BuildProgress] = []
    tasks = asyncio.run(build_tasks(project, n=1, max_tries=4, wheelhouse=tmp / "wheels", on_progress=seen.append))
    assert tasks and tasks[0].deps is not None
    assert "skipped" not in seen[0].last
    graded = tasks[0].FAIL_TO_PASS + tasks[0].PASS_TO_PASS
    assert "tests/test_fmt.py::test_fmt_add" in graded  # it ran: tinydep was there
    seen.clear()
    with contextlib.suppress(BuildError):  # only the baseline matters here
        asyncio.run(build_tasks(project, n=1, max_tries=1, on_progress=seen.append))  # no wheelhouse
    baseline = seen[0].last
    assert "skipped in the sandbox (1x could not import 'tinydep'" in baseline, baseline
    assert "could not install tinydep>=0.1" in baseline


def test_the_readme_commands_run_as_written(samples, monkeypatch):
    tmp, _ = samples
    monkeypatch.chdir(tmp)
    readme = (Path(__file__).parents[3] / "docs" / "tutorials" / "public-data.md").read_text()
    block = re.search(r"```bash\n(.*?)```", readme.split("## SWE-bench records", 1)[1], re.S)
    assert block is not None
    for line in block.group(1).splitlines():
        argv = shlex.split(line, comments=True)
        assert argv[0] == "rubricgym"
        r = CliRunner().invoke(app, argv[1:])
        if argv[1:3] == ["swe", "import"]:  # the sample records include two bad ones: written the rest, exit 1
            assert r.exit_code == 1 and "2 of 5 record(s) not imported" in " ".join(r.output.split()), r.output
        else:
            assert r.exit_code == 0, f"{line}\n{r.output}"
    trajectories = TrajectoryStore(tmp / "runs" / "swebench").load()
    assert len(trajectories) == 3 and all(t.outcome.reward == 1.0 for t in trajectories)


def test_imported_tasks_pass_the_leak_audit_and_the_shortcut_battery(samples):
    """A fix that deletes words (``/ (len(xs) + 1)`` -> ``/ len(xs)``) read as a leak: its added line's words are
    in the buggy line every agent must read."""
    tmp, records = samples
    results = asyncio.run(import_swebench(records, tmp / "clones", wheelhouse=tmp / "wheels"))
    out = save_instances([r.instance for r in results if r.verdict.ok and r.instance], tmp / "tasks.jsonl")
    kwargs = {"instances": str(out)}
    leaks = asyncio.run(audit_leaks("swe-v0", n_tasks=3, env_kwargs=kwargs))
    assert leaks.ok, leaks.line()
    battery = asyncio.run(run_battery("swe-v0", n_tasks=3, env_kwargs=kwargs))
    assert battery.ok, battery.problems()
