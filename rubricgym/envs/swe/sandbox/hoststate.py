"""What bwrap sandboxes leave on the host, and how it is always removed: owner locks, total removal, the sweep
of sandboxes whose owner died, and the eviction of unused per-snapshot ``lower/`` copies.

Every live sandbox holds an exclusive ``flock`` on ``<home>/.lock`` for its whole life, and a shared one on
the ``lower/`` copy its overlay reads. The kernel drops both when the owning process dies (even by
``kill -9``), so a lock that can be taken marks state nobody owns any more: ``sweep`` kills its processes,
unmounts its mounts (deepest first), removes its cgroups and deletes its folder.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from rubricgym.envs.swe.sandbox.syscalls import umount

LOCK_NAME = ".lock"
STALE_TMP_S = 3600.0
"""A half-created sandbox or lower copy (a dot-prefixed folder) older than this belongs to a dead creator."""


def take_lock(path: Path, shared: bool = False, wait_s: float = 0.0) -> int | None:
    """An fd holding a ``flock`` on ``path`` (a file or folder), or ``None`` if another holder keeps it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | (0 if path.is_dir() else os.O_CREAT), 0o600)
    except OSError:
        return None
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.02)


def release(fd: int | None) -> None:
    if fd is not None:
        with suppress(OSError):
            os.close(fd)


def _remove_shallow(path: Path) -> bool:
    """Delete ``path`` if it holds only files and empty folders (a sandbox home once its mounts are gone)."""
    try:
        with os.scandir(path) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    os.rmdir(entry.path)  # fails on anything not empty (or mounted): left to rm
                else:
                    os.unlink(entry.path)
        os.rmdir(path)
    except OSError:
        return False
    return True


def rmtree(path: Path) -> None:
    """Delete ``path`` entirely, however deep or chmod-ed (``rm`` walks iteratively); never crosses a mount."""
    if not os.path.lexists(path) or (path.is_dir() and not path.is_symlink() and _remove_shallow(path)):
        return
    run = [["rm", "-rf", "--one-file-system", "--", str(path)]]
    if os.geteuid() != 0:  # a command may have chmod-ed a folder to 000; root ignores modes
        run.insert(0, ["chmod", "-R", "u+rwx", "--", str(path)])
    for argv in run:
        with suppress(OSError, subprocess.SubprocessError):
            subprocess.run(argv, capture_output=True, timeout=600)


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below ``path`` in this mount namespace, deepest first."""
    prefix = str(path)
    found = []
    with suppress(OSError), open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) < 2:
                continue
            point = fields[1].encode().decode("unicode_escape")  # \040 and friends
            if point == prefix or point.startswith(prefix + "/"):
                found.append(point)
    return sorted(set(found), key=len, reverse=True)


def unmount_all(path: Path) -> None:
    for point in mounts_under(path):
        with suppress(OSError):
            umount(point)


def kill_cgroups(cgroups: dict[str, Path], remove: bool = False) -> None:
    for d in cgroups.values():
        with suppress(OSError):
            for pid in (d / "cgroup.procs").read_text().split():
                with suppress(ProcessLookupError, PermissionError):
                    os.kill(int(pid), signal.SIGKILL)
    if remove:
        for d in cgroups.values():
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def remove_sandbox(home: Path, cgroups: dict[str, Path]) -> None:
    """Kill, unmount and delete one sandbox's host state (idempotent; safe on a half-created sandbox)."""
    kill_cgroups(cgroups)
    unmount_all(home)
    rmtree(home)
    kill_cgroups(cgroups, remove=True)


def _old(entry: Path) -> bool:
    with suppress(OSError):
        return time.time() - entry.lstat().st_mtime > STALE_TMP_S
    return False


def _stale(entry: Path) -> bool:
    """Nobody owns ``entry``: its lock can be taken, or it is an old folder without one (half-made)."""
    if entry.name.startswith(".") or not (entry / LOCK_NAME).exists():
        return _old(entry)
    fd = take_lock(entry / LOCK_NAME)
    if fd is None:
        return False
    release(fd)
    return True


def sweep(work_parent: Path, cgroups_of: Callable[[str], dict[str, Path]]) -> list[str]:
    """Remove every sandbox under ``work_parent`` whose owner is gone; the names of those removed."""
    removed = []
    with suppress(OSError):
        for entry in sorted(work_parent.iterdir()):
            if entry.is_dir() and not entry.is_symlink() and _stale(entry):
                remove_sandbox(entry, cgroups_of(entry.name.lstrip(".").split(".")[0]))
                removed.append(entry.name)
    return removed


def evict_lowers(lower_parent: Path, keep: int) -> list[str]:
    """Delete unused ``lower/`` copies beyond the ``keep`` most recently used (and stale half-made ones)."""
    try:
        entries = [e for e in lower_parent.iterdir() if e.is_dir() and not e.is_symlink()]
    except OSError:
        return []
    evicted = []
    for e in [e for e in entries if e.name.startswith(".")]:
        if _old(e):
            rmtree(e)
            evicted.append(e.name)
    done = [e for e in entries if not e.name.startswith(".")]
    done.sort(key=lambda e: e.stat().st_mtime if e.exists() else 0.0, reverse=True)
    for e in done[keep:]:
        fd = take_lock(e)
        if fd is None:  # a live sandbox's overlay reads it
            continue
        try:
            trash = lower_parent / f".evicted-{uuid.uuid4().hex[:8]}"
            os.rename(e, trash)
        except OSError:
            release(fd)
            continue
        release(fd)
        rmtree(trash)
        evicted.append(e.name)
    return evicted
