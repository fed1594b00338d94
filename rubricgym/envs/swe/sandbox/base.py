"""The sandbox interface: an isolated copy of a repository in which an agent's commands run.

A backend creates a ``Sandbox`` from a repository snapshot (a host directory). Inside, the repository is at
``/work`` and is the only writable persistent place. Every sandbox has a wall-clock limit per command and over
its lifetime, a memory limit, a process limit, an output cap and no network. Commands that break a limit are
killed with their whole process tree and come back as an ``ExecResult`` that says which limit they hit: a
limit is an observation for the agent, never an exception.
"""

from __future__ import annotations

import shlex
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from rubricgym.envs.swe.sandbox.treediff import diff_trees

WORKDIR = "/work"
RUNTIME_DIR = "/opt/rubricgym"
"""Where the read-only Python test runtime (pytest and its dependencies) is mounted inside every sandbox."""


class SandboxError(RuntimeError):
    """The sandbox could not be created or is unusable (backend missing, destroyed, expired)."""


class SandboxPathError(ValueError):
    """A file path given to ``read_file``/``write_file`` is outside the work dir or does not exist."""


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
    """Largest file a command may write (and, in containers, the size of the work dir)."""


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
        elif self.limit:
            parts.append(f"The command was stopped: {self.limit}.")
        if self.exit_code in (137, -9) and self.limit is None:
            parts.append("The command was killed (SIGKILL): it probably ran out of memory or processes.")
        parts += self.notes
        parts.append(f"exit code: {self.exit_code}")
        half = max_chars // 2
        for name, text, cut in (("stdout", self.stdout, self.stdout_truncated), ("stderr", self.stderr,
                                                                                  self.stderr_truncated)):
            if text or cut:
                shown = text if len(text) <= half else text[:half] + f"\n[... {len(text) - half} more characters]"
                if cut:
                    shown += "\n[output truncated at the sandbox's output cap]"
                parts.append(f"{name}:\n{shown}")
        return "\n".join(parts)


def clean_relpath(path: str) -> str:
    """``path`` (absolute under /work or relative to it) as a normalised relative path; raises if it escapes."""
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


def cap_bytes(data: bytes, limit: int) -> tuple[str, bool]:
    """``data`` decoded (invalid UTF-8 replaced), cut to ``limit`` bytes; True when cut."""
    cut = len(data) > limit
    return data[:limit].decode("utf-8", errors="replace"), cut


class Sandbox(ABC):
    """An isolated, writable copy of a repository snapshot. Use as ``async with``; ``destroy`` is idempotent."""

    backend: str = ""

    def __init__(self, snapshot: Path, limits: Limits):
        self.snapshot = Path(snapshot)
        self.limits = limits
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

    async def exec(self, cmd: str | list[str], timeout: float | None = None, env: dict[str, str] | None = None,
                   output_bytes: int | None = None) -> ExecResult:
        """Run ``cmd`` (a shell string for bash, or an argv list) in ``/work`` under the sandbox's limits."""
        self._check_usable()
        if self.expired():
            return ExecResult(exit_code=-1, stdout="", stderr="", duration_s=0.0, limit="sandbox lifetime",
                              notes=[f"The sandbox's lifetime of {self.limits.lifetime_s:g} s is over."])
        argv = ["/bin/bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        return await self._exec(argv, self._timeout(timeout), dict(env or {}), output_bytes or self.limits.output_bytes)

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
    async def create(self, snapshot: Path, limits: Limits | None = None) -> Sandbox:
        """A new sandbox whose /work starts as a copy of ``snapshot``."""

    async def aclose(self) -> None:  # noqa: B027  (most backends hold nothing to release)
        """Release the backend's own resources (clients, caches)."""


def quote(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)
