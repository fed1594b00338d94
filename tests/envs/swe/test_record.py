"""``rubricgym swe record`` (issue 44 item 8) over a real small project made here, and the verdict on a record
with one misspelt test id among many (item 6)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.core.rollout import rollout
from rubricgym.envs.swe import SweEnv
from rubricgym.envs.swe.commit import is_test_path
from rubricgym.envs.swe.swebench import import_swebench

from .swebench_samples import git

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

SHAPES = '''"""Plane shapes."""


def square_area(side):
    return side * side


def rectangle_area(width, height):
    return width * height


def circle_area(radius):
    return 3.14159 * radius * radius
'''
PERIMETER_BUG = """

def rectangle_perimeter(width, height):
    return width + height
"""
GOOD_TESTS = (
    "".join(f"\n\ndef test_square_{n}():\n    assert square_area({n}) == {n * n}\n" for n in range(12))
    + "\n\ndef test_rectangle():\n    assert rectangle_area(2, 3) == 6\n"
)
TESTS = "from shapes import circle_area, rectangle_area, square_area\n" + GOOD_TESTS
PERIMETER_TESTS = """from shapes import rectangle_perimeter


def test_rectangle_perimeter():
    assert rectangle_perimeter(2, 3) == 10


def test_unit_square_perimeter():
    assert rectangle_perimeter(1, 1) == 4
"""


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def project(tmp_path, monkeypatch):
    """``clones/shapes``: a first release, a commit that adds a buggy ``rectangle_perimeter`` and the fix, which
    touches the code, adds a test file and one more test to the old file."""
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    repo = tmp_path / "clones" / "shapes"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    commit(
        repo,
        {
            "pyproject.toml": '[project]\nname = "shapes"\nversion = "1.0"\n',
            "shapes/__init__.py": SHAPES,
            "tests/test_shapes.py": TESTS,
        },
        "first release",
    )
    bug = commit(repo, {"shapes/__init__.py": SHAPES + PERIMETER_BUG}, "add rectangle_perimeter")
    fix = commit(
        repo,
        {
            "shapes/__init__.py": SHAPES + PERIMETER_BUG.replace("width + height", "2 * (width + height)"),
            "tests/test_perimeter.py": PERIMETER_TESTS,
            "tests/test_shapes.py": TESTS + "\n\ndef test_circle():\n    assert round(circle_area(1), 2) == 3.14\n",
        },
        "rectangle_perimeter(2, 3) returns 5, not 10\n\nThe perimeter counts each side once.",
    )
    return tmp_path, repo, bug, fix


def test_test_paths_are_split_from_library_code():
    assert all(map(is_test_path, ["tests/test_a.py", "pkg/test/helpers.py", "test_x.py", "a/b_test.py", "conftest.py"]))
    assert not any(map(is_test_path, ["shapes/__init__.py", "src/testament.py", "pkg/contest.py", "tests.md"]))


def test_a_fix_commit_becomes_a_record_that_swe_import_verifies(project):
    tmp, repo, bug, fix = project
    records = tmp / "records.jsonl"
    r = CliRunner().invoke(app, ["swe", "record", str(repo), "HEAD", "--out", str(records)])
    assert r.exit_code == 0, r.output
    (rec,) = [json.loads(line) for line in records.read_text().splitlines()]
    assert rec["base_commit"] == bug and rec["fix_commit"] == fix and rec["repo"] == "shapes"
    assert rec["problem_statement"].startswith("rectangle_perimeter(2, 3) returns 5, not 10")
    assert "shapes/__init__.py" in rec["patch"] and "tests/" not in rec["patch"]
    assert "tests/test_perimeter.py" in rec["test_patch"] and "shapes/__init__.py" not in rec["test_patch"]
    assert rec["FAIL_TO_PASS"] == [
        "tests/test_perimeter.py::test_rectangle_perimeter",
        "tests/test_perimeter.py::test_unit_square_perimeter",
    ]
    # the new test_circle passes before the fix too (the test patch is applied to the base): PASS_TO_PASS
    assert len(rec["PASS_TO_PASS"]) == 14 and "tests/test_shapes.py::test_circle" in rec["PASS_TO_PASS"]
    assert f"rubricgym swe import {records} --repos {repo.parent}" in " ".join(r.output.split())

    out = tmp / "tasks.jsonl"
    r = CliRunner().invoke(app, ["swe", "import", str(records), "--repos", str(repo.parent), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "verified (do-nothing 0.00, gold 1.00)" in r.output
    assert "swe import records.jsonl: 1/1 records" in r.output  # progress, as plain lines outside a terminal
    env = SweEnv(instances=out)
    try:
        (task,) = env.task_set(1, seed=0, split="test")
        good = asyncio.run(rollout(env, SweEnv.agents()["oracle"](), task, seed=0))
        assert good.outcome.reward == 1.0
        env.reset(options={"task": task})
        _, reward, terminated, _, _ = env.step('<tool_call>{"name": "submit", "arguments": {}}</tool_call>')
        assert terminated and reward == 0.0  # doing nothing earns nothing
    finally:
        env.close()


def test_a_span_and_a_problem_file_and_commits_that_make_no_record(project):
    tmp, repo, bug, fix = project
    (tmp / "problem.md").write_text("The perimeter of a 2x3 rectangle comes out as 5.\n")
    records = tmp / "records.jsonl"
    args = ["swe", "record", str(repo), "--fix", f"{bug[:10]}..main", "--problem", str(tmp / "problem.md")]
    r = CliRunner().invoke(app, [*args, "--out", str(records), "--id", "shapes-7"])
    assert r.exit_code == 0, r.output
    rec = json.loads(records.read_text())
    assert rec["instance_id"] == "shapes-7" and rec["base_commit"] == bug
    assert rec["problem_statement"] == "The perimeter of a 2x3 rectangle comes out as 5.\n"
    # the bug commit adds untested code: no test fails before it and passes after
    r = CliRunner().invoke(app, ["swe", "record", str(repo), "HEAD~1", "--out", str(tmp / "no.jsonl")])
    flat = " ".join(r.output.split())
    assert r.exit_code == 1 and "no test fails before" in flat and "Add a test that fails on the bug" in flat
    r = CliRunner().invoke(app, ["swe", "record", str(repo), "no-such-branch", "--out", str(tmp / "no.jsonl")])
    assert r.exit_code == 1 and "neither a commit hash nor a branch or tag" in " ".join(r.output.split())
    r = CliRunner().invoke(app, ["swe", "record", str(repo), "HEAD", "--tests", "tests/nope.py", "--out", str(records)])
    flat = " ".join(r.output.split())
    assert r.exit_code == 1 and "no test ran" in flat and "tests/nope.py" in flat and "check the --tests" in flat
    r = CliRunner().invoke(app, ["swe", "record", str(repo), "HEAD", "--fix", "a..b"])
    assert r.exit_code == 2 and "not both or neither" in r.output


def test_one_misspelt_id_among_many_is_named_and_the_rest_are_graded(project):
    tmp, repo, bug, fix = project
    records = tmp / "records.jsonl"
    assert CliRunner().invoke(app, ["swe", "record", str(repo), fix, "--out", str(records)]).exit_code == 0
    rec = json.loads(records.read_text())
    p2p = rec["PASS_TO_PASS"]
    wrong, no_file = "tests/test_shapes.py::test_rectangel", "tests/test_shape.py::test_circle"
    rec["PASS_TO_PASS"] = [wrong if t.endswith("::test_rectangle") else t for t in p2p] + [no_file]
    (item,) = asyncio.run(import_swebench([rec], tmp / "clones"))
    v = item.verdict
    assert not v.ok and v.do_nothing == 0.0
    assert v.gold == pytest.approx(13 / 15)  # the 13 real ids ran and passed; the wrong ones count as not passing
    (problem,) = v.problems
    assert f"2 PASS_TO_PASS id(s) name no test of the repository: '{wrong}'" in problem
    assert "did you mean tests/test_shapes.py::test_rectangle" in problem
    assert f"'{no_file}': no file tests/test_shape.py in the repository (did you mean tests/test_shapes.py" in problem
    assert "the other 13 were run and graded" in problem


def test_check_runs_on_a_one_task_imported_file(project):
    """`check` on a user's 1-task file (issue 44 item 7): every row passes, on that task."""
    tmp, repo, bug, fix = project
    records, out = tmp / "records.jsonl", tmp / "tasks.jsonl"
    assert CliRunner().invoke(app, ["swe", "record", str(repo), "HEAD", "--out", str(records)]).exit_code == 0
    r = CliRunner().invoke(app, ["swe", "import", str(records), "--repos", str(repo.parent), "--out", str(out)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["check", "swe-v0", "--fuzz", "20", "--env-arg", f"instances={out}"])
    assert r.exit_code == 0, r.output  # every row passed; before: "fewer than the 2 asked for", exit 1
    assert "rubricgym check swe-v0: 17/17 checks" in r.output  # progress, as plain lines outside a terminal
