"""``rubricgym serve --workers N``: N server processes on one port, each session served only by the one that owns it.

The supervisor binds the listening socket once and spawns N workers that all accept on it: the kernel hands
each new connection to one of them. A WebSocket session is one connection, so it lives on the worker that
accepted it and its steps never cross a process. An HTTP session lives on the worker that opened it, and a request
for it that reaches another worker is forwarded to its owner (``peers``).

Why not uvicorn's ``workers=N``: it shares the socket the same way, but its workers have no index and cannot
reach each other, so an HTTP session would be found only when its request happened to reach the worker that
opened it. Why not a router process in front of N workers: every message of every session would cross one more
process, and that process would be the one-core bottleneck this exists to remove. The price here is one hop for
an HTTP request that lands on a worker other than its session's owner (a keep-alive connection keeps landing on
the same worker); WebSocket steps pay nothing.

Each worker holds at most ``ceil(max_sessions / N)`` sessions, so ``--max-sessions`` still bounds the server.
A worker that dies is not replaced: its WebSocket sessions see their connection close, its HTTP sessions get a
``WORKER_GONE`` error (503) from whichever worker receives their next request, the other workers keep serving,
and the supervisor says so on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing
import os
import queue
import shutil
import signal
import socket
import sys
import tempfile
import time
from types import FrameType
from typing import Any

from rubricgym.core.registry import spec
from rubricgym.server.app import ServerConfig, create_app
from rubricgym.server.listen import bind, unix_socket, url_of, uvicorn_server
from rubricgym.server.peers import Peers

STOP_TIMEOUT_S = 30.0
"""How long stopped workers may take to close their sessions' envs before they are killed."""


def serve_workers(config: ServerConfig, *, log_level: str = "info", announce: bool = True) -> None:
    """Serve ``config`` with ``config.workers`` processes until SIGINT / SIGTERM.

    Raises what a single server would at start (``KeyError`` for an unknown env, ``ValueError``/``TypeError``
    for env kwargs it cannot build with, ``OSError`` for the port) once every worker is stopped again.
    """
    spec(config.env_id)  # an unknown id fails before any process starts
    n = config.workers
    sock = bind(config.host, config.port)
    run_dir = tempfile.mkdtemp(prefix="rubricgym-serve-")  # mode 0700: only this user reaches the sockets
    base = Peers(index=0, count=n, run_dir=run_dir, key=os.urandom(32).hex(), token=config.token)
    worker_config = config.model_copy(update={"max_sessions": math.ceil(config.max_sessions / n), "workers": 1})
    ctx = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads and locks
    ready: Any = ctx.Queue()
    procs = [
        ctx.Process(
            target=run_worker,
            args=(worker_config, Peers(i, n, run_dir, base.key, config.token), sock, log_level, ready),
            name=f"rubricgym-serve-{i}",
        )
        for i in range(n)
    ]
    stop = _Stop()
    try:
        for p in procs:
            p.start()
        _await_ready(procs, ready, stop)
        if announce and not stop.requested:
            pids = ", ".join(str(p.pid) for p in procs)
            print(
                f"serving {config.env_id} at {url_of(sock)} (WS /ws; HTTP {url_of(sock, 'http')}; "
                f"{n} workers, pids {pids})",
                flush=True,
            )
        _watch(procs, stop)
    finally:
        stop.restore()
        _stop_all(procs)
        ready.close()
        sock.close()
        shutil.rmtree(run_dir, ignore_errors=True)


class _Stop:
    """SIGINT / SIGTERM to the supervisor: stop serving (the workers get SIGTERM and close their sessions)."""

    def __init__(self) -> None:
        self.requested = False
        self._previous = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


_ERRORS: dict[str, type[Exception]] = {"KeyError": KeyError, "ValueError": ValueError, "TypeError": TypeError}


def _await_ready(procs: list[Any], ready: Any, stop: _Stop) -> None:
    """Wait until every worker serves; a worker that fails to start raises its error here."""
    waiting = set(range(len(procs)))
    while waiting and not stop.requested:
        try:
            index, error = ready.get(timeout=0.1)
        except queue.Empty:
            dead = [i for i in waiting if procs[i].exitcode is not None]
            if dead:
                code = procs[dead[0]].exitcode
                raise RuntimeError(f"server worker {dead[0]} exited at start (exit code {code})") from None
            continue
        if error is not None:
            kind, message = error
            raise _ERRORS.get(kind, RuntimeError)(message)
        waiting.discard(index)


def _watch(procs: list[Any], stop: _Stop) -> None:
    """Serve until asked to stop; say so once for each worker that dies; stop when none is left."""
    reported: set[int] = set()
    while not stop.requested:
        time.sleep(0.2)
        for i, p in enumerate(procs):
            if p.exitcode is not None and i not in reported:
                reported.add(i)
                left = len(procs) - len(reported)
                print(
                    f"rubricgym serve: worker {i} (pid {p.pid}) exited with code {p.exitcode}; its sessions are lost "
                    f"(HTTP ones get WORKER_GONE), {left} worker(s) keep serving",
                    file=sys.stderr,
                    flush=True,
                )
        if len(reported) == len(procs):
            raise RuntimeError("every server worker has exited")


def _stop_all(procs: list[Any]) -> None:
    for p in procs:
        if p.pid is not None and p.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for p in procs:
        if p.pid is not None:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.exitcode is None:
                p.kill()
                p.join(5.0)


def run_worker(config: ServerConfig, peers: Peers, sock: socket.socket, log_level: str, ready: Any) -> None:
    """One worker process: the app over the shared socket and its private one, until SIGINT / SIGTERM."""
    try:
        app = create_app(config, peers=peers)
        private = unix_socket(peers.socket_path(peers.index))
    except Exception as e:  # reported to the supervisor, which raises it as a single server would
        ready.put((peers.index, (type(e).__name__, str(e.args[0]) if isinstance(e, KeyError) else str(e))))
        return
    server = uvicorn_server(config, app, log_level=log_level)

    async def main() -> None:
        serving = asyncio.ensure_future(server.serve(sockets=[sock, private]))
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        ready.put((peers.index, None if server.started else ("RuntimeError", "the worker did not start")))
        await serving

    with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
        runner.run(main())
