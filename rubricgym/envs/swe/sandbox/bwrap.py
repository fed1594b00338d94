"""The ``bwrap`` backend (default, no daemon): bubblewrap with the tested safe recipe.

Every command runs as an unprivileged uid (``setpriv``) under rlimits (``prlimit``: processes, address space,
file size) inside ``bwrap`` with every namespace unshared (no network, no host processes), all capabilities
dropped, a read-only ``/usr`` and ``/etc``, a private ``/tmp``, ``--die-with-parent``, ``--new-session`` and a
cleared environment. Only the sandbox's own copy of the repository is bound writable at ``/work``. When cgroup
v1 controllers are writable (root), each sandbox also gets its own memory/pids/cpu cgroup. A timeout or an
output overflow freezes and kills ``bwrap`` and every process below it (found through ``/proc``), taking every
process the command started. Nothing survives between commands.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import signal
import stat
import subprocess
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
)
from rubricgym.envs.swe.sandbox.runtime import SANDBOX_PYTHON, runtime_dir, sandbox_root
from rubricgym.envs.swe.sandbox.treediff import fingerprint

SANDBOX_UID = 65534
CGROUP_ROOT = Path("/sys/fs/cgroup")
MAX_READ = 8 * 1024 * 1024
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
                 cgroups: dict[str, Path], home: Path | None = None, mounted: bool = False):
        super().__init__(snapshot, limits)
        self.work = work
        self.home = home or work
        self.mounted = mounted
        # best-effort clean-up when a sandbox is dropped without destroy() (an env never closed, a crash)
        self._finalizer = weakref.finalize(self, _cleanup_sync, self.home, work if mounted else None, cgroups)
        self.uid = uid
        self.runtime = runtime
        self.cgroups = cgroups

    def _command(self, argv: list[str], env: dict[str, str]) -> list[str]:
        lim = self.limits
        cmd: list[str] = []
        if self.cgroups:
            procs = " ".join(str(d / "cgroup.procs") for d in self.cgroups.values())
            cmd += ["/bin/sh", "-c", f'for f in {procs}; do echo $$ > "$f" || exit 125; done; exec "$@"', "rg-sandbox"]
        if self.uid is not None:
            cmd += ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups"]
        cmd += ["prlimit", f"--nproc={lim.pids}", f"--as={lim.memory_mb * 1024 * 1024}",
                f"--fsize={lim.file_mb * 1024 * 1024}", "--core=0", "--"]
        cmd += ["bwrap", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
                "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin", "--ro-bind", "/etc", "/etc",
                "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--bind", str(self.work), WORKDIR,
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
        proc = await asyncio.create_subprocess_exec(
            *self._command(argv, env), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True,
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

    def _resolve(self, path: str) -> Path:
        rel = clean_relpath(path)
        full = self.work / rel
        real = os.path.realpath(full)
        root = os.path.realpath(self.work)
        if real != root and not real.startswith(root + os.sep):
            raise SandboxPathError(f"{path!r} resolves outside the repository (through a symbolic link)")
        return full

    async def read_file(self, path: str) -> bytes:
        self._check_usable()
        full = self._resolve(path)
        try:
            st = full.lstat()
        except FileNotFoundError:
            raise SandboxPathError(f"{path!r} does not exist") from None
        if stat.S_ISDIR(st.st_mode):
            raise SandboxPathError(f"{path!r} is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise SandboxPathError(f"{path!r} is not a regular file")
        if st.st_size > MAX_READ:
            raise SandboxPathError(f"{path!r} is {st.st_size} bytes, larger than the {MAX_READ} bytes we read")
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            return f.read(MAX_READ)

    async def write_file(self, path: str, data: bytes | str) -> None:
        self._check_usable()
        if isinstance(data, str):
            data = data.encode()
        full = self._resolve(path)
        if full == self.work:
            raise SandboxPathError("give a file path, not the repository root")
        parent = self._resolve(str(Path(clean_relpath(path)).parent))
        missing = []
        p = parent
        while not p.exists():
            missing.append(p)
            p = p.parent
        parent.mkdir(parents=True, exist_ok=True)
        if full.is_dir():
            raise SandboxPathError(f"{path!r} is a directory")
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as f:
            if self.uid is not None:
                os.fchown(f.fileno(), self.uid, self.uid)
            f.write(data)
        if self.uid is not None:
            for d in missing:
                os.chown(d, self.uid, self.uid)

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
        for d in self.cgroups.values():
            with suppress(OSError):
                for pid in (d / "cgroup.procs").read_text().split():
                    with suppress(ProcessLookupError, PermissionError):
                        os.kill(int(pid), signal.SIGKILL)
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    await asyncio.sleep(0.02)
        if self.mounted:
            with suppress(SandboxError):
                await _run("umount", "--lazy", str(self.work))
        await asyncio.to_thread(_rmtree, self.home)


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


def _cleanup_sync(home: Path, mount: Path | None, cgroups: dict[str, Path]) -> None:
    for d in cgroups.values():
        with suppress(OSError):
            for pid in (d / "cgroup.procs").read_text().split():
                with suppress(ProcessLookupError, PermissionError):
                    os.kill(int(pid), signal.SIGKILL)
    if mount is not None:
        with suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["umount", "--lazy", str(mount)], capture_output=True, timeout=30)
    _rmtree(home)
    for d in cgroups.values():
        with suppress(OSError):
            d.rmdir()


def _rmtree(path: Path) -> None:
    def fix(func, p, _exc):  # a command may have chmod-ed a directory to 000
        with suppress(OSError):
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            func(p)

    shutil.rmtree(path, onerror=fix)


class BwrapBackend(SandboxBackend):
    """Sandboxes made of bubblewrap processes over a private copy of the repository.

    ``uid`` is the unprivileged user commands run as when we are root (default 65534, ``nobody``); as a
    non-root user, commands run as ourselves. ``cgroups`` adds per-sandbox cgroup v1 limits where writable.
    ``overlay`` (root only) makes /work an overlayfs over a shared, read-only per-snapshot copy owned by the
    sandbox user, so creating a sandbox costs a mount instead of a copy; without it /work is a full copy.
    """

    name = "bwrap"

    def __init__(self, uid: int = SANDBOX_UID, cgroups: bool = True, overlay: bool = True):
        self.uid = uid if os.geteuid() == 0 else None
        self.use_cgroups = cgroups and _cgroups_writable()
        self.overlay = overlay and os.geteuid() == 0 and shutil.which("mount") is not None
        self._runtime: Path | None = None
        self._lowers: dict[tuple[str, str], Path] = {}

    async def _lower(self, snapshot: Path) -> Path:
        """A copy of ``snapshot`` owned by the sandbox user, shared read-only by its sandboxes' overlays."""
        stats = await asyncio.to_thread(fingerprint, str(snapshot))
        sig = hashlib.sha1(repr(sorted(stats.items())).encode()).hexdigest()[:16]
        key = (str(snapshot.resolve()), sig)
        if key in self._lowers and self._lowers[key].is_dir():
            return self._lowers[key]
        parent = sandbox_root() / "lower"
        parent.mkdir(exist_ok=True, mode=0o711)
        target = parent / hashlib.sha1(f"{key}".encode()).hexdigest()[:20]
        if not target.is_dir():
            tmp = parent / f".{target.name}-{uuid.uuid4().hex[:6]}"
            await _run("cp", "-a", "--", f"{snapshot}/.", str(tmp))
            if self.uid is not None:
                await _run("chown", "-R", "--no-dereference", f"{self.uid}:{self.uid}", "--", str(tmp))
            os.chmod(tmp, 0o755)
            try:
                tmp.rename(target)
            except OSError:
                await asyncio.to_thread(_rmtree, tmp)
        self._lowers[key] = target
        return target

    async def _overlay(self, snapshot: Path, home: Path) -> Path | None:
        """Mount ``home/merged`` as an overlay over the snapshot's lower copy; ``None`` if mounting fails."""
        lower = await self._lower(snapshot)
        upper, scratch, merged = home / "upper", home / "scratch", home / "merged"
        for d in (upper, scratch, merged):
            d.mkdir(mode=0o700)
            if self.uid is not None:
                os.chown(d, self.uid, self.uid)
        try:
            await _run("mount", "-t", "overlay", "overlay", "-o",
                       f"lowerdir={lower},upperdir={upper},workdir={scratch}", str(merged))
        except SandboxError:
            self.overlay = False
            return None
        return merged

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
        parent = sandbox_root() / "work"
        parent.mkdir(exist_ok=True, mode=0o711)
        sid = uuid.uuid4().hex[:16]
        home = parent / sid
        if self._runtime is None:
            self._runtime = await asyncio.to_thread(runtime_dir)
        runtime = self._runtime
        work = None
        if self.overlay:
            home.mkdir(mode=0o711)
            work = await self._overlay(snapshot, home)
            if work is None:
                await asyncio.to_thread(_rmtree, home)
        mounted = work is not None
        if work is None:
            work = home
            await _run("cp", "-a", "--", f"{snapshot}/.", str(work))
            if self.uid is not None:
                await _run("chown", "-R", "--no-dereference", f"{self.uid}:{self.uid}", "--", str(work))
        os.chmod(work, 0o700)
        cgroups = _cgroup_dirs(sid) if self.use_cgroups else {}
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
        except OSError:  # a controller refused: fall back to rlimits only
            for d in cgroups.values():
                with suppress(OSError):
                    d.rmdir()
            cgroups = {}
        return BwrapSandbox(snapshot, limits, work, self.uid, runtime, cgroups, home=home, mounted=mounted)


async def _run(*argv: str) -> None:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    if proc.returncode:
        raise SandboxError(f"{argv[0]} failed ({proc.returncode}): {err.decode(errors='replace').strip()}")
