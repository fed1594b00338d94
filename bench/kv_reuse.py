"""Multi-turn generation with keys and values kept across turns (``generation.kv_reuse_tokens``) vs prefilling
every turn's whole history again (the sampler without reuse, the same code otherwise).

The workload is what the clinical demo's held-out evaluation does: SmolLM2-135M-Instruct in fp32 plays ``--tasks``
clinical-v0 cardiology cases greedily, concurrently (one batch per turn), for up to the env's 12 turns, with the
demo's response prefix and 64 new tokens a turn. Each round plays the same cases once per side, the sides in turn
(reuse, none, reuse, ...) so load from other processes hits both; each side reports the median of its rounds'
wall-clock and process CPU seconds with min/max, and the ratio of the medians. The bench also checks that both
sides took the same actions (greedy decoding; reuse changes only floating-point summation order).

    .venv/bin/python bench/kv_reuse.py [--tasks 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import rubricgym
from rubricgym.agents.local import LocalAgent
from rubricgym.core.rollout import rollout

PREFIX = '<tool_call>{"name": "'


def play(agent: LocalAgent, tasks: list, kwargs: dict) -> tuple[float, float, list[list[str]], int]:
    """Wall and CPU seconds to play every task once, concurrently; the actions; the positions prefilled less."""

    async def one(i: int, task) -> list[str]:
        env = rubricgym.make("clinical-v0", **kwargs)
        try:
            traj = await rollout(env, agent, task, seed=i)
        finally:
            env.close()
        return [s.action.text for s in traj.steps]

    async def all_of() -> list[list[str]]:
        return list(await asyncio.gather(*(one(i, t) for i, t in enumerate(tasks))))

    store = agent._shared.kv
    before = 0 if store is None else store.reused_tokens
    if store is not None:
        store.clear()
    wall, cpu = time.perf_counter(), time.process_time()
    actions = asyncio.run(all_of())
    reused = 0 if store is None else store.reused_tokens - before
    return time.perf_counter() - wall, time.process_time() - cpu, actions, reused


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.1f} s ({min(xs):.1f}-{max(xs):.1f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    kwargs = {"specialty": "cardiology"}
    env = rubricgym.make("clinical-v0", **kwargs)
    tasks = env.task_set(args.tasks, seed=0, split="test")
    env.close()
    common: dict[str, Any] = {
        "temperature": 0.0,
        "max_new_tokens": 64,
        "max_batch": 16,
        "threads": 2,
        "response_prefix": PREFIX,
    }
    sides = {"reuse": LocalAgent(kv_reuse_tokens=65_536, **common).load(), "none": LocalAgent(**common).load()}
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in sides}
    actions: dict[str, list[list[str]]] = {}
    reused = 0
    for r in range(args.rounds):
        for name, agent in sides.items():
            wall, cpu, acts, n = play(agent, tasks, kwargs)
            times[name].append((wall, cpu))
            actions.setdefault(name, acts)
            reused = max(reused, n)
            print(f"round {r + 1} {name:>5}: {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
    turns = sum(len(a) for a in actions["none"])
    print(f"\n{args.tasks} clinical-v0 cardiology cases, greedy, {turns} turns in all; {args.rounds} rounds per side")
    for name in sides:
        print(f"  {name:>5}: wall {spread([w for w, _ in times[name]])}, CPU {spread([c for _, c in times[name]])}")
    wall = statistics.median(w for w, _ in times["none"]) / statistics.median(w for w, _ in times["reuse"])
    cpu = statistics.median(c for _, c in times["none"]) / statistics.median(c for _, c in times["reuse"])
    print(f"  reuse is {wall:.2f}x faster by wall clock, {cpu:.2f}x by CPU time; {reused} prompt positions reused")
    print(f"  same actions on both sides: {actions['reuse'] == actions['none']}")


if __name__ == "__main__":
    main()
