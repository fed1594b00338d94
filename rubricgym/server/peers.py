"""How the worker processes of ``rubricgym serve --workers N`` reach each other: ``Peers`` (where one worker
stands among them) and ``Router`` (its client of the others).

A WebSocket session is one connection, so it lives on the worker that accepted it. An HTTP session is named by id
in requests that may arrive on any connection, hence any worker: its id starts with its owner's index
(``"1-3f2a..."``), and a worker that gets a request for another's session forwards it (body and ``Authorization``
as received) to the owner's private Unix socket and relays the answer. A task handed out by one worker (``tasks``)
is looked up on its peers when a session on another worker resets with it (the same sockets, plus a random key
only the workers know: the reply holds the task's hidden record). The processes themselves are started and
watched by ``cluster``.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from pathlib import Path

import httpx
from fastapi import Request, Response

from rubricgym.core.types import Task
from rubricgym.server.protocol import ErrorCode, ProtocolError

PEER_KEY_HEADER = "x-rubricgym-peer"
PEER_TASK_ROUTE = "/_peer/task"


@dataclass(frozen=True)
class Peers:
    """Where one worker stands among the server's workers: its index, and how to reach the others."""

    index: int
    count: int
    run_dir: str
    """A 0700 directory holding each worker's private socket (``worker-<i>.sock``)."""
    key: str
    """Random, shared by the workers only: proves a ``/_peer`` request comes from one of them."""
    token: str | None = None

    @property
    def prefix(self) -> str:
        """What this worker's session ids start with."""
        return f"{self.index}-"

    def socket_path(self, index: int) -> str:
        return str(Path(self.run_dir) / f"worker-{index}.sock")

    def owner(self, session_id: str) -> int | None:
        """The worker a session id names, when it is another worker (``None``: this one, or no worker)."""
        head, sep, _ = session_id.partition("-")
        if not sep or not head.isdigit() or len(head) > 6:
            return None
        owner = int(head)
        return owner if owner != self.index and owner < self.count else None

    def is_peer(self, header: str | None) -> bool:
        return hmac.compare_digest((header or "").encode(), self.key.encode())


class Router:
    """A worker's client of its peers: forwards HTTP requests of their sessions, asks them for issued tasks."""

    def __init__(self, peers: Peers):
        self.peers = peers
        self._clients: dict[int, httpx.AsyncClient] = {}

    def _client(self, index: int) -> httpx.AsyncClient:
        client = self._clients.get(index)
        if client is None:
            client = httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(uds=self.peers.socket_path(index)),
                base_url="http://worker",
                timeout=httpx.Timeout(None, connect=5.0),  # a step takes as long as the env takes, as unforwarded
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
                trust_env=False,
            )
            self._clients[index] = client
        return client

    async def forward(self, owner: int, session_id: str, request: Request, body: bytes) -> Response:
        """The owner's answer to ``request`` (status and body as it gave them)."""
        headers = {k: v for k in ("authorization", "content-type") if (v := request.headers.get(k)) is not None}
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        try:
            r = await self._client(owner).request(request.method, path, content=body, headers=headers)
        except httpx.TransportError as e:
            raise ProtocolError(
                ErrorCode.WORKER_GONE,
                f"session {session_id[:80]!r} lived on server worker {owner}, which is gone "
                f"({type(e).__name__}); its episode is lost: POST /reset to open a new session",
                status=503,
            ) from None
        return Response(r.content, status_code=r.status_code, media_type=r.headers.get("content-type"))

    async def find_task(self, task_id: str) -> Task | None:
        """The task ``task_id`` that another worker handed out (``None``: none did, or it is gone)."""
        headers = {PEER_KEY_HEADER: self.peers.key}
        if self.peers.token:
            headers["authorization"] = f"Bearer {self.peers.token}"
        for index in range(self.peers.count):
            if index == self.peers.index:
                continue
            try:
                r = await self._client(index).get(PEER_TASK_ROUTE, params={"id": task_id}, headers=headers)
            except httpx.TransportError:
                continue  # a dead peer's tasks are forgotten, as a restarted server's would be
            if r.status_code == 200:
                return Task.model_validate_json(r.content)
        return None

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
