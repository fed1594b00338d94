"""The built-in offline tasks: enough of them, each bug caught by exactly its tests, distinct task sets, and a
clear message when more are asked for than exist (issue 9, item 11)."""

from __future__ import annotations

import sys
import types

import pytest
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.core.registry import make
from rubricgym.core.store import TrajectoryStore
from rubricgym.core.tasks import TaskSet
from rubricgym.envs.swe.builtin import BUGS, CORE, HELDOUT_BUGS, TESTS


def _failing(core: str) -> set[str]:
    """The test functions of ``TESTS`` that fail against ``core`` (run in-process, no sandbox)."""
    module = types.ModuleType("tinytext")
    exec(compile(core, "tinytext/core.py", "exec"), module.__dict__)
    saved = sys.modules.get("tinytext")
    sys.modules["tinytext"] = module
    try:
        ns: dict = {}
        exec(compile(TESTS, "tests/test_core.py", "exec"), ns)
    finally:
        if saved is None:
            sys.modules.pop("tinytext", None)
        else:
            sys.modules["tinytext"] = saved
    failed = set()
    for name, fn in list(ns.items()):
        if name.startswith("test_"):
            try:
                fn()
            except AssertionError:
                failed.add(name)
    return failed


def test_at_least_ten_builtin_bugs_each_caught_by_exactly_its_tests():
    assert len(BUGS) >= 10 and len({b.id for b in BUGS}) == len(BUGS)
    assert _failing(CORE) == set()
    for bug in BUGS:
        assert _failing(CORE.replace(bug.old, bug.new)) == set(bug.fail_to_pass), bug.id


def test_task_sets_are_distinct_and_too_many_says_how_to_get_more(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path))
    tasks = TaskSet.generate("swe-v0", 5, seed=0)
    assert len({t.id for t in tasks}) == 5
    assert [t.id for t in TaskSet.generate("swe-v0", 5, seed=0)] == [t.id for t in tasks]
    with pytest.raises(
        ValueError,
        match=rf"has {len(BUGS) - len(HELDOUT_BUGS)} built-in offline tasks in split 'train' \({len(BUGS)} in all.*"
        r"fewer than the 50 asked.*rubricgym swe build",
    ):
        make("swe-v0").task_set(50)
    r = CliRunner().invoke(app, ["run", "swe-v0", "--tasks", "50", "--out", str(tmp_path / "r")])
    assert r.exit_code == 2 and "rubricgym swe build" in " ".join(r.output.split())


@pytest.mark.slow
@pytest.mark.sandbox
def test_run_five_builtin_tasks_with_the_oracle(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "r"
    r = CliRunner().invoke(app, ["run", "swe-v0", "--agent", "oracle", "--tasks", "5", "--out", str(out)])
    assert r.exit_code == 0, r.output
    trajs = TrajectoryStore(out).load()
    assert len({t.task.id for t in trajs}) == 5 and all(t.outcome.reward == 1.0 for t in trajs)
