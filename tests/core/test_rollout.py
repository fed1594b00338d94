import asyncio

import rubricgym
from rubricgym.core.agent import AgentError, BaseAgent
from rubricgym.core.store import TrajectoryStore
from rubricgym.envs.toy.agents import CalculatorOracle, RandomAgent

ENV = "toy-calculator-v0"


def test_rollout_records_agent_seed_versions_and_history():
    env = rubricgym.make(ENV)
    task = env.task_set(1, seed=0)[0]
    traj = asyncio.run(rubricgym.rollout(env, CalculatorOracle(), task, seed=7))
    assert traj.agent == "oracle" and traj.seed == 7 and traj.outcome.reward == 1.0
    assert {"python", "rubricgym", "pydantic"} <= set(traj.versions)
    assert [m.role for m in traj.messages[:2]] == ["system", "user"]
    assert len(traj.messages) == 2 + 2 * len(traj.steps)


def test_group_shares_group_id_and_varies_seed():
    task = rubricgym.make(ENV).task_set(1, seed=0)[0]
    group = asyncio.run(rubricgym.rollout_group(ENV, RandomAgent(), task, 4, seed=10))
    assert len({t.group_id for t in group}) == 1 and [t.seed for t in group] == [10, 11, 12, 13]
    assert len({tuple(s.action.text for s in t.steps) for t in group}) > 1  # different seeds, different episodes


class FlakyAgent(BaseAgent):
    """Fails on tasks whose id is in ``bad`` (like an endpoint going down)."""

    name = "flaky"

    def __init__(self, bad):
        self.bad, self.task = bad, None

    def episode(self, task, seed):
        agent = FlakyAgent(self.bad)
        agent.task = task
        return agent

    async def act(self, messages, tools):
        if self.task.id in self.bad:
            raise AgentError("endpoint down")
        return await CalculatorOracle(task=self.task).act(messages, tools)


def test_failures_keep_finished_work_and_abort_after_consecutive_failures(tmp_path):
    tasks = rubricgym.TaskSet.generate(ENV, 8, seed=0)
    store = TrajectoryStore(tmp_path)
    bad = {t.id for t in tasks[2:]}
    report = asyncio.run(
        rubricgym.rollout_many(
            ENV, FlakyAgent(bad), tasks, store=store, concurrency=1, progress=False, max_consecutive_failures=2
        )
    )
    assert len(report.trajectories) == 2 and report.aborted
    assert len(report.failures) == 2 and "endpoint down" in report.failures[0][1]
    assert store.finished_task_ids() == {t.id for t in tasks[:2]}
    retry = asyncio.run(rubricgym.rollout_many(ENV, FlakyAgent(set()), tasks, store=store, progress=False))
    assert len(retry.skipped) == 2 and len(retry.trajectories) == 6


class FullDiskStore(TrajectoryStore):
    """A store whose disk is full while one task's trajectories are written."""

    def __init__(self, run_dir, bad_task):
        super().__init__(run_dir)
        self.bad_task = bad_task

    def extend(self, trajectories):
        if any(t.task.id == self.bad_task for t in trajectories):
            raise OSError(28, "No space left on device")
        super().extend(trajectories)


def test_one_unstorable_trajectory_is_a_recorded_failure_not_the_end_of_the_run(tmp_path):
    tasks = rubricgym.TaskSet.generate(ENV, 4, seed=0)
    store = FullDiskStore(tmp_path, tasks[1].id)
    report = asyncio.run(
        rubricgym.rollout_many(ENV, FlakyAgent(set()), tasks, store=store, concurrency=1, progress=False)
    )
    assert [t for t, _ in report.failures] == [tasks[1].id] and "No space left" in report.failures[0][1]
    assert store.finished_task_ids() == {t.id for t in tasks} - {tasks[1].id}
    assert not report.aborted


def test_rollouts_close_the_envs_they_make_also_when_the_agent_fails():
    """An env a rollout makes (one per episode) holds a sandbox, a browser page or a connection: it is released
    when the episode ends, not left to the garbage collector."""
    made = []

    def factory():
        env = rubricgym.make(ENV)
        env.closed = False
        env.close = lambda: setattr(env, "closed", True)
        made.append(env)
        return env

    tasks = rubricgym.TaskSet.generate(ENV, 4, seed=0)
    asyncio.run(rubricgym.rollout_group(factory, RandomAgent(), tasks[0], 3))
    bad = {tasks[1].id}
    report = asyncio.run(rubricgym.rollout_many(factory, FlakyAgent(bad), tasks, group_size=2, progress=False))
    assert len(report.failures) == 1 and len(made) == 3 + 8
    assert all(env.closed for env in made)


def test_an_env_that_fails_to_close_keeps_its_episode_and_warns():
    import pytest

    def factory():
        env = rubricgym.make(ENV)

        def broken_close():
            raise OSError("device busy")

        env.close = broken_close
        return env

    task = rubricgym.TaskSet.generate(ENV, 1, seed=0)[0]
    with pytest.warns(UserWarning, match="could not close .*device busy"):
        group = asyncio.run(rubricgym.rollout_group(factory, CalculatorOracle(), task, 2))
    assert [t.outcome.reward for t in group] == [1.0, 1.0]
