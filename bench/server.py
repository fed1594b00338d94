"""Step round trip over WebSocket: ``rubricgym serve`` vs OpenEnv's own server, same env, same client, one script.

OpenEnv's side is ``openenv-core``'s ``create_fastapi_app`` over an equivalent env: the same toy calculator,
wrapped in OpenEnv's ``Environment`` with an observation carrying the same explicit fields (text, tools, stage,
truncated, info). Each server runs in its own process(es): OpenEnv under uvicorn with its defaults, ours as
``rubricgym serve`` (the CLI, so ``--workers`` is the real supervisor). The client is this script, one asyncio
process using ``websockets`` as OpenEnv's client does, so its load is bounded by one core and by the number of
sessions, whatever the server does. Server CPU per step sums every server process (all workers).

Part 1, against OpenEnv: sequential (one session, ``--steps`` steps) and concurrent (``--concurrency`` sessions
stepping at once), p50/p99 and server CPU per step, ``--repeats`` runs of each side interleaved (the order
alternating), and the ratios of each run to its pair (targets: OpenEnv's p50 >= 2x ours, our CPU per step <= 0.5x
OpenEnv's); ``--threads`` adds a third side, ``rubricgym serve --no-inline-steps`` (every env step on a server
thread, as before inline steps), to show what stepping short steps on the event loop saves. Part 2, ours against
worker count: ``--sessions`` sessions (target: p99 < 50 ms), one server per count in ``--workers``, measured
``--repeats`` times interleaved across the counts. Every line is the median
(min..max) of the runs. Every number is wall-clock on this machine, shared with whatever else runs on it (the
load average is printed at the start and the end): rerun on a quiet one before quoting them. Loopback only;
servers are stopped by PID at the end.

    python bench/server.py [--steps 2000] [--concurrency 64] [--sessions 256] [--per-session 40] \
        [--workers 1,2] [--repeats 3] [--part openenv|workers|both] [--threads]
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
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THREADS = "ours-thr"
"""``rubricgym serve --no-inline-steps``: every env step on a server thread (``--threads`` adds it as a third side)."""
STEP = '<tool_call>{"name": "calculator", "arguments": {"expression": "17 * 23 - 4"}}</tool_call>'


# ---- the servers (each runs in a child process of this script) ----------------------------------------------


def serve_openenv() -> None:
    import uvicorn
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State

    import rubricgym
    from rubricgym.server.listen import bind, url_of

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


class Server:
    """A server under test: its process group, its URL, and the PIDs whose CPU it spends."""

    def __init__(self, side: str, workers: int = 1):
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        if side.startswith("ours"):
            command = ["-m", "rubricgym", "serve", "toy-calculator-v0", "--port", "0", "--max-sessions", "1024"]
            command += ["--log-level", "warning", "--workers", str(workers)]
            command += ["--no-inline-steps"] if side == THREADS else []
        else:
            command = [__file__, "--serve", side]
        # OpenEnv's server logs a traceback for every client that closes its WebSocket at the end of a run: keep its
        # log out of the bench's output, and show its end only when the server does not start
        self.log = tempfile.TemporaryFile(mode="w+") if not side.startswith("ours") else None  # noqa: SIM115 (lives as long as the server; closed in stop)
        self.proc = subprocess.Popen(
            [sys.executable, *command],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env=env,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        # ours: "serving ENV at ws://HOST:PORT (...; N workers, pids A, B)"; OpenEnv's: the URL alone
        self.url = line.split(" at ")[1].split(" ")[0] if line.startswith("serving ") else line
        if not self.url.startswith("ws://"):
            stop(self.proc)
            said = ""
            if self.log is not None:
                self.log.seek(0)
                said = "; its log ends: " + self.log.read()[-2000:]
            raise RuntimeError(f"the {side} server did not start: {line!r}{said}")
        pids = line.rsplit("pids ", 1)[1].rstrip(")").split(", ") if "pids " in line else []
        self.pids = [self.proc.pid, *map(int, pids)]

    def cpu_s(self) -> float:
        return sum(cpu_s(pid) for pid in self.pids)

    def stop(self) -> None:
        stop(self.proc)
        if self.log is not None:
            self.log.close()


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
        self.opened_at = 0.0

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived == self.n:
            self.opened_at = time.perf_counter()
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
    return (await measure_rate(url, sessions, steps))[0]


async def measure_rate(url: str, sessions: int, steps: int) -> tuple[list[float], float]:
    """Step latencies, and steps per second from the moment every session is open to the last reply."""
    latencies: list[float] = []
    gate = Gate(sessions)
    await asyncio.gather(*(session(url, steps, latencies, gate) for _ in range(sessions)))
    return latencies, len(latencies) / (time.perf_counter() - gate.opened_at)


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=1000)[int(q * 10) - 1] * 1000 if len(xs) > 1 else xs[0] * 1000


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (robust to a shared, busy machine, unlike wall-clock)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(server: Server, sessions: int, steps: int) -> tuple[float, float, float]:
    """p50 and p99 (ms) and server CPU per step (us) of one run of ``sessions`` x ``steps`` steps."""
    before = server.cpu_s()
    xs = asyncio.run(measure(server.url, sessions, steps))
    return pct(xs, 50), pct(xs, 99), (server.cpu_s() - before) / len(xs) * 1e6


def spread(xs: list[float], fmt: str) -> str:
    """Median (min..max) of repeated runs."""
    return f"{format(statistics.median(xs), fmt)} ({format(min(xs), fmt)}..{format(max(xs), fmt)})"


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def against_openenv(a: argparse.Namespace) -> None:
    sides: tuple[str, ...] = ("openenv", "ours", THREADS) if a.threads else ("openenv", "ours")
    kinds = {"sequential": (1, a.steps), "concurrent": (a.concurrency, a.per_session)}
    servers: dict[str, Server] = {}
    runs: dict[tuple[str, str], list[tuple[float, float, float]]] = {(s, k): [] for s in sides for k in kinds}
    try:
        for side in sides:
            servers[side] = Server(side)
            asyncio.run(measure(servers[side].url, 4, 20))  # warm up
        for r in range(a.repeats):  # interleaved, the order alternating: drift on the machine hits both sides
            for side in sides if r % 2 == 0 else sides[::-1]:
                for kind, (sessions, steps) in kinds.items():
                    runs[side, kind].append(one_run(servers[side], sessions, steps))
    finally:
        for server in servers.values():
            server.stop()
    print(f"against OpenEnv, median (min..max) of {a.repeats} interleaved runs:")
    for kind, (sessions, steps) in kinds.items():
        label = f"{kind}, {sessions} session{'s' if sessions > 1 else ''} x {steps} steps"
        for side in sides:
            p50s, p99s, cpus = ([x[i] for x in runs[side, kind]] for i in range(3))
            print(
                f"  {side:<8} {label:<34} p50 {spread(p50s, '.3f')} ms  p99 {spread(p99s, '.3f')} ms  "
                f"server CPU {spread(cpus, '.0f')} us/step"
            )
    for kind in kinds:
        for side in sides[1:]:
            o, u = runs["openenv", kind], runs[side, kind]
            p50_ratio = [x[0] / y[0] for x, y in zip(o, u, strict=True)]  # each run against its own pair
            cpu_ratio = [y[2] / x[2] for x, y in zip(o, u, strict=True)]
            print(
                f"{kind}: OpenEnv/{side} p50 {spread(p50_ratio, '.2f')}x (target >= 2x: "
                f"{met(statistics.median(p50_ratio) >= 2)}); {side}/OpenEnv server CPU per step "
                f"{spread(cpu_ratio, '.2f')}x (target <= 0.5x: {met(statistics.median(cpu_ratio) <= 0.5)})"
            )


def against_workers(a: argparse.Namespace) -> None:
    counts = [int(w) for w in a.workers.split(",")]
    servers = {n: Server("ours", n) for n in counts}
    runs: dict[int, list[tuple[float, float, float]]] = {n: [] for n in counts}
    try:
        for server in servers.values():
            asyncio.run(measure(server.url, 8, 20))  # warm up (every worker imports and builds its env first)
        for _ in range(a.repeats):  # interleaved: a burst of load elsewhere on the machine hits every count alike
            for n, server in servers.items():
                before = server.cpu_s()
                xs, rate = asyncio.run(measure_rate(server.url, a.sessions, a.per_session))
                runs[n].append((rate, pct(xs, 99), (server.cpu_s() - before) / len(xs) * 1e6))
    finally:
        for server in servers.values():
            server.stop()
    print(f"ours at {a.sessions} sessions x {a.per_session} steps, median (min..max) of {a.repeats} interleaved runs:")
    for n in counts:
        rates, p99s, cpus = ([r[k] for r in runs[n]] for k in range(3))
        print(
            f"  --workers {n}:  {spread(rates, '7.0f')} steps/s  p99 {spread(p99s, '6.1f')} ms  "
            f"server CPU {spread(cpus, '4.0f')} us/step"
        )
    best = min(statistics.median([r[1] for r in runs[n]]) for n in counts)
    print(f"ours best p99 at {a.sessions} sessions: {best:.1f} ms (target < 50 ms): {met(best < 50)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", choices=["openenv"], help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, default=2000, help="steps of the sequential session")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--per-session", type=int, default=40, help="steps per session in the concurrent runs")
    ap.add_argument("--sessions", type=int, default=256, help="sessions of the worker-count runs (ours only)")
    ap.add_argument("--workers", default="1,2", help="worker counts to compare, comma-separated")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved runs of each side and each worker count")
    ap.add_argument("--part", choices=["openenv", "workers", "both"], default="both", help="which part to run")
    ap.add_argument(
        "--threads", action="store_true", help=f"part 1 also runs {THREADS}: ours with every step on a thread"
    )
    a = ap.parse_args()
    if a.serve:
        serve_openenv()
        return
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start (shared: numbers are noisy)")
    if a.part in ("openenv", "both"):
        against_openenv(a)
    if a.part in ("workers", "both"):
        against_workers(a)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
