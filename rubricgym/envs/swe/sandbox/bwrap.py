"""The ``bwrap`` backend (default, no daemon): bubblewrap with the tested safe recipe.

Every command runs as an unprivileged uid without supplementary groups (``unshare --setuid``) under rlimits
(address space, file size, no core, processes without a pids cgroup) inside ``bwrap`` with every namespace
unshared (no network, no host processes), all capabilities dropped, a read-only ``/usr`` and ``/etc``, a private
``/tmp``, ``--die-with-parent``, ``--new-session`` and a cleared environment; ``bwrap`` itself (PID 1 inside)
starts with an empty environment, so nothing of the host's shows under ``/proc``. Only the sandbox's own copy of
the repository is bound writable at ``/work``; as root it lives on a size-capped tmpfs (the disk quota). When cgroup v1
controllers are writable (root), each sandbox also gets its own memory/pids/cpu cgroup, and its process limit is
that cgroup's alone (a per-uid ``RLIMIT_NPROC`` would be shared by every sandbox). Each command starts as a root
``Launcher`` (``child``) that joins the cgroups and sets the rlimits, made ahead of the command (by the backend
for the first, right after each command for the next) because a cgroup join waits ~10 ms. A timeout or an output
overflow freezes and kills ``bwrap`` and every process below it (found through ``/proc``), taking every process
the command started. Nothing survives between commands. The host reads and writes files only through
``open_beneath`` (no link is ever followed), and what a dead owner left behind is swept when the next backend
starts (``hoststate``).
"""

from __future__ import annotations

import asyncio
import errno
import os
import shlex
import shutil
import signal
import stat
import subprocess
import time
import weakref
from contextlib import suppress
from pathlib import Path

from rubricgym.envs.swe.sandbox.base import (
    DEPS_DIR,
    RUNTIME_DIR,
    WORKDIR,
    ExecResult,
    Limits,
    Sandbox,
    SandboxPathError,
    cap_bytes,
    clean_relpath,
    copy_out,
    quote,
    to_bytes,
)
from rubricgym.envs.swe.sandbox.child import Child, Launcher
from rubricgym.envs.swe.sandbox.hoststate import release, remove_sandbox
from rubricgym.envs.swe.sandbox.treediff import fingerprint, open_beneath

SANDBOX_UID = 65534
MAX_READ = 8 * 1024 * 1024
TMP_MB = 256
"""Size of each sandbox's private ``/tmp`` (a tmpfs)."""
BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONPATH": f"{RUNTIME_DIR}:{DEPS_DIR}",
}


def _rlimits(limits: Limits, cgroups: dict[str, Path]) -> dict[str, int]:
    """The rlimits in ``ulimit`` flags and units (KiB, 512-byte blocks). With a pids cgroup the process limit is per
    sandbox; RLIMIT_NPROC counts every process of the uid, which all sandboxes share, so one could starve another."""
    lim = {"-v": limits.memory_mb * 1024, "-f": limits.file_mb * 2048, "-c": 0}
    if "pids" not in cgroups:
        lim["-p"] = limits.pids
    return lim


def prlimit_args(limits: Limits, cgroups: dict[str, Path]) -> dict[str, int]:
    """The same rlimits as ``prlimit`` options (bytes)."""
    names = {"-v": ("as", 1024), "-f": ("fsize", 512), "-c": ("core", 1), "-p": ("nproc", 1)}
    return {names[k][0]: v * names[k][1] for k, v in _rlimits(limits, cgroups).items()}


def launch_prelude(limits: Limits, cgroups: dict[str, Path], sh_rlimits: bool) -> str:
    """The root shell commands a sandbox's ``Launcher`` runs before its command: join the cgroups, and set the
    rlimits where ``/bin/sh``'s ``ulimit`` was checked to set them (``shell_sets_rlimits``)."""
    script = []
    if cgroups:
        procs = " ".join(shlex.quote(str(d / "cgroup.procs")) for d in cgroups.values())
        script.append(f'for f in {procs}; do echo $$ > "$f" || exit 125; done')
    if sh_rlimits:
        script += [f"ulimit {flag} {value} || exit 125" for flag, value in _rlimits(limits, cgroups).items()]
    return "".join(line + "; " for line in script)


class BwrapSandbox(Sandbox):
    backend = "bwrap"

    def __init__(
        self,
        snapshot: Path,
        limits: Limits,
        work: Path,
        uid: int | None,
        runtime: Path,
        cgroups: dict[str, Path],
        home: Path,
        locks: tuple[int | None, ...] = (),
        disk_quota_mb: int | None = None,
        deps: Path | None = None,
        deps_mount: Path | None = None,
        sh_rlimits: bool = False,
        launcher: Launcher | None = None,
    ):
        super().__init__(snapshot, limits, deps)
        self.sh_rlimits = sh_rlimits
        """Whether ``/bin/sh``'s ``ulimit`` sets the rlimits (checked by ``shell_sets_rlimits``); else ``prlimit``."""
        self._prelude = launch_prelude(limits, cgroups, sh_rlimits)
        self._launcher = launcher
        """The next command's launcher, made ahead (by the backend, then after each command)."""
        self._repark: asyncio.Handle | None = None
        self.work = work
        self.home = home
        self.disk_quota_mb = disk_quota_mb
        # best-effort clean-up when a sandbox is dropped without destroy() (an env never closed, a crash)
        self._finalizer = weakref.finalize(self, cleanup_sandbox, home, cgroups, locks)
        self.uid = uid
        self.runtime = runtime
        self.deps_mount = deps_mount
        """The readable copy of ``deps`` that is bound read-only at ``DEPS_DIR``."""
        self.cgroups = cgroups
        self._locks = locks

    def _command(self, argv: list[str], env: dict[str, str]) -> list[str]:
        """What the launcher (which joined the cgroups and set the rlimits, see ``launch_prelude``) executes."""
        lim = self.limits
        cmd: list[str] = []
        if self.uid is not None:
            # unshare without a namespace flag only drops to the user: setgroups(0), setgid, setuid (a quarter of
            # setpriv's start-up cost)
            cmd += [_tool("unshare"), f"--setgid={self.uid}", f"--setuid={self.uid}", "--"]
        if not self.sh_rlimits:
            cmd += [_tool("prlimit"), *[f"--{k}={v}" for k, v in prlimit_args(lim, self.cgroups).items()], "--"]
        tmp_size = str(min(TMP_MB, lim.disk_mb) * 1024 * 1024)
        cmd += [
            _tool("bwrap"),
            "--ro-bind",
            "/usr",
            "/usr",
            "--symlink",
            "usr/bin",
            "/bin",
            "--symlink",
            "usr/lib",
            "/lib",
            "--symlink",
            "usr/lib64",
            "/lib64",
            "--symlink",
            "usr/sbin",
            "/sbin",
            "--ro-bind",
            "/etc",
            "/etc",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--size",
            tmp_size,
            "--tmpfs",
            "/tmp",
            "--bind",
            str(self.work),
            WORKDIR,
            "--ro-bind",
            str(self.runtime),
            RUNTIME_DIR,
            *(["--ro-bind", str(self.deps_mount), DEPS_DIR] if self.deps_mount else []),
            "--chdir",
            WORKDIR,
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--cap-drop",
            "ALL",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
        ]
        for k, v in {**BASE_ENV, **env}.items():
            cmd += ["--setenv", k, v]
        return cmd + argv

    def _kill_tree(self, root: int) -> None:
        """SIGKILL ``bwrap`` and every process below it.

        The descendants are found through ``/proc`` parent links and frozen (SIGSTOP) before anything is
        killed, so nothing can fork away or be re-parented out of reach between the scan and the kill; the
        sandbox's cgroups, when it has them, are swept too. ``--die-with-parent`` is only a second line.
        """
        pids = [root, *_descendants(root)]
        for pid in pids[1:]:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        pids += [p for p in _descendants(root) if p not in pids]  # forked before the freeze landed
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(root, signal.SIGKILL)
        for pid in pids:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for d in self.cgroups.values():
            with suppress(OSError):
                for member in (d / "cgroup.procs").read_text().split():
                    with suppress(ProcessLookupError, PermissionError):
                        os.kill(int(member), signal.SIGKILL)

    async def _exec(self, argv: list[str], timeout: float, env: dict[str, str], output_bytes: int) -> ExecResult:
        if self._repark is not None:
            self._repark.cancel()
            self._repark = None
        launcher, self._launcher = self._launcher, None
        if launcher is not None and not launcher.alive():  # killed with the last command's tree
            launcher.discard()
            launcher = None
        # an empty environment: bwrap stays PID 1 inside, and its /proc/1/environ is readable by the sandbox
        launcher = launcher or Launcher(self._prelude)
        child = Child(launcher, output_bytes, on_overflow=lambda: self._kill_tree(child.pid))
        t0 = time.monotonic()
        launcher.go(f"exec {quote(self._command(argv, env))} </dev/null\n")
        limit = None
        try:
            try:
                await asyncio.wait_for(asyncio.shield(asyncio.gather(child.exited, child.drained)), timeout)
            except TimeoutError:
                limit = "timeout"
            finally:
                if child.returncode is None or limit:
                    self._kill_tree(child.pid)
                    with suppress(TimeoutError):
                        await asyncio.wait_for(asyncio.shield(child.exited), 10)
                # the pipes close when the last process holding them is gone; never wait on them for long
                with suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(child.drained), 2)
        finally:
            child.close()
            if not self.destroyed:  # the next command's launcher joins the cgroups while the agent thinks
                self._repark = asyncio.get_running_loop().call_soon(self._park)
        if child.over:  # the output cap fired first; a timeout reported after it is the kill still settling
            limit = "output"
        code = child.returncode if child.returncode is not None else -9
        if code < 0:
            code = 128 - code
        out, out_cut = cap_bytes(bytes(child.output["stdout"]), output_bytes)
        err, err_cut = cap_bytes(bytes(child.output["stderr"]), output_bytes)
        return ExecResult(
            exit_code=code,
            stdout=out,
            stderr=err,
            duration_s=time.monotonic() - t0,
            limit=limit,
            stdout_truncated=out_cut,
            stderr_truncated=err_cut,
        )

    def _park(self) -> None:
        self._repark = None
        if self.destroyed or self._launcher is not None:
            return
        with suppress(OSError):  # e.g. no process left under the machine's limit: the command makes its own
            self._launcher = Launcher(self._prelude)

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
                raise SandboxPathError(
                    f"{path!r} is or passes through a symbolic link (links are not followed: "
                    "they could lead outside the repository) or through a file"
                ) from None
            raise SandboxPathError(f"{path!r} cannot be opened: {e.strerror}") from None

    async def read_file(self, path: str) -> bytes:
        self._check_usable()
        _, fd = self._open(path, os.O_RDONLY | os.O_NONBLOCK)
        st = os.fstat(fd)
        problem = (
            "is a directory, not a file"
            if stat.S_ISDIR(st.st_mode)
            else "is not a regular file"
            if not stat.S_ISREG(st.st_mode)
            else f"is {st.st_size} bytes, larger than the {MAX_READ} bytes we read"
            if st.st_size > MAX_READ
            else None
        )
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
                    raise SandboxPathError(
                        f"{path!r}: the sandbox's disk quota of {self.limits.disk_mb} MB is full; delete files first"
                    ) from None
                raise

    async def export(self, path: str, dest: Path) -> None:
        self._check_usable()
        rel, fd = self._open(path, os.O_RDONLY | os.O_DIRECTORY)  # no link on the way, and a folder
        os.close(fd)
        await asyncio.to_thread(copy_out, self.work / rel, Path(dest))

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
        if self._repark is not None:
            self._repark.cancel()
        if self._launcher is not None:
            self._launcher.discard()
        await asyncio.to_thread(cleanup_sandbox, self.home, self.cgroups, self._locks)


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
        ppid = int(stat_line[stat_line.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def cleanup_sandbox(home: Path, cgroups: dict[str, Path], locks: tuple[int | None, ...]) -> None:
    remove_sandbox(home, cgroups)
    for fd in locks:  # released last: until the folder is gone, no sweep may think it is stale
        release(fd)


def shell_sets_rlimits() -> bool:
    """Whether ``/bin/sh``'s ``ulimit`` sets what ``_command`` asks in the units it uses (dash's: ``-v`` KiB,
    ``-f`` 512-byte blocks, ``-p`` processes; bash's ``-p`` is the pipe size), read back from ``/proc``."""
    script = "ulimit -v 1048576 && ulimit -f 2048 && ulimit -c 0 && ulimit -p 77 && exec cat /proc/self/limits"
    want = {"Max address space": 1 << 30, "Max file size": 1 << 20, "Max core file size": 0, "Max processes": 77}
    try:
        out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=30, env={}).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    seen = {}
    for line in out.splitlines():
        name, _, rest = line.partition("  ")
        values = rest.split()
        if name in want and len(values) >= 2:
            seen[name] = values[:2]
    return all(seen.get(name) == [str(v), str(v)] for name, v in want.items())


_TOOLS: dict[str, str] = {}


def _tool(name: str) -> str:
    """The absolute path of a host tool (commands start with an empty environment, so no ``PATH`` lookup)."""
    if name not in _TOOLS:
        _TOOLS[name] = shutil.which(name) or name
    return _TOOLS[name]
