"""Scripted agents on the real browser: the oracle solves every template; the random clicker rarely does."""

from __future__ import annotations

import asyncio

import pytest

from rubricgym.core.rollout import rollout
from rubricgym.core.types import Trajectory
from rubricgym.envs.gui.agents import Oracle, RandomClicker
from rubricgym.envs.gui.env import GuiEnv
from rubricgym.envs.gui.templates import TEMPLATES

pytestmark = pytest.mark.slow


def _play(pool, agent, tasks, concurrency=4) -> list[Trajectory]:
    """Each task once (seed 0), ``concurrency`` episodes at a time on the one browser."""
    envs = [GuiEnv(pool=pool, action_timeout=15) for _ in range(concurrency)]  # a loaded CI box is slow, not wrong

    async def main():
        queue, out = list(tasks), []

        async def worker(env):
            while queue:
                out.append(await rollout(env, agent, queue.pop(), seed=0))

        await asyncio.gather(*(worker(e) for e in envs))
        return out

    try:
        return asyncio.run(main())
    finally:
        for e in envs:
            e.close()


def test_oracle_solves_every_template(pool):
    tasks = [GuiEnv(templates=[tid]).task_set(1, seed=11, split=t.split)[0] for tid, t in TEMPLATES.items()]
    trajs = _play(pool, Oracle(), tasks)
    failed = {
        t.task.params["template"]: t.outcome.summary
        for t in trajs
        if not t.outcome.summary["success"]
        or t.outcome.summary["side_effects"]
        or t.outcome.summary["false_completion"]
        or t.outcome.summary["overdue"]
    }
    assert len(trajs) == len(TEMPLATES) and not failed, failed


def test_random_clicker_rarely_succeeds(pool):
    tasks = GuiEnv().task_set(8, seed=4)
    trajs = _play(pool, RandomClicker(seed=0), tasks)
    successes = sum(t.outcome.summary["success"] for t in trajs)
    assert successes <= 1, f"random clicking solved {successes}/8 tasks"
