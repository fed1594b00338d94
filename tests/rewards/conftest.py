"""Fixtures for the rewards tests.

- Toy-env trajectories: real rollouts of the calculator env's scripted agents.
- ``stub_server``: a tiny OpenAI-compatible HTTP server on loopback with replies scripted by the test. It
  exercises the real HTTP path (connection, status codes, JSON bodies, retries, a server that goes away); the
  tests that use it check parsing and error handling, never verdict quality. Slow tests use the real vLLM
  server (the ``vllm_server`` fixture).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import rubricgym
from rubricgym.core.types import Trajectory
from rubricgym.envs.toy.agents import CalculatorOracle, GuessingAgent, RandomAgent


def _rollouts(agent: object, n: int, seed: int = 1) -> list[Trajectory]:
    tasks = rubricgym.make("toy-calculator-v0").task_set(n, seed=seed)
    report = asyncio.run(rubricgym.rollout_many("toy-calculator-v0", agent, tasks, progress=False))
    return report.trajectories


@pytest.fixture(scope="session")
def _oracle() -> list[Trajectory]:
    return _rollouts(CalculatorOracle(), 3)


@pytest.fixture(scope="session")
def _random() -> list[Trajectory]:
    return _rollouts(RandomAgent(seed=3), 3)


@pytest.fixture(scope="session")
def _guess() -> list[Trajectory]:
    return _rollouts(GuessingAgent(), 3)


@pytest.fixture
def oracle_trajs(_oracle: list[Trajectory]) -> list[Trajectory]:
    """Fresh copies each test (scoring writes rewards onto trajectories)."""
    return [t.model_copy(deep=True) for t in _oracle]


@pytest.fixture
def random_trajs(_random: list[Trajectory]) -> list[Trajectory]:
    return [t.model_copy(deep=True) for t in _random]


@pytest.fixture
def guess_trajs(_guess: list[Trajectory]) -> list[Trajectory]:
    return [t.model_copy(deep=True) for t in _guess]


@pytest.fixture
def toy_rubric() -> dict:
    """The toy env's default rubric as a dict in the schema (tests build variants of it)."""
    return rubricgym.spec("toy-calculator-v0").load().default_rubric().model_dump(exclude_none=True)


Reply = Callable[[dict[str, Any]], "str | tuple[int, str]"]


class StubServer:
    """``reply(body)`` returns the assistant content, or ``(status, text)`` to answer with an HTTP error."""

    def __init__(self, reply: Reply):
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._send(200, {"data": [{"id": "stub"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                stub.requests.append(body)
                out = stub.reply(body)
                if isinstance(out, tuple):
                    status, text = out
                    data = text.encode()
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self._send(
                    200,
                    {
                        "choices": [{"message": {"role": "assistant", "content": out}, "finish_reason": "stop"}],
                        "usage": {},
                    },
                )

            def _send(self, status: int, obj: dict[str, Any]) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> StubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def stub_server() -> type[StubServer]:
    return StubServer
