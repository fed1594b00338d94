"""The ``bwrap`` backend (default, no daemon): bubblewrap with the tested safe recipe.

Every command runs as an unprivileged uid (``setpriv``) under rlimits (``prlimit``: processes, address space,
file size) inside ``bwrap`` with every namespace unshared (no network, no host processes), all capabilities
dropped, a read-only ``/usr`` and ``/etc``, a private ``/tmp``, ``--die-with-parent``, ``--new-session`` and a
cleared environment; ``bwrap`` itself (PID 1 inside) starts with an empty environment, so nothing of the host's
shows under ``/proc``. Only the sandbox's own copy of the repository is bound writable at ``/work``; as root it
lives on a size-capped tmpfs (the disk quota). When cgroup v1 controllers are writable (root), each sandbox also
gets its own memory/pids/cpu cgroup, and its process limit is that cgroup's alone (a per-uid ``RLIMIT_NPROC``
would be shared by every sandbox). A timeout or an output overflow freezes and kills ``bwrap`` and every
process below it (found through ``/proc``), taking every process the command started. Nothing survives between
commands. The host reads and writes files only through ``open_beneath`` (no link is ever followed), and what a
dead owner left behind is swept when the next backend starts (``hoststate``).
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
import shutil
import signal
import stat
import time
import uuid
import weakref
from contextlib import suppress
from pathlib import Path

from rubricgym.envs.swe.sandbox.base import (
    RUNTIME_DIR,
    WORKDIR,
    ExecResult,
    Limits,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxPathError,
    cap_bytes,
    clean_relpath,
    to_bytes,
)
from rubricgym.envs.swe.sandbox.hoststate import (
    LOCK_NAME,
    evict_lowers,
    kill_cgroups,
    release,
    remove_sandbox,
    rmtree,
    sweep,
    take_lock,
)
from rubricgym.envs.swe.sandbox.runtime import SANDBOX_PYTHON, runtime_dir, sandbox_root
from rubricgym.envs.swe.sandbox.treediff import fingerprint, open_beneath

SANDBOX_UID = 65534
CGROUP_ROOT = Path("/sys/fs/cgroup")
MAX_READ = 8 * 1024 * 1024
TMP_MB = 256
"""Size of each sandbox's private ``/tmp`` (a tmpfs)."""
MAX_LOWERS = 16
"""Unused per-snapshot ``lower/`` copies kept for fast overlay starts; older ones are evicted."""
BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONPATH": RUNTIME_DIR,
}


def _cgroup_dirs(sid: str) -> dict[str, Path]:
    return {c: CGROUP_ROOT / c / "rubricgym" / sid for c in ("memory", "pids", "cpu")}


def _cgroups_writable() -> bool:
    if os.geteuid() != 0:
        return False
    return all(os.access(CGROUP_ROOT / c, os.W_OK) and (CGROUP_ROOT / c / "cgroup.procs").exists()
               for c in ("memory", "pids", "cpu"))


class BwrapSandbox(Sandbox):
    backend = "bwrap"

    def __init__(self, snapshot: Path, limits: Limits, work: Path, uid: int | None, runtime: Path,
                 cgroups: dict[str, Path], home: Path, locks: tuple[int | None, ...] = (),
                 disk_quota_mb: int | None = None):
        super().__init__(snapshot, limits)
        self.work = work
        self.home = home
        self.disk_quota_mb = disk_quota_mb
        # best-effort clean-up when a sandbox is dropped without destroy() (an env never closed, a crash)
        self._finalizer = weakref.finalize(self, _cleanup_sync, home, cgroups, locks)
        self.uid = uid
        self.runtime = runtime
        self.cgroups = cgroups
        self._locks = locks

    def _command(self, argv: list[str], env: dict[str, str]) -> list[str]:
        lim = self.limits
        cmd: list[str] = []
        if self.cgroups:
            procs = " ".join(str(d / "cgroup.procs") for d in self.cgroups.values())
            cmd += ["/bin/sh", "-c", f'for f in {procs}; do echo $$ > "$f" || exit 125; done; exec "$@"', "rg-sandbox"]
        if self.uid is not None:
            cmd += [_tool("setpriv"), f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups"]
        # with a pids cgroup the process limit is per sandbox; RLIMIT_NPROC counts every process of the uid,
        # which all sandboxes share, so one sandbox could starve the others
        nproc = [] if "pids" in self.cgroups else [f"--nproc={lim.pids}"]
        cmd += [_tool("prlimit"), *nproc, f"--as={lim.memory_mb * 1024 * 1024}",
                f"--fsize={lim.file_mb * 1024 * 1024}", "--core=0", "--"]
        tmp_size = str(min(TMP_MB, lim.disk_mb) * 1024 * 1024)
        cmd += [_tool("bwrap"), "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib",
                "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin", "--ro-bind", "/etc",
                "/etc", "--dev", "/dev", "--proc", "/proc", "--size", tmp_size, "--tmpfs", "/tmp",
                "--bind", str(self.work), WORKDIR,
                "--ro-bind", str(self.runtime), RUNTIME_DIR, "--chdir", WORKDIR,
                "--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
                "--die-with-parent", "--new-session", "--clearenv"]
        for k, v in {**BASE_ENV, **env}.items():
            cmd += ["--setenv", k, v]
        return cmd + argv

    def _kill_tree(self, proc: asyncio.subprocess.Process) -> None:
        """SIGKILL ``bwrap`` and every process below it.

        The descendants are found through ``/proc`` parent links and frozen (SIGSTOP) before anything is
        killed, so nothing can fork away or be re-parented out of reach between the scan and the kill; the
        sandbox's cgroups, when it has them, are swept too. ``--die-with-parent`` is only a second line.
        """
        pids = [proc.pid, *_descendants(proc.pid)]
        for pid in pids[1:]:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        pids += [p for p in _descendants(proc.pid) if p not in pids]  # forked before the freeze landed
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in pids:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for d in self.cgroups.values():
            with suppress(OSError):
                for pid in (d / "cgroup.procs").read_text().split():
                    with suppress(ProcessLookupError, PermissionError):
                        os.kill(int(pid), signal.SIGKILL)

    async def _exec(self, argv: list[str], timeout: float, env: dict[str, str], output_bytes: int) -> ExecResult:
        t0 = time.monotonic()
        # an empty environment: bwrap stays PID 1 inside, and its /proc/1/environ is readable by the sandbox
        proc = await asyncio.create_subprocess_exec(
            *self._command(argv, env), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True, env={},
        )
        bufs = {"stdout": bytearray(), "stderr": bytearray()}
        over: list[str] = []

        async def pump(name: str, stream: asyncio.StreamReader) -> None:
            # past the cap we keep draining (and drop) what comes, so a writer never blocks on a full pipe
            buf = bufs[name]
            while chunk := await stream.read(65536):
                if over:
                    continue
                if len(buf) + len(chunk) > output_bytes:
                    buf += chunk[: output_bytes + 1 - len(buf)]
                    over.append(name)
                    self._kill_tree(proc)
                    continue
                buf += chunk

        assert proc.stdout is not None and proc.stderr is not None
        pumps = asyncio.gather(pump("stdout", proc.stdout), pump("stderr", proc.stderr))
        limit = None
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.gather(pumps, proc.wait())), timeout)
        except TimeoutError:
            limit = "timeout"
        finally:
            if proc.returncode is None or limit:
                self._kill_tree(proc)
                with suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), 10)
            # the pipes close when the last process holding them is gone; never wait on them for long
            with suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(pumps), 2)
            pumps.cancel()
        if over:  # the output cap fired first; a timeout reported after it is the kill still settling
            limit = "output"
        code = proc.returncode if proc.returncode is not None else -9
        if code < 0:
            code = 128 - code
        out, out_cut = cap_bytes(bytes(bufs["stdout"]), output_bytes)
        err, err_cut = cap_bytes(bytes(bufs["stderr"]), output_bytes)
        return ExecResult(exit_code=code, stdout=out, stderr=err, duration_s=time.monotonic() - t0, limit=limit,
                          stdout_truncated=out_cut, stderr_truncated=err_cut)

    def _open(self, path: str, flags: int, make_dirs: bool = False) -> tuple[str, int]:
        """``(relative path, fd)`` of ``path`` opened beneath the work dir without following any link."""
        rel = clean_relpath(path)
        if not rel and flags & os.O_WRONLY:
            raise SandboxPathError("give a file path, not the repository root")
        try:
            return rel, open_beneath(str(self.work), rel, flags, 0o644, make_dirs=make_dirs, owner=self.uid)
        except FileNotFoundError:
            raise SandboxPathError(f"{path!r} does not exist") from None
        except IsADirectoryError:
            raise SandboxPathError(f"{path!r} is a directory") from None
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                raise SandboxPathError(f"{path!r} is or passes through a symbolic link (links are not followed: "
                                       "they could lead outside the repository) or through a file") from None
            raise SandboxPathError(f"{path!r} cannot be opened: {e.strerror}") from None

    async def read_file(self, path: str) -> bytes:
        self._check_usable()
        _, fd = self._open(path, os.O_RDONLY | os.O_NONBLOCK)
        st = os.fstat(fd)
        problem = ("is a directory, not a file" if stat.S_ISDIR(st.st_mode) else
                   "is not a regular file" if not stat.S_ISREG(st.st_mode) else
                   f"is {st.st_size} bytes, larger than the {MAX_READ} bytes we read" if st.st_size > MAX_READ
                   else None)
        if problem:
            os.close(fd)
            raise SandboxPathError(f"{path!r} {problem}")
        with os.fdopen(fd, "rb") as f:
            return f.read(MAX_READ)

    async def write_file(self, path: str, data: bytes | str) -> None:
        self._check_usable()
        raw = to_bytes(data)
        _, fd = self._open(path, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK, make_dirs=True)
        with os.fdopen(fd, "wb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise SandboxPathError(f"{path!r} is not a regular file")
            if st.st_nlink > 1:  # a hard link: writing would change the other name's content too
                raise SandboxPathError(f"{path!r} is a hard link; remove it first")
            os.ftruncate(f.fileno(), 0)
            if self.uid is not None:
                os.fchown(f.fileno(), self.uid, self.uid)
            try:
                f.write(raw)
                f.flush()
            except OSError as e:
                if e.errno == errno.ENOSPC:
                    raise SandboxPathError(f"{path!r}: the sandbox's disk quota of {self.limits.disk_mb} MB is "
                                           "full; delete files first") from None
                raise

    async def fingerprint(self) -> dict[str, tuple[int, int]]:
        self._check_usable()
        fp = await asyncio.to_thread(fingerprint, str(self.work))
        return {k: (v[0], v[1]) for k, v in fp.items()}

    async def diff(self) -> str:
        self._check_usable()
        return await asyncio.to_thread(self.host_diff, self.work)

    async def destroy(self) -> None:
        if self.destroyed:
            return
        self.destroyed = True
        self._finalizer.detach()
        await asyncio.to_thread(_cleanup_sync, self.home, self.cgroups, self._locks)


def _descendants(root: int) -> list[int]:
    """Every live process whose parent chain reaches ``root`` (host pids, across pid namespaces)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat_line = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat_line[stat_line.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _cleanup_sync(home: Path, cgroups: dict[str, Path], locks: tuple[int | None, ...]) -> None:
    remove_sandbox(home, cgroups)
    for fd in locks:  # released last: until the folder is gone, no sweep may think it is stale
        release(fd)


_TOOLS: dict[str, str] = {}


def _tool(name: str) -> str:
    """The absolute path of a host tool (commands start with an empty environment, so no ``PATH`` lookup)."""
    if name not in _TOOLS:
        _TOOLS[name] = shutil.which(name) or name
    return _TOOLS[name]


class BwrapBackend(SandboxBackend):
    """Sandboxes made of bubblewrap processes over a private copy of the repository.

    ``uid`` is the unprivileged user commands run as when we are root (default 65534, ``nobody``); as a
    non-root user, commands run as ourselves. ``cgroups`` adds per-sandbox cgroup v1 limits where writable.
    ``overlay`` (root only) makes /work an overlayfs over a shared, read-only per-snapshot copy owned by the
    sandbox user, so creating a sandbox costs a mount instead of a copy; without it /work is a full copy. As
    root, /work's writable layer lives on a tmpfs of ``Limits.disk_mb`` (the disk quota). The first ``create``
    sweeps what sandboxes of dead owners left; at most ``max_lowers`` unused snapshot copies are kept.
    """

    name = "bwrap"

    def __init__(self, uid: int = SANDBOX_UID, cgroups: bool = True, overlay: bool = True,
                 max_lowers: int = MAX_LOWERS):
        self.uid = uid if os.geteuid() == 0 else None
        self.use_cgroups = cgroups and _cgroups_writable()
        self.overlay = overlay and os.geteuid() == 0 and shutil.which("mount") is not None
        self.quota = os.geteuid() == 0 and shutil.which("mount") is not None
        self.max_lowers = max_lowers
        self._runtime: Path | None = None
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
        try:
            await _run("mount", "-t", "overlay", "overlay", "-o",
                       f"lowerdir={lower},upperdir={upper},workdir={scratch}", str(merged))
        except SandboxError:
            self.overlay = False
            for d in (upper, scratch, merged):
                d.rmdir()
            return None
        return merged

    async def _disk(self, home: Path, limits: Limits) -> Path | None:
        """``home/disk``: a tmpfs of ``limits.disk_mb`` for the sandbox's writable files (root only)."""
        if not self.quota:
            return None
        disk = home / "disk"
        disk.mkdir(mode=0o711)
        try:
            await _run("mount", "-t", "tmpfs", "-o", f"size={limits.disk_mb}m,mode=0711,nosuid,nodev", "rg-disk",
                       str(disk))
        except SandboxError:
            self.quota = False
            disk.rmdir()
            return None
        return disk

    @classmethod
    def unavailable_reason(cls) -> str | None:
        for tool in ("bwrap", "prlimit") + (("setpriv",) if os.geteuid() == 0 else ()):
            if shutil.which(tool) is None:
                return f"`{tool}` is not installed (apt-get install bubblewrap util-linux)"
        if not os.path.exists(SANDBOX_PYTHON):
            return f"{SANDBOX_PYTHON} is missing (apt-get install python3)"
        return None

    async def create(self, snapshot: Path, limits: Limits | None = None) -> BwrapSandbox:
        reason = self.unavailable_reason()
        if reason:
            raise SandboxError(f"the bwrap sandbox backend cannot run here: {reason}")
        limits = limits or Limits()
        snapshot = Path(snapshot)
        if not snapshot.is_dir():
            raise SandboxError(f"snapshot {snapshot} is not a directory")
        if not self._swept:
            await asyncio.to_thread(self.sweep)
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
        locks: list[int | None] = [lock]
        try:
            if self._runtime is None:
                self._runtime = await asyncio.to_thread(runtime_dir)
            disk = await self._disk(home, limits)
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
                    raise SandboxError(f"could not copy {snapshot} into a sandbox (larger than the disk quota of "
                                       f"{limits.disk_mb} MB?): {e}") from None
                if self.uid is not None:
                    await _run("chown", "-R", "--no-dereference", f"{self.uid}:{self.uid}", "--", str(work))
            os.chmod(work, 0o700)
            cgroups = _make_cgroups(cgroups, limits)
        except BaseException:
            await asyncio.to_thread(_cleanup_sync, home, cgroups, tuple(locks))
            raise
        return BwrapSandbox(snapshot, limits, work, self.uid, self._runtime, cgroups, home=home, locks=tuple(locks),
                            disk_quota_mb=limits.disk_mb if disk is not None else None)


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
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    if proc.returncode:
        raise SandboxError(f"{argv[0]} failed ({proc.returncode}): {err.decode(errors='replace').strip()}")
