"""Step round trip over WebSocket: ``rubricgym serve`` vs OpenEnv's own server, same env, same client, one run.

OpenEnv's side is ``openenv-core``'s ``create_fastapi_app`` over an equivalent env: the same toy calculator,
wrapped in OpenEnv's ``Environment`` with an observation carrying the same explicit fields (text, tools, stage,
truncated, info). Each server runs in its own process under uvicorn (its defaults for OpenEnv; ``rubricgym serve``'s
settings for ours); the client is one asyncio process using ``websockets`` as OpenEnv's client does. Sequential:
one session, ``--steps`` steps. Concurrent: ``--concurrency`` sessions stepping at once. Then our server alone at
``--sessions`` sessions (target: p99 < 50 ms). Prints p50/p99 per row and the ratio of OpenEnv's p50 to ours
(target >= 2). Loopback only; servers are stopped by PID at the end.

    python bench/server.py [--steps 2000] [--concurrency 64] [--sessions 256] [--per-session 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEP = '<tool_call>{"name": "calculator", "arguments": {"expression": "17 * 23 - 4"}}</tool_call>'


# ---- the servers (each runs in a child process of this script) ----------------------------------------------


def serve_openenv() -> None:
    import uvicorn
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State

    import rubricgym
    from rubricgym.server.run import bind, url_of

    class TextAction(Action):
        text: str

    class TextObservation(Observation):
        text: str
        tools: list[dict]
        stage: str | None
        truncated: bool
        info: dict

    class ToyCalculator(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self.env = rubricgym.make("toy-calculator-v0")

        def _obs(self, text: str, info: dict, reward: float | None, done: bool, truncated: bool) -> TextObservation:
            tools = [t.model_dump() for t in self.env.tools()]
            return TextObservation(
                text=text,
                tools=tools,
                stage=info.get("stage"),
                truncated=truncated,
                info=info,
                reward=reward,
                done=done,
            )

        def reset(self, seed=None, episode_id=None, **kwargs) -> TextObservation:
            text, info = self.env.reset(seed=seed)
            return self._obs(text, info, None, False, False)

        def step(self, action: TextAction, timeout_s=None, **kwargs) -> TextObservation:
            text, reward, terminated, truncated, info = self.env.step(action.text)
            return self._obs(text, info, reward, terminated or truncated, truncated)

        @property
        def state(self) -> State:
            s = self.env.state()
            return State(episode_id=s.episode_id, step_count=s.step_count)

    ToyCalculator().env.close()  # discover the registry once, before OpenEnv builds envs on worker threads
    app = create_fastapi_app(ToyCalculator, TextAction, TextObservation, max_concurrent_envs=1024)
    sock = bind("127.0.0.1", 0)
    print(url_of(sock), flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


def serve_ours() -> None:
    import uvicorn

    from rubricgym.server.app import ServerConfig
    from rubricgym.server.run import bind, url_of, uvicorn_server

    sock = bind("127.0.0.1", 0)
    print(url_of(sock), flush=True)
    server: uvicorn.Server = uvicorn_server(ServerConfig(env_id="toy-calculator-v0", max_sessions=1024))
    server.run(sockets=[sock])


def start(side: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", side], stdout=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("ws://"):
        stop(proc)
        raise RuntimeError(f"the {side} server did not start")
    return proc, url


def stop(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# ---- the client ---------------------------------------------------------------------------------------------


class Gate:
    """Opens when every session is connected and reset, so the concurrent rows measure that many at once."""

    def __init__(self, n: int):
        self.n, self.arrived, self.event = n, 0, asyncio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived == self.n:
            self.event.set()
        await self.event.wait()


async def session(url: str, steps: int, latencies: list[float], gate: Gate) -> None:
    from websockets.asyncio.client import connect

    async with connect(url + "/ws", proxy=None, max_size=None, open_timeout=120) as ws:
        seed = 0
        await ws.send(json.dumps({"type": "reset", "data": {"seed": seed}}))
        reply = json.loads(await ws.recv())
        if reply["type"] != "observation":
            raise RuntimeError(f"reset failed: {reply}")
        await gate.wait()
        for _ in range(steps):
            t0 = time.perf_counter()
            await ws.send(json.dumps({"type": "step", "data": {"text": STEP}}))
            reply = json.loads(await ws.recv())
            latencies.append(time.perf_counter() - t0)
            if reply["type"] != "observation":
                raise RuntimeError(f"step failed: {reply}")
            if reply["data"]["done"]:
                seed += 1
                await ws.send(json.dumps({"type": "reset", "data": {"seed": seed}}))
                await ws.recv()


async def measure(url: str, sessions: int, steps: int) -> list[float]:
    latencies: list[float] = []
    gate = Gate(sessions)
    await asyncio.gather(*(session(url, steps, latencies, gate) for _ in range(sessions)))
    return latencies


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=1000)[int(q * 10) - 1] * 1000 if len(xs) > 1 else xs[0] * 1000


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (robust to a shared, busy machine, unlike wall-clock)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def row(name: str, pid: int, url: str, sessions: int, steps: int) -> tuple[float, float, float]:
    before = cpu_s(pid)
    xs = asyncio.run(measure(url, sessions, steps))
    cpu_us = (cpu_s(pid) - before) / len(xs) * 1e6
    p50, p99 = pct(xs, 50), pct(xs, 99)
    print(f"  {name:<30} n={len(xs):>6}  p50 {p50:8.3f} ms  p99 {p99:8.3f} ms  server CPU {cpu_us:6.0f} us/step")
    return p50, p99, cpu_us


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", choices=["ours", "openenv"], help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, default=2000, help="steps of the sequential session")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--per-session", type=int, default=40, help="steps per session in the concurrent runs")
    ap.add_argument("--sessions", type=int, default=256, help="sessions of the final run (ours only)")
    a = ap.parse_args()
    if a.serve:
        (serve_ours if a.serve == "ours" else serve_openenv)()
        return
    results: dict[str, dict[str, tuple[float, float, float]]] = {}
    for side in ("openenv", "ours"):
        proc, url = start(side)
        try:
            asyncio.run(measure(url, 4, 20))  # warm up
            print(f"{side} ({url}):")
            results[side] = {
                "sequential": row("sequential, 1 session", proc.pid, url, 1, a.steps),
                "concurrent": row(f"concurrent, {a.concurrency} sessions", proc.pid, url, a.concurrency, a.per_session),
            }
            if side == "ours":
                results[side]["many"] = row(
                    f"concurrent, {a.sessions} sessions", proc.pid, url, a.sessions, a.per_session
                )
        finally:
            stop(proc)
    for kind in ("sequential", "concurrent"):
        o, u = results["openenv"][kind], results["ours"][kind]
        print(f"OpenEnv/ours, {kind}: p50 {o[0] / u[0]:.2f}x (target >= 2x), server CPU per step {o[2] / u[2]:.2f}x")
    p99 = results["ours"]["many"][1]
    print(f"ours p99 at {a.sessions} sessions: {p99:.1f} ms (target < 50 ms): {'met' if p99 < 50 else 'NOT met'}")


if __name__ == "__main__":
    main()
