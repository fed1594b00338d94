"""Run the env server: ``serve`` blocks (the CLI), ``ServerThread`` runs one in the background (tests, notebooks).

Both bind the listening socket themselves (``listen``) so ``port=0`` picks a free port and the URL printed is the
real one; ``serve`` with ``workers > 1`` hands over to ``cluster``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from rubricgym.server.app import ServerConfig
from rubricgym.server.cluster import serve_workers
from rubricgym.server.listen import bind, url_of, uvicorn_server


def serve(config: ServerConfig, *, log_level: str = "info", announce: bool = True) -> None:
    """Serve ``config.env_id`` until Ctrl-C / SIGTERM; every session's env is closed on the way out.

    ``config.workers > 1``: that many processes share the port (``cluster.serve_workers``).
    """
    if config.workers > 1:
        serve_workers(config, log_level=log_level, announce=announce)
        return
    sock = bind(config.host, config.port)
    server = uvicorn_server(config, log_level=log_level)
    if announce:
        print(f"serving {config.env_id} at {url_of(sock)} (WS /ws; HTTP {url_of(sock, 'http')})", flush=True)
    server.run(sockets=[sock])


class ServerThread:
    """A server on a background thread: ``with ServerThread(ServerConfig(env_id=..., port=0)) as s: s.url``."""

    def __init__(self, config: ServerConfig, app: Any = None):
        if config.workers != 1:
            raise ValueError(
                f"a ServerThread is one process; for workers={config.workers} run `rubricgym serve --workers`"
            )
        self.config = config
        self.sock = bind(config.host, config.port)
        self.server = uvicorn_server(config, app)
        self.app = self.server.config.app
        self.thread = threading.Thread(target=self._run, name="rubricgym-server", daemon=True)

    def _run(self) -> None:
        asyncio.run(self.server.serve(sockets=[self.sock]))

    @property
    def url(self) -> str:
        return url_of(self.sock)

    @property
    def http_url(self) -> str:
        return url_of(self.sock, "http")

    def start(self, timeout_s: float = 30.0) -> ServerThread:
        self.thread.start()
        for _ in range(int(timeout_s / 0.01)):
            if self.server.started or not self.thread.is_alive():
                break
            threading.Event().wait(0.01)
        if not self.server.started:
            self.stop()
            raise RuntimeError(f"the env server for {self.config.env_id} did not start within {timeout_s:.0f}s")
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(30)
        self.sock.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
