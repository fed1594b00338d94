"""A test run must leave the repository tree as it found it (issue 23, item 13).

``git status`` is read when the session starts and when it ends; any path that is new or changed by the end
(an untracked file a test wrote, a tracked file it edited) fails the run, naming the paths. Ignored paths
(``.venv``, ``__pycache__``, ``runs/`` ...) are not listed by ``git status`` and so never count.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
_KEY = pytest.StashKey[frozenset[str]]()


def tree_status(root: Path = ROOT) -> frozenset[str] | None:
    """``git status --porcelain`` entries of ``root`` (None outside a git checkout or without git)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=all", "-z"],
            capture_output=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return frozenset(e for e in out.decode(errors="replace").split("\0") if e)


def pytest_sessionstart(session: pytest.Session) -> None:
    status = tree_status()
    if status is not None:
        session.stash[_KEY] = status


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.stash.get(_KEY, None)
    after = tree_status() if before is not None else None
    if before is None or after is None:
        return
    left = sorted(after - before)
    if left:
        print(
            f"\nthe test run left {len(left)} path(s) in the repository tree {ROOT} (write under tmp_path instead, "
            "or delete them at teardown):\n  " + "\n  ".join(left),
            file=sys.stderr,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
