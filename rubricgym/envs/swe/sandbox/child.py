"""A sandbox command's host process: started ahead as a parked launcher, then run from the event loop.

A ``Launcher`` is a root shell that joins the sandbox's cgroups and sets its rlimits, then waits for the command
it will become. Joining a cgroup v1 waits for an RCU grace period (about 10 ms here, whatever the load); a
launcher made ahead of the command (between an agent's commands, or with a pre-made sandbox) pays it off the
command's path. ``Child`` then runs the launched command from the event loop without a helper thread.

``asyncio.create_subprocess_exec`` (Python 3.11) starts a thread per process to wait for its exit and wraps each
pipe in a transport. Here the exit is seen through a pidfd and the pipes are read straight from the loop's
selector: no thread is started or woken per command, which matters when commands are short and the machine busy.
Where ``pidfd_open`` is missing (Linux < 5.3) a worker thread waits instead.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Callable
from contextlib import suppress
from typing import IO


class Launcher:
    """``/bin/sh`` in a new session with an empty environment (in ``/``), running ``prelude`` (shell commands;
    exit status 125 if one fails) and then waiting on its stdin for the script it runs next (``go``): an ``exec``
    of the command, which then is this same process. Needs no event loop (pre-made in a thread)."""

    def __init__(self, prelude: str = ""):
        self.proc = subprocess.Popen(
            ["/bin/sh", "-c", "unset PWD; " + prelude + ". /dev/stdin", "rg-sandbox"],  # sh would export PWD
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env={},
            cwd="/",
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def go(self, script: str) -> None:
        """Hand over the script to run (it must redirect stdin, e.g. ``exec CMD </dev/null``)."""
        stdin = self.proc.stdin
        assert stdin is not None
        with suppress(BrokenPipeError):  # the launcher died (its prelude failed, or it was killed): its exit says
            try:
                stdin.write(script.encode())
            finally:
                stdin.close()

    def discard(self) -> None:
        """Kill an unused launcher and release its pipes."""
        if self.proc.poll() is None:  # never signal a reaped pid: it may belong to someone else by now
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if f is not None:
                with suppress(OSError):
                    f.close()
        with suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


class Child:
    """A launcher's command, its stdout/stderr collected up to ``cap`` bytes each. The first stream to pass the
    cap calls ``on_overflow`` once; from then on both streams are drained and dropped, so a writer never blocks on
    a full pipe.

    ``exited`` resolves when the process has exited (and is reaped), ``drained`` when both pipes are closed (every
    process that held them is gone). ``close`` releases what is left; call it in a ``finally``.
    """

    def __init__(self, launcher: Launcher, cap: int, on_overflow: Callable[[], None]):
        self._loop = asyncio.get_running_loop()
        self._proc = launcher.proc
        self.pid = self._proc.pid
        self.cap = cap
        self.output = {"stdout": bytearray(), "stderr": bytearray()}
        self.over: str | None = None
        """The stream that passed the cap first, if any."""
        self._on_overflow = on_overflow
        self.exited: asyncio.Future[None] = self._loop.create_future()
        self.drained: asyncio.Future[None] = self._loop.create_future()
        self._pipes: dict[int, tuple[str, IO[bytes]]] = {}
        for name, f in (("stdout", self._proc.stdout), ("stderr", self._proc.stderr)):
            assert f is not None
            fd = f.fileno()
            os.set_blocking(fd, False)
            self._pipes[fd] = (name, f)
            self._loop.add_reader(fd, self._read, fd)
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self._loop.run_in_executor(None, self._proc.wait).add_done_callback(lambda _: self._reap())
        else:
            self._loop.add_reader(self._pidfd, self._reap)

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    def _read(self, fd: int) -> None:
        name, _ = self._pipes[fd]
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._close_pipe(fd)
            if not self._pipes and not self.drained.done():
                self.drained.set_result(None)
            return
        if self.over:
            return
        buf = self.output[name]
        if len(buf) + len(chunk) > self.cap:
            buf += chunk[: self.cap + 1 - len(buf)]
            self.over = name
            self._on_overflow()
            return
        buf += chunk

    def _reap(self) -> None:
        if self._proc.poll() is None:  # woken early; the pidfd stays readable until the exit is seen
            return
        self._close_pidfd()
        if not self.exited.done():
            self.exited.set_result(None)

    def _close_pipe(self, fd: int) -> None:
        _, f = self._pipes.pop(fd)
        self._loop.remove_reader(fd)
        with suppress(OSError):
            f.close()

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            with suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = None

    def close(self) -> None:
        """Stop reading and close the pipes and the pidfd (a process still running is not touched)."""
        for fd in list(self._pipes):
            self._close_pipe(fd)
        self._close_pidfd()
