"""Per-step cost of toy-calculator-v0 through ``rubricgym.make``, beside the same logic as a bare ``gymnasium.Env``.

Both envs parse the same ``<tool_call>`` text, run the same calculator, and answer with the same text; the
difference is what rubricgym adds per step (validation against the tool schema, the typed step record the tool
writes, stage labels, the episode's step record, the ``info`` dict with its public details).

Target: a step costs at most 1.2x what it cost before issue 45 made the env contract read like the design (a typed
pending step, one ``call_tool`` path, no performance helpers in env code): ``BASELINE`` is the old contract's
instructions per step. The contract's clarity wins over microseconds, so the bare env is a reference, not a target
(the old "at most 1.3x a bare gymnasium.Env" is retired).

``--instructions`` counts each side's instructions per step under valgrind's callgrind, which machine load does not
change: one process per side, instrumented only after imports and a warm-up round, counting 3 rounds, and prints the
ratio to ``BASELINE`` when this run is comparable (the same episodes, Python and pydantic-core). About half a minute
per side at 100 episodes:

    .venv/bin/python bench/env_overhead.py --instructions --episodes 100

Without it, the two sides run in interleaved rounds (rubricgym, bare, rubricgym, bare, ...) so load from other
processes hits both alike; each side reports the median steps/s of its rounds with the min/max, by the wall clock
and by the thread's CPU time (on a loaded machine the wall clock also counts the time other processes held the core).

    .venv/bin/python bench/env_overhead.py [--episodes 300] [--rounds 11] [--profile 15]

``--profile N`` then prints the N entries with the most own time in a cProfile of one more rubricgym round (a
deterministic profiler: it inflates the cost of small Python calls, so read it for where time goes, not how much).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium
import pydantic_core
from gymnasium import spaces

import rubricgym
from rubricgym.envs.toy.arith import CalculatorError, evaluate, format_number

TAG = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class BareCalculator(gymnasium.Env):
    """The calculator env's logic with nothing else: parse, evaluate, reply."""

    def __init__(self):
        self.observation_space = spaces.Text(10_000)
        self.action_space = spaces.Text(10_000)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.task = options["task"]
        self.t = 0
        return self.task.prompt, {}

    def step(self, action):
        self.t += 1
        m = TAG.search(action)
        if not m:
            return "Invalid action: no tool call found.", 0.0, False, self.t >= 8, {}
        try:
            call = json.loads(m.group(1))
        except json.JSONDecodeError:
            return "Invalid action: bad JSON.", 0.0, False, self.t >= 8, {}
        if call["name"] == "answer":
            ok = float(call["arguments"]["value"]) == float(self.task.hidden["answer"])
            return "Answer recorded.", float(ok), True, False, {}
        try:
            return format_number(evaluate(call["arguments"]["expression"])), 0.0, False, self.t >= 8, {}
        except CalculatorError as e:
            return f"Error: {e}", 0.0, False, self.t >= 8, {}


def oracle_actions(task) -> list[str]:
    def call(name, **a):
        return "<tool_call>" + json.dumps({"name": name, "arguments": a}) + "</tool_call>"

    return [call("calculator", expression=e) for e in task.hidden["steps"]] + [
        call("answer", value=task.hidden["answer"])
    ]


def measure(env, episodes) -> tuple[float, float]:
    """Steps per second of wall-clock time and of this thread's CPU time."""
    steps = 0
    t0, c0 = time.perf_counter(), time.thread_time()
    for task, actions in episodes:
        env.reset(options={"task": task})
        for a in actions:
            env.step(a)
            steps += 1
    return steps / (time.perf_counter() - t0), steps / (time.thread_time() - c0)


SIDES = ("bare gymnasium.Env", "rubricgym.make")
TARGET = 1.2
"""At most this many times ``BASELINE``'s instructions per step."""
BASELINE = 93_340
"""The rubricgym side's instructions per step before issue 45 gave the env contract its typed pending step and one
``call_tool`` path: commit 757d074, 2026-12-07, ``--instructions --episodes 100``, two runs: 93,339 and 93,341."""
BASELINE_RUN: dict[str, object] = {"episodes": 100, "python": "3.11.7", "pydantic_core": "2.50.5"}
"""What ``BASELINE``'s count depends on besides the code: a run that differs in any of these is not compared (a
change to the toy calculator's tools or arithmetic changes the work itself: count the baseline commit again)."""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=300, help="episodes per round and side")
    parser.add_argument("--rounds", type=int, default=11, help="interleaved rounds per side (at least 1)")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="print a cProfile's top N entries")
    parser.add_argument("--instructions", action="store_true", help="count instructions per step (callgrind)")
    parser.add_argument("--count-side", choices=SIDES, help=argparse.SUPPRESS)  # one side under callgrind
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if args.instructions:
        _instructions(args.episodes)
        return
    tasks = rubricgym.TaskSet.generate("toy-calculator-v0", args.episodes, seed=0)
    episodes = [(t, oracle_actions(t)) for t in tasks]
    envs = {"rubricgym.make": rubricgym.make("toy-calculator-v0"), "bare gymnasium.Env": BareCalculator()}
    if args.count_side:
        _count(envs[args.count_side], episodes)
        return
    for env in envs.values():
        measure(env, episodes[:20])  # warm-up
    wall: dict[str, list[float]] = {name: [] for name in SIDES}
    cpu: dict[str, list[float]] = {name: [] for name in SIDES}
    load = os.getloadavg()[0]
    for _ in range(args.rounds):  # interleaved so machine noise hits both alike
        for name, env in envs.items():
            w, c = measure(env, episodes)
            wall[name].append(w)
            cpu[name].append(c)
    load = max(load, os.getloadavg()[0])
    steps = sum(len(a) for _, a in episodes)
    print(
        f"{args.rounds} interleaved rounds per side, {steps} steps each ({args.episodes} episodes); "
        f"1-min load average up to {load:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"{'steps/s':<20}  {'wall: median (min-max)':>28}  {'CPU time: median (min-max)':>28}")
    for name in SIDES:
        print(f"{name:<20}  {_spread(wall[name]):>28}  {_spread(cpu[name]):>28}")
    ratio = {
        k: statistics.median(v[SIDES[0]]) / statistics.median(v[SIDES[1]]) for k, v in (("wall", wall), ("cpu", cpu))
    }
    print(f"rubricgym's cost over the bare env (of medians): wall {ratio['wall']:.2f}x, CPU time {ratio['cpu']:.2f}x")
    print("(the target is against the contract before issue 45, in instructions: run with --instructions)")
    if args.profile:
        print(_profile(envs["rubricgym.make"], episodes, args.profile))


def _profile(env, episodes, top: int) -> str:
    """The ``top`` entries by own time of a cProfile of one round of ``env``."""
    profiler = cProfile.Profile()
    profiler.runcall(measure, env, episodes)
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


COUNTED_ROUNDS = 3


def _count(env, episodes) -> None:
    """Under callgrind (``--instr-atstart=no``): instrument after a warm-up, count ``COUNTED_ROUNDS`` rounds, dump."""

    def control(*what: str) -> None:
        subprocess.run(["callgrind_control", *what, str(os.getpid())], check=True, stdout=subprocess.DEVNULL)

    measure(env, episodes[:20])
    control("-i", "on")
    measure(env, episodes)  # a warm round with instrumentation on, not counted
    control("-z")
    for _ in range(COUNTED_ROUNDS):
        measure(env, episodes)
    control("-d", "counted")
    print(f"steps {sum(len(a) for _, a in episodes)}")


def _instructions(n_episodes: int) -> None:
    """Instructions per step of each side, each in its own process under callgrind."""
    per_step = {}
    with tempfile.TemporaryDirectory() as tmp:
        for side in SIDES:
            out = Path(tmp, side.split()[0].replace(".", "_"))
            run = subprocess.run(
                ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}.%p"]
                + [sys.executable, __file__, "--count-side", side, "--episodes", str(n_episodes)],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "PYTHONHASHSEED": "0"},  # the same dict layouts every run
            )
            steps = int(run.stdout.split("steps ")[-1])
            for dump in Path(tmp).glob(f"{out.name}.*"):
                text = dump.read_text(errors="replace")
                if "trigger: dump counted" in text.lower():
                    total = int(text.split("\nsummary: ")[1].split()[0])
                    per_step[side] = total / (COUNTED_ROUNDS * steps)
    for side in SIDES:
        print(f"{side:<20}  {per_step[side]:>9,.0f} instructions per step")
    print(f"ratio (rubricgym/bare): {per_step[SIDES[1]] / per_step[SIDES[0]]:.2f}x ({n_episodes} episodes a round)")
    print(_against_baseline(per_step[SIDES[1]], n_episodes))


def _against_baseline(per_step: float, n_episodes: int) -> str:
    """The ratio to ``BASELINE`` and whether it meets ``TARGET``, or why this run is not comparable to it."""
    here = {"episodes": n_episodes, "python": platform.python_version(), "pydantic_core": pydantic_core.__version__}
    differ = [f"{k} {v} (baseline {BASELINE_RUN[k]})" for k, v in here.items() if v != BASELINE_RUN[k]]
    if differ:
        return (
            f"no ratio to the baseline: {', '.join(differ)} differ from its run; count commit 757d074 (before "
            f"issue 45) here to compare"
        )
    ratio = per_step / BASELINE
    return (
        f"against the contract before issue 45 ({BASELINE:,} per step): {ratio:.2f}x, target <= {TARGET}x: "
        f"{'met' if ratio <= TARGET else 'not met'}"
    )


def _spread(rates: list[float]) -> str:
    return f"{statistics.median(rates):.0f} ({min(rates):.0f}-{max(rates):.0f})"


if __name__ == "__main__":
    main()
