"""Tests that need the sandbox skip alike where it is missing and fail loudly under CI=true (issue 9, item 13)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import missing_dependency

ROOT = Path(__file__).parents[1]
NEEDS_SANDBOX = [  # one through the bwrap fixture, two that build swe-v0 envs directly
    "tests/envs/swe/test_env.py::test_check_env",
    "tests/envs/swe/test_env.py::test_step_limit_grades_the_final_state",
    "tests/test_check_all_envs.py::test_rubricgym_check_passes[swe-v0]",
]


def test_missing_dependency_skips_outside_ci_and_fails_in_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no widget"):
        missing_dependency("no widget")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true and a system dependency is missing: no widget"):
        missing_dependency("no widget")


@pytest.mark.slow  # a nested pytest run: not the fast tier
@pytest.mark.parametrize("ci", [False, True])
def test_sandbox_tests_without_bwrap_all_skip_or_all_fail(ci, tmp_path):
    env = {**os.environ, "PATH": str(tmp_path), "RUBRICGYM_CACHE": str(tmp_path / "cache")}  # no bwrap on PATH
    env.pop("CI", None)
    if ci:
        env["CI"] = "true"
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rsf", "-p", "no:cacheprovider", *NEEDS_SANDBOX],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    tail = res.stdout[-3000:]
    if ci:  # an error at setup: the run fails, naming the missing dependency for each test
        assert res.returncode != 0 and "3 errors" in tail, tail
        assert tail.count("CI=true and a system dependency is missing: bwrap backend unavailable") == 3, tail
    else:
        assert res.returncode == 0 and "3 skipped" in tail and "bwrap backend unavailable" in tail, tail


@pytest.mark.slow  # a nested pytest run: not the fast tier
def test_a_run_that_leaves_a_file_in_the_tree_fails(tmp_path):
    """Issue 23, item 13: a test that writes into the repository fails the whole run, naming the file."""
    assert not (ROOT / "oom").exists(), "the stray `oom` file is back in the tree"
    leftover = ROOT / f"leftover-{os.getpid()}.txt"
    test = tmp_path / "test_leaks.py"
    test.write_text(f"def test_writes():\n    open({str(leftover)!r}, 'w').close()\n")
    try:
        res = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.tree_guard", str(test)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        leftover.unlink(missing_ok=True)
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-2000:]
    assert "1 passed" in res.stdout and leftover.name in res.stderr, res.stderr[-2000:]
