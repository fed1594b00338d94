"""Episode seeds of different run seeds do not overlap (issue 9, item 8)."""

from __future__ import annotations

import asyncio

from rubricgym.core.rollout import episode_seed, rollout_many
from rubricgym.core.tasks import TaskSet
from rubricgym.envs.toy.agents import RandomAgent


def test_run_seeds_give_independent_episode_seeds():
    runs = {s: {episode_seed(s, i, g) for i in range(50) for g in range(4)} for s in range(5)}
    assert all(len(v) == 200 for v in runs.values())
    assert all(not runs[a] & runs[b] for a in runs for b in runs if a < b)
    assert episode_seed(0, 1, 0) == episode_seed(0, 1, 0)


def test_rollout_many_uses_them():
    tasks = TaskSet.generate("toy-calculator-v0", 2, seed=0)
    seeds = {}
    for run_seed in (0, 1):
        rep = asyncio.run(
            rollout_many("toy-calculator-v0", RandomAgent(), tasks, group_size=4, seed=run_seed, progress=False)
        )
        seeds[run_seed] = {t.seed for t in rep.trajectories}
    assert len(seeds[0]) == len(seeds[1]) == 8 and not seeds[0] & seeds[1]
