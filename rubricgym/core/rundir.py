"""Run directories that cannot be corrupted by a second writer or by a resume with different options.

``RunDirLock`` takes an exclusive ``flock`` on ``RUN_DIR/.lock`` for the whole run and writes who holds it
(pid, host, command, start time) into it, so a second ``rubricgym run`` into the same directory stops at once
and says who holds it; the kernel releases the lock when the holder exits, however it exits.
``resume_conflicts`` compares what defines a run (``RUN_KEYS``) with the directory's ``run.json``: resuming
with another agent or group size would skip every task and relabel trajectories, so it is refused.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

LOCK = ".lock"
RUN_KEYS = ("env_id", "agent", "model", "group_size", "seed", "split", "env_kwargs")
"""What defines a run: trajectories written under other values are not the same run's."""
_FLAGS = {
    "env_id": "ENV_ID",
    "agent": "--agent",
    "model": "--model",
    "group_size": "--group-size",
    "seed": "--seed",
    "split": "--split",
    "env_kwargs": "--env-arg/--max-steps",
}


class RunDirError(RuntimeError):
    """The run directory cannot be used for this run (held by another process, or written by another run)."""


class RunDirLock:
    """An exclusive lock on a run directory for as long as the ``with`` block (or ``release``) lasts."""

    def __init__(self, run_dir: str | Path):
        self.dir = Path(run_dir)
        self.fd: int | None = None

    def acquire(self) -> RunDirLock:
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / LOCK
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)  # never through a link
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise RunDirError(
                f"{self.dir} is in use by another run ({holder}); wait for it to finish or pass another --out"
            ) from None
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%d %H:%M:%S"),
            "command": " ".join(sys.argv)[:300],
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> RunDirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {info['pid']} on {info['host']} since {info['since']}: {info['command']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "holder unknown"


def resume_conflicts(previous: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The run-defining options whose values differ between ``previous`` (``run.json``) and ``current``."""
    return [
        f"{_FLAGS[k]} {previous[k]!r} there, {current.get(k)!r} now"
        for k in RUN_KEYS
        if k in previous and previous[k] != current.get(k)
    ]


def check_resume(run_dir: Path, previous: dict[str, Any], current: dict[str, Any], has_trajectories: bool) -> None:
    """Raise ``RunDirError`` if ``run_dir`` holds trajectories of a run defined differently from ``current``."""
    if not has_trajectories:
        return
    diffs = resume_conflicts(previous, current)
    if diffs:
        raise RunDirError(
            f"{run_dir} holds trajectories of a different run ({'; '.join(diffs)}): resuming would "
            "skip its tasks and relabel the run. Use another --out, or the same options to resume"
        )
