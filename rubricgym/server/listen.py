"""The sockets a server listens on and the uvicorn server over them, started the same way by a single server
(``run``) and by each worker process of ``--workers N`` (``cluster``).

The listening socket is bound here, not by uvicorn, so ``port=0`` picks a free port and the URL printed is the real
one, and so the workers of one server can share it. uvicorn's own frame limit is set to ``4 x max_message_bytes``:
messages up to the app's limit are answered, larger ones up to that bound get a ``MESSAGE_TOO_LARGE`` error reply,
and only beyond it is the socket closed (1009).
"""

from __future__ import annotations

import contextlib
import os
import socket
from typing import Any

import uvicorn

from rubricgym.server.app import ServerConfig, create_app


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host:port`` (``port=0``: a free one), inheritable by worker processes."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP (not 0): asyncio sets TCP_NODELAY only on sockets that say they are TCP; without it a
    # response written in two parts waits for the client's delayed ACK (~40 ms per HTTP request)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def uvicorn_server(config: ServerConfig, app: Any = None, log_level: str = "warning") -> uvicorn.Server:
    """The uvicorn server of ``app`` (default: ``create_app(config)``), not started: ``serve(sockets=[...])``."""
    app = app if app is not None else create_app(config)
    return uvicorn.Server(
        uvicorn.Config(
            app,
            log_level=log_level,
            ws_max_size=4 * config.max_message_bytes,
            ws_ping_interval=None,  # liveness is the idle reaper's job; pings would keep dead clients "active"
            ws_per_message_deflate=False,  # small JSON messages: compressing costs more latency than it saves
            timeout_graceful_shutdown=10,
            lifespan="on",
        )
    )


def url_of(sock: socket.socket, scheme: str = "ws") -> str:
    """The URL a client reaches ``sock`` at."""
    host, port = sock.getsockname()[:2]
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}:{port}"


def unix_socket(path: str) -> socket.socket:
    """A listening Unix socket at ``path`` (a stale file left there is replaced): a worker's private socket."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(2048)
    return sock
