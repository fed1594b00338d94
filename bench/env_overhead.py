"""Steps/s of toy-calculator-v0 through ``rubricgym.make`` vs the same logic as a bare ``gymnasium.Env``.

Both envs parse the same ``<tool_call>`` text, run the same calculator, and answer with the same text; the
difference is what rubricgym adds per step (typed actions/observations, validation against the tool schema,
stage labels, the step record). Target: rubricgym's overhead at most 1.3x.

The two sides run in interleaved rounds (rubricgym, bare, rubricgym, bare, ...) so load from other processes hits
both alike; each side reports the median steps/s of its rounds with the min/max, and the ratio is of the medians.

    .venv/bin/python bench/env_overhead.py [--episodes 300] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time

import gymnasium
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


def measure(env, episodes) -> float:
    steps = 0
    t0 = time.perf_counter()
    for task, actions in episodes:
        env.reset(options={"task": task})
        for a in actions:
            env.step(a)
            steps += 1
    return steps / (time.perf_counter() - t0)


TARGET = 1.3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=300, help="episodes per round and side")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds per side (at least 1)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    tasks = rubricgym.TaskSet.generate("toy-calculator-v0", args.episodes, seed=0)
    episodes = [(t, oracle_actions(t)) for t in tasks]
    ours, bare = rubricgym.make("toy-calculator-v0"), BareCalculator()
    measure(ours, episodes[:20]), measure(bare, episodes[:20])  # warm-up
    runs: dict[str, list[float]] = {"bare gymnasium.Env": [], "rubricgym.make": []}
    for _ in range(args.rounds):  # interleaved so machine noise hits both alike
        runs["rubricgym.make"].append(measure(ours, episodes))
        runs["bare gymnasium.Env"].append(measure(bare, episodes))
    steps = sum(len(a) for _, a in episodes)
    print(f"{args.rounds} interleaved rounds per side, {steps} steps each ({args.episodes} episodes)")
    medians = {}
    for name, rates in runs.items():
        medians[name] = statistics.median(rates)
        print(f"{name:<20}: median {medians[name]:8.0f} steps/s  (min {min(rates):.0f}, max {max(rates):.0f})")
    ratio = medians["bare gymnasium.Env"] / medians["rubricgym.make"]
    print(f"overhead ratio (bare/rubricgym, of medians): {ratio:.2f}x")
    print(f"target <= {TARGET}x: {'met' if ratio <= TARGET else 'not met'}")


if __name__ == "__main__":
    main()
