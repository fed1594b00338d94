"""PRM-guided test-time scaling (SWE-TRACE): success rate vs k candidates per turn, on SWE and deep search.

The policy is each env's scripted oracle made noisy: with probability ``--p`` an action of the env's random agent
replaces the oracle's (``rewards.search.NoisyAgent``). ``PRMGuidedAgent`` samples k candidates per turn from it,
scores each by look-ahead with the env's default rubric (programmatic checks only), prunes the lower half and
samples ∝ exp(β·u). k = 1 is the noisy policy alone (the peer every other k is compared against, same tasks and
seeds). Success: the rubric's outcome check is met (SWE: tests resolved; deep search: answer correct).

    .venv/bin/python bench/test_time_scaling.py [--envs swe-v0 deepsearch-v0] [--ks 1 2 4 8] [--tasks 4] [--p 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import rubricgym
from rubricgym.core.rollout import rollout
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.search import NoisyAgent, PRMGuidedAgent


def success(env_id: str, traj: rubricgym.Trajectory) -> bool:
    cls = rubricgym.spec(env_id).load()
    name = cls.default_rubric().aggregation.outcome_check
    if name is None:
        return traj.outcome.reward >= 0.5
    result = CheckJudge().run_check(name, traj)
    return not isinstance(result, str) and result.applicable and result.met


async def run_env(env_id: str, ks: list[int], n_tasks: int, p: float, seeds: int) -> list[tuple[int, float, float]]:
    cls = rubricgym.spec(env_id).load()
    agents = cls.agents()
    tasks = list({t.id: t for t in rubricgym.make(env_id).task_set(n_tasks, seed=0, split="test")}.values())
    rows = []
    for k in ks:
        wins, t0 = [], time.perf_counter()
        for s in range(seeds):
            for i, task in enumerate(tasks):
                noisy = NoisyAgent(agents["oracle"](seed=s), agents["random"](seed=s), p=p, seed=1000 * s + i)
                agent = noisy if k == 1 else PRMGuidedAgent(noisy, env_id, k=k, seed=1000 * s + i)
                env = rubricgym.make(env_id)
                try:
                    traj = await rollout(env, agent, task, seed=1000 * s + i)
                finally:
                    env.close()
                wins.append(success(env_id, traj))
        rows.append((k, sum(wins) / len(wins), time.perf_counter() - t0))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", nargs="+", default=["swe-v0", "deepsearch-v0"])
    ap.add_argument("--ks", nargs="+", type=int, default=[1, 2, 4, 8])
    ap.add_argument("--tasks", type=int, default=4, help="distinct test tasks per env")
    ap.add_argument("--seeds", type=int, default=3, help="noise seeds per task")
    ap.add_argument("--p", type=float, default=0.5, help="probability that a random action replaces the oracle's")
    args = ap.parse_args()
    for env_id in args.envs:
        rows = asyncio.run(run_env(env_id, args.ks, args.tasks, args.p, args.seeds))
        base = rows[0][1] if rows and rows[0][0] == 1 else None
        print(f"{env_id}: noisy oracle (p={args.p}), {args.tasks} tasks x {args.seeds} seeds")
        for k, rate, secs in rows:
            ratio = f"{rate / base:.2f}x k=1" if base else "-"
            print(f"  k={k}: success {rate:.2f} ({ratio}), {secs:.1f}s")


if __name__ == "__main__":
    main()
