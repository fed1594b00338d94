"""``BwrapBackend``: prepares each bwrap sandbox's host state (see ``bwrap`` for how commands run).

As root, /work is an overlayfs over a shared, read-only per-snapshot ``lower/`` copy, whose writable layer lives
on a tmpfs of ``Limits.disk_mb`` (the disk quota); each sandbox also gets memory/pids/cpu cgroups (v1) where they
are writable. Without root, /work is a plain copy. Every sandbox is created under a lock (``hoststate``) so what
a killed owner leaves is swept by the next backend's first ``create``.

What does not depend on the snapshot is made ahead, in a thread, after each ``create``: ``spares`` fresh sandbox
homes with their tmpfs, cgroups and a parked launcher that has already joined them (a cgroup v1 join waits for an
RCU grace period, ~10 ms). A spare is never reused: it is made for one sandbox and removed with it; spares are
kept for the limits of the latest ``create`` only and removed by ``aclose`` (or at exit, or by the next sweep).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import threading
import uuid
import weakref
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from rubricgym.envs.swe.sandbox.base import Limits, SandboxBackend, SandboxError
from rubricgym.envs.swe.sandbox.bwrap import (
    SANDBOX_UID,
    BwrapSandbox,
    cleanup_sandbox,
    launch_prelude,
    shell_sets_rlimits,
)
from rubricgym.envs.swe.sandbox.child import Launcher
from rubricgym.envs.swe.sandbox.hoststate import (
    LOCK_NAME,
    evict_lowers,
    kill_cgroups,
    release,
    rmtree,
    sweep,
    take_lock,
)
from rubricgym.envs.swe.sandbox.runtime import SANDBOX_PYTHON, runtime_dir, sandbox_root, shared_copy
from rubricgym.envs.swe.sandbox.syscalls import MS_NODEV, MS_NOSUID, mount
from rubricgym.envs.swe.sandbox.treediff import fingerprint

CGROUP_ROOT = Path("/sys/fs/cgroup")
MAX_LOWERS = 16
"""Unused per-snapshot ``lower/`` copies kept for fast overlay starts; older ones are evicted."""


def _cgroup_dirs(sid: str) -> dict[str, Path]:
    return {c: CGROUP_ROOT / c / "rubricgym" / sid for c in ("memory", "pids", "cpu")}


def _cgroups_writable() -> bool:
    if os.geteuid() != 0:
        return False
    return all(
        os.access(CGROUP_ROOT / c, os.W_OK) and (CGROUP_ROOT / c / "cgroup.procs").exists()
        for c in ("memory", "pids", "cpu")
    )


@dataclass
class _Slot:
    """A sandbox's host state made before its snapshot is known: a locked home, its quota tmpfs (root), its
    cgroups with the limits set, and the launcher of its first command (already in the cgroups)."""

    limits: Limits
    home: Path
    lock: int | None
    disk: Path | None
    cgroups: dict[str, Path]
    launcher: Launcher

    def discard(self) -> None:
        self.launcher.discard()
        cleanup_sandbox(self.home, self.cgroups, (self.lock,))


def _discard_all(slots: list[_Slot]) -> None:
    while slots:
        with suppress(Exception):
            slots.pop().discard()


class BwrapBackend(SandboxBackend):
    """Sandboxes made of bubblewrap processes over a private copy of the repository.

    ``uid`` is the unprivileged user commands run as when we are root (default 65534, ``nobody``); as a
    non-root user, commands run as ourselves. ``cgroups`` adds per-sandbox cgroup v1 limits where writable.
    ``overlay`` (root only) makes /work an overlayfs over a shared, read-only per-snapshot copy owned by the
    sandbox user, so creating a sandbox costs a mount instead of a copy; without it /work is a full copy. As
    root, /work's writable layer lives on a tmpfs of ``Limits.disk_mb`` (the disk quota). The first ``create``
    sweeps what sandboxes of dead owners left; at most ``max_lowers`` unused snapshot copies are kept. ``spares``
    sandboxes' snapshot-independent state is made ahead in a thread (0: none).
    """

    name = "bwrap"

    def __init__(
        self,
        uid: int = SANDBOX_UID,
        cgroups: bool = True,
        overlay: bool = True,
        max_lowers: int = MAX_LOWERS,
        spares: int = 1,
    ):
        self.uid = uid if os.geteuid() == 0 else None
        self.use_cgroups = cgroups and _cgroups_writable()
        self.overlay = overlay and os.geteuid() == 0
        self.quota = os.geteuid() == 0
        self.max_lowers = max_lowers
        self._runtime: Path | None = None
        self._sh_rlimits: bool | None = None
        self.spares = spares
        self._spare_slots: list[_Slot] = []
        self._pool_lock = threading.Lock()
        self._building = False
        self._closed = False
        self._finalizer = weakref.finalize(self, _discard_all, self._spare_slots)
        self._swept = False

    def sweep(self) -> list[str]:
        """Remove the sandboxes (folders, mounts, cgroups, processes) of owners that died; their names."""
        removed = sweep(sandbox_root() / "work", _cgroup_dirs)
        evict_lowers(sandbox_root() / "lower", self.max_lowers)
        self._swept = True
        return removed

    async def _lower(self, snapshot: Path) -> tuple[Path, int]:
        """A copy of ``snapshot`` owned by the sandbox user, shared read-only by its sandboxes' overlays, and
        an fd holding a shared lock on it (no eviction while a sandbox reads it)."""
        stats = await asyncio.to_thread(fingerprint, str(snapshot))
        sig = hashlib.sha1(repr(sorted(stats.items())).encode()).hexdigest()[:16]
        key = (str(snapshot.resolve()), sig)
        parent = sandbox_root() / "lower"
        parent.mkdir(exist_ok=True, mode=0o711)
        os.chmod(parent, 0o711)
        target = parent / hashlib.sha1(f"{key}".encode()).hexdigest()[:20]
        created = False
        for _ in range(3):
            if not target.is_dir():
                created = True
                tmp = parent / f".{target.name}-{uuid.uuid4().hex[:6]}"
                await _run("cp", "-a", "--", f"{snapshot}/.", str(tmp))
                if self.uid is not None:
                    await _run("chown", "-R", "--no-dereference", f"{self.uid}:{self.uid}", "--", str(tmp))
                os.chmod(tmp, 0o755)
                try:
                    tmp.rename(target)
                except OSError:
                    await asyncio.to_thread(rmtree, tmp)
            fd = take_lock(target, shared=True, wait_s=5)
            if fd is not None and os.fstat(fd).st_ino == os.stat(target).st_ino:  # not evicted meanwhile
                os.utime(target)  # most recently used: evicted last
                if created:
                    await asyncio.to_thread(evict_lowers, parent, self.max_lowers)
                return target, fd
            release(fd)
        raise SandboxError(f"could not prepare a shared copy of {snapshot}")

    async def _overlay(self, lower: Path, home: Path, layer: Path) -> Path | None:
        """Mount ``home/merged`` as an overlay over ``lower`` writing to ``layer``; ``None`` if mounting fails."""
        upper, scratch, merged = layer / "upper", layer / "scratch", home / "merged"
        for d in (upper, scratch, merged):
            d.mkdir(mode=0o700)
            if self.uid is not None:
                os.chown(d, self.uid, self.uid)
        opts = f"lowerdir={lower},upperdir={upper},workdir={scratch}"
        try:
            if any(c in str(p) for p in (lower, upper, scratch) for c in ",:\\"):
                raise OSError(f"{opts!r}: a path holds a character the overlay options cannot carry")
            mount("overlay", str(merged), "overlay", opts)
        except OSError:
            self.overlay = False
            for d in (upper, scratch, merged):
                d.rmdir()
            return None
        return merged

    def _mount_disk(self, home: Path, limits: Limits) -> Path | None:
        """``home/disk``: a tmpfs of ``limits.disk_mb`` for the sandbox's writable files (root only)."""
        if not self.quota:
            return None
        disk = home / "disk"
        disk.mkdir(mode=0o711)
        try:
            mount("rg-disk", str(disk), "tmpfs", f"size={limits.disk_mb}m,mode=0711", MS_NOSUID | MS_NODEV)
        except OSError:
            self.quota = False
            disk.rmdir()
            return None
        return disk

    def _new_slot(self, limits: Limits) -> _Slot:
        """A fresh home (locked), quota tmpfs, cgroups and launcher for one sandbox."""
        parent = sandbox_root() / "work"
        parent.mkdir(exist_ok=True, mode=0o711)
        os.chmod(parent, 0o711)  # whatever the umask: the sandbox user must traverse it
        sid = uuid.uuid4().hex[:16]
        # made under a dot name with its lock held, then renamed: a sweep never sees it unlocked
        building, home = parent / f".{sid}.new", parent / sid
        building.mkdir(mode=0o711)
        lock = take_lock(building / LOCK_NAME)
        building.rename(home)
        cgroups = _cgroup_dirs(sid) if self.use_cgroups else {}
        try:
            disk = self._mount_disk(home, limits)
            cgroups = _make_cgroups(cgroups, limits)
            launcher = Launcher(launch_prelude(limits, cgroups, bool(self._sh_rlimits)))
        except BaseException:
            cleanup_sandbox(home, cgroups, (lock,))
            raise
        return _Slot(limits, home, lock, disk, cgroups, launcher)

    def _take_spare(self, limits: Limits) -> _Slot | None:
        with self._pool_lock:
            slots = self._spare_slots
            stale = [s for s in slots if s.limits != limits or not s.launcher.alive()]
            slots[:] = [s for s in slots if s not in stale]
            slot = slots.pop() if slots else None
        for s in stale:
            s.discard()
        return slot

    def _refill(self, limits: Limits) -> None:
        """Make spares for ``limits`` in a thread, up to ``spares`` (one thread at a time)."""
        with self._pool_lock:
            if self._building or self._closed or len(self._spare_slots) >= self.spares:
                return
            self._building = True
        threading.Thread(target=self._build_spares, args=(limits,), name="rubricgym-bwrap-spares", daemon=True).start()

    def _build_spares(self, limits: Limits) -> None:
        try:
            while True:
                with self._pool_lock:
                    if self._closed or len(self._spare_slots) >= self.spares:
                        return
                try:
                    slot = self._new_slot(limits)
                except Exception:  # the next create makes its own and says why
                    return
                with self._pool_lock:
                    if not self._closed:
                        self._spare_slots.append(slot)
                        continue
                slot.discard()
                return
        finally:
            with self._pool_lock:
                self._building = False

    async def aclose(self) -> None:
        """Remove the spares made ahead (sandboxes already created stay until destroyed)."""
        with self._pool_lock:
            self._closed = True
        await asyncio.to_thread(_discard_all, self._spare_slots)

    @classmethod
    def unavailable_reason(cls) -> str | None:
        for tool in ("bwrap", "prlimit") + (("unshare",) if os.geteuid() == 0 else ()):
            if shutil.which(tool) is None:
                return f"`{tool}` is not installed (apt-get install bubblewrap util-linux)"
        if not os.path.exists(SANDBOX_PYTHON):
            return f"{SANDBOX_PYTHON} is missing (apt-get install python3)"
        return None

    async def create(self, snapshot: Path, limits: Limits | None = None, deps: Path | None = None) -> BwrapSandbox:
        reason = self.unavailable_reason()
        if reason:
            raise SandboxError(f"the bwrap sandbox backend cannot run here: {reason}")
        limits = limits or Limits()
        snapshot = Path(snapshot)
        if not snapshot.is_dir():
            raise SandboxError(f"snapshot {snapshot} is not a directory")
        if deps is not None and not Path(deps).is_dir():
            raise SandboxError(f"dependency folder {deps} is not a directory")
        deps_mount = await asyncio.to_thread(shared_copy, Path(deps)) if deps is not None else None
        if not self._swept:
            await asyncio.to_thread(self.sweep)
        if self._runtime is None:
            self._runtime = await asyncio.to_thread(runtime_dir)
        if self._sh_rlimits is None:
            self._sh_rlimits = await asyncio.to_thread(shell_sets_rlimits)
        slot = self._take_spare(limits) or self._new_slot(limits)
        home, disk, cgroups = slot.home, slot.disk, slot.cgroups
        locks: list[int | None] = [slot.lock]
        try:
            layer = disk or home
            work = None
            if self.overlay:
                lower, lower_fd = await self._lower(snapshot)
                locks.append(lower_fd)
                work = await self._overlay(lower, home, layer)
            if work is None:
                work = layer / "repo"
                work.mkdir(mode=0o700)
                try:
                    await _run("cp", "-a", "--", f"{snapshot}/.", str(work))
                except SandboxError as e:
                    raise SandboxError(
                        f"could not copy {snapshot} into a sandbox (larger than the disk quota of "
                        f"{limits.disk_mb} MB?): {e}"
                    ) from None
                if self.uid is not None:
                    await _run("chown", "-R", "--no-dereference", f"{self.uid}:{self.uid}", "--", str(work))
            os.chmod(work, 0o700)
        except BaseException:
            slot.launcher.discard()
            await asyncio.to_thread(cleanup_sandbox, home, cgroups, tuple(locks))
            raise
        if self.spares > 0:
            self._refill(limits)
        return BwrapSandbox(
            snapshot,
            limits,
            work,
            self.uid,
            self._runtime,
            cgroups,
            home=home,
            locks=tuple(locks),
            disk_quota_mb=limits.disk_mb if disk is not None else None,
            deps=Path(deps) if deps is not None else None,
            deps_mount=deps_mount,
            sh_rlimits=self._sh_rlimits,
            launcher=slot.launcher,
        )


def _make_cgroups(cgroups: dict[str, Path], limits: Limits) -> dict[str, Path]:
    """Create the sandbox's cgroups with its limits; ``{}`` (rlimits only) when a controller refuses."""
    try:
        for name, d in cgroups.items():
            d.mkdir(parents=True, exist_ok=True)
            if name == "memory":
                (d / "memory.limit_in_bytes").write_text(str(limits.memory_mb * 1024 * 1024))
            elif name == "pids":
                (d / "pids.max").write_text(str(limits.pids))
            else:
                (d / "cpu.cfs_period_us").write_text("100000")
                (d / "cpu.cfs_quota_us").write_text(str(max(1000, int(limits.cpus * 100000))))
    except OSError:
        kill_cgroups(cgroups, remove=True)
        return {}
    return cgroups


async def _run(*argv: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, err = await proc.communicate()
    if proc.returncode:
        raise SandboxError(f"{argv[0]} failed ({proc.returncode}): {err.decode(errors='replace').strip()}")
