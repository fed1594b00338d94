"""The sandbox interface: an isolated copy of a repository in which an agent's commands run.

A backend creates a ``Sandbox`` from a repository snapshot (a host directory). Inside, the repository is at
``/work`` and is the only writable persistent place. Every sandbox has a wall-clock limit per command and over
its lifetime, a memory limit, a process limit, an output cap and no network. Commands that break a limit are
killed with their whole process tree and come back as an ``ExecResult`` that says which limit they hit: a
limit is an observation for the agent, never an exception.
"""

from __future__ import annotations

import os
import shlex
import stat
import tarfile
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from rubricgym.envs.swe.sandbox.treediff import diff_trees

WORKDIR = "/work"
RUNTIME_DIR = "/opt/rubricgym"
"""Where the read-only Python test runtime (pytest and its dependencies) is mounted inside every sandbox."""
DEPS_DIR = "/opt/rubricgym-deps"
"""Where a task's read-only dependency folder (``pip install --target``, see ``deps``) is mounted, if it has one."""


class SandboxError(RuntimeError):
    """The sandbox could not be created or is unusable (backend missing, destroyed, expired)."""


class SandboxPathError(ValueError):
    """A file path given to ``read_file``/``write_file`` is outside the work dir, does not exist, or is not a
    path at all (a NUL byte, a lone surrogate)."""


MAX_ARG_BYTES = 128 * 1024 - 1
"""The kernel's limit on one argument of ``execve`` (``MAX_ARG_STRLEN``, with its terminating NUL)."""
MAX_ARGV_BYTES = 1024 * 1024
"""Our cap on a whole command line (the kernel's total is a quarter of the stack limit, often 2 MB)."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox."""

    timeout_s: float = 60.0
    """Default wall-clock limit of one command."""
    lifetime_s: float = 3600.0
    """Wall-clock limit of the sandbox: after it, commands are refused."""
    memory_mb: int = 2048
    pids: int = 256
    cpus: float = 1.0
    output_bytes: int = 1_000_000
    """Cap on stdout and on stderr of one command; past it the command is killed."""
    file_mb: int = 512
    """Largest file a command may write."""
    disk_mb: int = 1024
    """Disk quota: the most the sandbox's /work may hold (a size-capped tmpfs; it counts toward memory too)."""


@dataclass
class ExecResult:
    """What one command did. ``limit`` names the limit that killed it (``timeout``, ``output``), if any."""

    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    limit: str | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.limit is None

    @property
    def timed_out(self) -> bool:
        return self.limit == "timeout"

    def describe(self, max_chars: int = 6000) -> str:
        """A deterministic text for an agent: exit code, output and which limit (if any) stopped the command."""
        parts = []
        if self.limit == "timeout":
            parts.append("The command timed out and was killed (with every process it started).")
        elif self.limit == "output":
            parts.append("The command produced too much output and was killed (with every process it started).")
        elif self.limit == "disk":
            parts.append("The sandbox's disk quota is full (No space left on device): delete files to free space.")
        elif self.limit == "input":
            parts.append("The command was not run: it cannot be passed to a process as given.")
        elif self.limit:
            parts.append(f"The command was stopped: {self.limit}.")
        if self.exit_code in (137, -9) and self.limit is None:
            parts.append("The command was killed (SIGKILL): it probably ran out of memory or processes.")
        parts += self.notes
        parts.append(f"exit code: {self.exit_code}")
        half = max_chars // 2
        for name, text, cut in (
            ("stdout", self.stdout, self.stdout_truncated),
            ("stderr", self.stderr, self.stderr_truncated),
        ):
            if text or cut:
                shown = text if len(text) <= half else text[:half] + f"\n[... {len(text) - half} more characters]"
                if cut:
                    shown += "\n[output truncated at the sandbox's output cap]"
                parts.append(f"{name}:\n{shown}")
        return "\n".join(parts)


def clean_relpath(path: str) -> str:
    """``path`` (absolute under /work or relative to it) as a normalised relative path; raises
    ``SandboxPathError`` if it escapes or cannot name a file (a NUL byte, a lone surrogate, not text)."""
    if not isinstance(path, str):
        raise SandboxPathError(f"a path must be text, got {type(path).__name__}")
    if "\0" in path:
        raise SandboxPathError(f"{path!r} contains a NUL byte, which no file name can hold")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise SandboxPathError(f"{path!r} is not valid UTF-8 text (a lone surrogate)") from None
    p = PurePosixPath(path.strip())
    if p.is_absolute():
        try:
            p = p.relative_to(WORKDIR)
        except ValueError:
            raise SandboxPathError(f"{path!r} is outside the repository ({WORKDIR}); use a path inside it") from None
    parts: list[str] = []
    for part in p.parts:
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise SandboxPathError(f"{path!r} points outside the repository ({WORKDIR})")
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts)


def to_bytes(data: bytes | str) -> bytes:
    """File content as bytes; text that is not valid UTF-8 (lone surrogates) has those characters replaced."""
    return data if isinstance(data, bytes) else data.encode("utf-8", errors="replace")


def argv_problem(argv: list[str], env: dict[str, str]) -> str | None:
    """Why ``argv``/``env`` cannot be handed to ``execve`` (a NUL byte, a lone surrogate, too long), or ``None``."""
    total = 0
    for what, items in (("the command", argv), ("an environment variable", [f"{k}={v}" for k, v in env.items()])):
        for a in items:
            if not isinstance(a, str):
                return f"{what} holds a {type(a).__name__}, not text"
            if "\0" in a:
                return f"{what} contains a NUL byte, which no process argument can hold"
            try:
                n = len(a.encode("utf-8"))
            except UnicodeEncodeError:
                return f"{what} is not valid UTF-8 text (a lone surrogate)"
            if n > MAX_ARG_BYTES:
                return (
                    f"{what} is {n} bytes; one argument can hold at most {MAX_ARG_BYTES} bytes: write a script "
                    "file and run that instead"
                )
            total += n + 1
    if total > MAX_ARGV_BYTES:
        return f"the command line is {total} bytes, over the {MAX_ARGV_BYTES}-byte cap: write a script file instead"
    return None


def cap_bytes(data: bytes, limit: int) -> tuple[str, bool]:
    """``data`` decoded (invalid UTF-8 replaced), cut to ``limit`` bytes; True when cut."""
    cut = len(data) > limit
    return data[:limit].decode("utf-8", errors="replace"), cut


class Sandbox(ABC):
    """An isolated, writable copy of a repository snapshot. Use as ``async with``; ``destroy`` is idempotent."""

    backend: str = ""
    disk_quota_mb: int | None = None
    """The enforced size limit of /work in MB (``None`` where this backend cannot enforce one)."""

    def __init__(self, snapshot: Path, limits: Limits, deps: Path | None = None):
        self.snapshot = Path(snapshot)
        self.limits = limits
        self.deps = deps
        self.created_at = time.monotonic()
        self.destroyed = False

    def _check_usable(self) -> None:
        if self.destroyed:
            raise SandboxError("the sandbox was destroyed; create a new one")

    def expired(self) -> bool:
        return time.monotonic() - self.created_at > self.limits.lifetime_s

    def _timeout(self, timeout: float | None) -> float:
        t = self.limits.timeout_s if timeout is None else float(timeout)
        if t <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        return min(t, self.limits.timeout_s * 10)

    async def exec(
        self,
        cmd: str | list[str],
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        output_bytes: int | None = None,
    ) -> ExecResult:
        """Run ``cmd`` (a shell string for bash, or an argv list) in ``/work`` under the sandbox's limits."""
        self._check_usable()
        if self.expired():
            return ExecResult(
                exit_code=-1,
                stdout="",
                stderr="",
                duration_s=0.0,
                limit="sandbox lifetime",
                notes=[f"The sandbox's lifetime of {self.limits.lifetime_s:g} s is over."],
            )
        argv = ["/bin/bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        env = dict(env or {})
        problem = argv_problem(argv, env)
        if problem:
            return ExecResult(exit_code=126, stdout="", stderr="", duration_s=0.0, limit="input", notes=[problem + "."])
        res = await self._exec(argv, self._timeout(timeout), env, output_bytes or self.limits.output_bytes)
        if res.limit is None and "No space left on device" in res.stderr[-20000:] and self.disk_quota_mb:
            res.limit = "disk"
            res.notes.append(f"The disk quota of this sandbox is {self.disk_quota_mb} MB for /work.")
        return res

    @abstractmethod
    async def _exec(self, argv: list[str], timeout: float, env: dict[str, str], output_bytes: int) -> ExecResult:
        """Run ``argv`` with the given limits; kill the whole process tree on timeout or output overflow."""

    @abstractmethod
    async def read_file(self, path: str) -> bytes:
        """The bytes of ``path`` (relative to /work). Raises ``SandboxPathError`` if missing or outside /work."""

    @abstractmethod
    async def write_file(self, path: str, data: bytes | str) -> None:
        """Write ``path`` (relative to /work), creating parent directories."""

    @abstractmethod
    async def fingerprint(self) -> dict[str, tuple[int, int]]:
        """``{relative path: (size, mtime_ns)}`` of every regular file in /work, to see what a command changed."""

    @abstractmethod
    async def diff(self) -> str:
        """A unified diff (``a/`` and ``b/`` prefixes, ``patch -p1`` applicable) from the snapshot to /work."""

    @abstractmethod
    async def export(self, path: str, dest: Path) -> None:
        """Copy the folder ``path`` (relative to /work) out to the host folder ``dest`` (created, must not exist).

        What a sandbox wrote is untrusted: only folders, regular files and links that stay inside ``path`` come
        out (links are copied as links, never followed); anything else (devices, FIFOs, links out) is left behind.
        """

    @abstractmethod
    async def destroy(self) -> None:
        """Kill everything and delete the sandbox's state. Idempotent."""

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.destroy()

    def host_diff(self, work: Path) -> str:
        return diff_trees(self.snapshot, work)


class SandboxBackend(ABC):
    """Creates sandboxes of one kind (``bwrap``, ``docker``)."""

    name: str = ""

    @classmethod
    @abstractmethod
    def unavailable_reason(cls) -> str | None:
        """Why this backend cannot run on this machine, or ``None`` when it can."""

    @abstractmethod
    async def create(self, snapshot: Path, limits: Limits | None = None, deps: Path | None = None) -> Sandbox:
        """A new sandbox whose /work starts as a copy of ``snapshot``; ``deps`` (a folder of installed
        distributions) is mounted read-only at ``DEPS_DIR``, which is on every command's ``PYTHONPATH``."""

    async def aclose(self) -> None:  # noqa: B027  (most backends hold nothing to release)
        """Release the backend's own resources (clients, caches)."""


def link_stays_inside(rel: str, target: str) -> bool:
    """Whether a link at ``rel`` (relative to a tree's root) pointing to ``target`` resolves inside that tree."""
    if not target or target.startswith("/") or "\0" in target:
        return False
    depth = len(PurePosixPath(rel).parts) - 1
    for part in PurePosixPath(target).parts:
        depth += -1 if part == ".." else 0 if part == "." else 1
        if depth < 0:
            return False
    return True


def copy_out(src: Path, dest: Path) -> None:
    """Copy the host folder ``src`` (written by sandboxed code) to ``dest`` without following any link: folders,
    regular files (mode bits 0o755 at most) and links that stay inside ``src``; nothing else."""
    dest.mkdir(parents=True)
    for dirpath, dirnames, filenames in os.walk(src):
        rel_dir = os.path.relpath(dirpath, src)
        for name in [*dirnames, *filenames]:
            full = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            out = dest / rel
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(full)
                if link_stays_inside(rel, target):
                    os.symlink(target, out)
            elif stat.S_ISDIR(st.st_mode):
                out.mkdir()
            elif stat.S_ISREG(st.st_mode):
                fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                with os.fdopen(fd, "rb") as f, open(out, "wb") as g:
                    while chunk := f.read(1 << 20):
                        g.write(chunk)
                os.chmod(out, 0o755 if st.st_mode & 0o111 else 0o644)
    _drop_links_out(dest)


def _drop_links_out(dest: Path) -> None:
    """Remove every link under ``dest`` that resolves outside it (a link through another link can)."""
    root = os.path.realpath(dest)
    for dirpath, dirnames, filenames in os.walk(dest):
        for name in [*dirnames, *filenames]:
            full = os.path.join(dirpath, name)
            if os.path.islink(full) and os.path.commonpath([root, os.path.realpath(full)]) != root:
                os.unlink(full)


def extract_out(tf: tarfile.TarFile, prefix: str, dest: Path) -> None:
    """Extract the members of ``tf`` under ``prefix`` into ``dest`` with the same rules as ``copy_out``."""
    dest.mkdir(parents=True)
    for m in tf:
        rel = PurePosixPath(m.name)
        try:
            rel = rel.relative_to(prefix)
        except ValueError:
            continue
        if not rel.parts or ".." in rel.parts or rel.is_absolute():
            continue
        out = dest.joinpath(*rel.parts)
        if not out.parent.is_dir() or out.parent.is_symlink():
            continue
        if m.isdir():
            out.mkdir(exist_ok=True)
        elif m.issym():
            if link_stays_inside(str(rel), m.linkname):
                os.symlink(m.linkname, out)
        elif m.isreg():
            data = tf.extractfile(m)
            if data is None:
                continue
            with open(out, "wb") as g:
                while chunk := data.read(1 << 20):
                    g.write(chunk)
            os.chmod(out, 0o755 if m.mode & 0o111 else 0o644)
    _drop_links_out(dest)


def quote(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)
