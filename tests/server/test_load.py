"""Load (bounded, loopback only): 256 concurrent WebSocket sessions of the toy env, every step answered."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.asyncio.client import connect

from rubricgym.envs.toy.agents import tool_call

SESSIONS = 256
STEPS = 6


class Barrier:
    """Holds every session after its reset until all are open, so the server really holds them at once."""

    def __init__(self, n: int):
        self.n, self.arrived, self.open = n, 0, asyncio.Event()
        self.peak = 0

    async def wait(self, server) -> None:
        self.arrived += 1
        if self.arrived == self.n:
            self.peak = server.app.state.server.active
            self.open.set()
        await self.open.wait()


async def _session(server, seed: int, barrier: Barrier) -> list[str]:
    """One episode-long session; returns the error codes it got (none expected)."""
    errors = []
    async with connect(server.url + "/ws", proxy=None, compression=None, open_timeout=60) as ws:
        await ws.send(json.dumps({"type": "reset", "data": {"seed": seed}}))
        reply = json.loads(await ws.recv())
        errors += [reply["data"]["code"]] if reply["type"] == "error" else []
        await barrier.wait(server)
        for i in range(STEPS):
            action = {"text": tool_call("calculator", expression=f"{i} + 1")}
            await ws.send(json.dumps({"type": "step", "data": action}))
            reply = json.loads(await ws.recv())
            if reply["type"] == "error":  # the code and the message (an env bug's exception names itself)
                errors.append(f"{reply['data']['code']}: {reply['data'].get('message')}")
            elif reply["data"]["observation"]["text"] != str(i + 1):
                errors.append(f"wrong reply {reply['data']['observation']['text']!r}")
        await ws.send('{"type": "state"}')
        state = json.loads(await ws.recv())
        if state["type"] != "state" or state["data"]["step_count"] != STEPS:
            errors.append(f"bad state {state}")
    return errors


@pytest.mark.slow
def test_256_concurrent_sessions_without_a_failed_step(serve):
    server = serve(max_sessions=SESSIONS)

    barrier = Barrier(SESSIONS)

    async def run() -> list[list[str]]:
        return await asyncio.wait_for(
            asyncio.gather(*(_session(server, seed, barrier) for seed in range(SESSIONS))), timeout=240
        )

    results = asyncio.run(run())
    assert barrier.peak == SESSIONS
    assert len(results) == SESSIONS and all(errors == [] for errors in results), [e for e in results if e][:3]
