"""Servers on loopback for the server tests: the toy env as registered, and a tracked variant whose steps can be
slowed down and whose instances record being closed (to see sessions end on disconnect, reaping and shutdown)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator

import pytest
from websockets.sync.client import connect

from rubricgym.core.types import Action, Message, Observation
from rubricgym.envs.toy.calculator import CalculatorEnv
from rubricgym.server import ServerConfig, ServerThread, create_app

ENV = "toy-calculator-v0"


class TrackedCalculator(CalculatorEnv):
    """The calculator env with an optional async delay per step; every instance is listed in ``made``."""

    made: list[TrackedCalculator] = []
    delay_s = 0.0

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.closed = False
        self.made.append(self)

    async def astep_typed(self, action: Action | str | Message) -> Observation:
        await asyncio.sleep(self.delay_s)
        return self.step_typed(action)

    def close(self) -> None:
        self.closed = True
        super().close()


@pytest.fixture
def serve() -> Iterator[Callable[..., ServerThread]]:
    """``serve(**config)`` starts a server (stopped at teardown); ``tracked=True`` serves ``TrackedCalculator``."""
    started: list[ServerThread] = []

    def start(tracked: bool = False, delay_s: float = 0.0, factory=None, **fields) -> ServerThread:
        config = ServerConfig(**{"env_id": ENV, "port": 0, **fields})
        if tracked:
            made: list[TrackedCalculator] = []
            factory = type("Tracked", (TrackedCalculator,), {"made": made, "delay_s": delay_s})
        server = ServerThread(config, app=create_app(config, factory)).start()
        server.made = getattr(factory, "made", [])  # type: ignore[attr-defined]
        started.append(server)
        return server

    yield start
    for s in started:
        s.stop()


@pytest.fixture
def toy_server(serve) -> ServerThread:
    return serve()


def call(ws, kind: str, data=None) -> dict:
    """Send one protocol message on a sync websocket and return the parsed reply."""
    ws.send(json.dumps({"type": kind} if data is None else {"type": kind, "data": data}))
    return json.loads(ws.recv(timeout=30))


def open_ws(server: ServerThread, **kwargs):
    return connect(server.url + "/ws", proxy=None, **kwargs)
