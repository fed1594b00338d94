"""RemoteEnv behaves like the local env: same trajectories, same rewards and rubric scores, same CLI runs."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest
from typer.testing import CliRunner

import rubricgym
from rubricgym.cli import app
from rubricgym.core.store import TrajectoryStore
from rubricgym.envs.toy.agents import CalculatorOracle, RandomAgent, tool_call
from rubricgym.server.remote import RemoteEnv, RemoteError

ENV = "toy-calculator-v0"
VOLATILE = {"id", "created_at", "duration_s"}


def comparable(traj) -> dict:
    data = traj.model_dump(exclude=VOLATILE)
    for step in data["steps"]:
        step.pop("duration_s")
    return data


@pytest.mark.parametrize("agent", [CalculatorOracle(), RandomAgent(seed=3)], ids=["oracle", "random"])
def test_remote_rollouts_equal_local_ones_and_score_the_same(serve, agent):
    toy_server = serve(trusted=True)  # the client scores on its side: it needs the hidden record
    remote = rubricgym.make(toy_server.url)
    assert isinstance(remote, RemoteEnv) and remote.env_id == ENV and remote.max_steps == 8
    tasks = remote.task_set(4, seed=11)
    assert tasks == rubricgym.make(ENV).task_set(4, seed=11)
    prm = rubricgym.ProcessRewardModel(rubricgym.make(ENV).default_rubric())
    for seed, task in enumerate(tasks):
        there = asyncio.run(rubricgym.rollout(rubricgym.make(toy_server.url), agent, task, seed=seed))
        here = asyncio.run(rubricgym.rollout(rubricgym.make(ENV), agent, task, seed=seed))
        assert comparable(there) == comparable(here)
        assert asyncio.run(prm.score(there)).total == asyncio.run(prm.score(here)).total
    del remote
    gc.collect()
    deadline = time.monotonic() + 10
    while toy_server.app.state.server.active and time.monotonic() < deadline:
        time.sleep(0.02)
    assert toy_server.app.state.server.active == 0  # rollouts drop their envs; the connections close with them


def test_gymnasium_and_typed_faces(toy_server):
    env = RemoteEnv.connect(toy_server.url)
    local = rubricgym.make(ENV)
    text, info = env.reset(seed=4)
    local_text, local_info = local.reset(seed=4)
    assert text == local_text and info["task_id"] == local_info["task_id"]
    obs, reward, terminated, truncated, info = env.step("no tool call here")
    assert (reward, terminated, truncated, info["parse_error"]) == (0.0, False, False, "no tool call found")
    assert obs == local.step("no tool call here")[0]
    assert env.state().step_count == 1 and len(env.messages) == 4 and env.outcome.summary == {}
    typed = env.reset_typed(seed=4)
    assert typed.tools == local.tools() and typed.stage == "compute"
    answer = env.step_typed(tool_call("answer", value=0))
    assert answer.done and not answer.truncated and answer.messages[0].role == "user"
    assert env.outcome.terminated and env.trajectory(agent="me").agent == "me"
    with pytest.raises(RemoteError, match="EPISODE_OVER"):
        env.step("again")
    with pytest.raises(ValueError, match="max_steps"):
        rubricgym.make(toy_server.url, max_steps=3)
    env.close()


def test_token_from_the_environment_and_reconnect_after_reaping(serve, monkeypatch):
    server = serve(token="tok", idle_timeout_s=0.3)
    with pytest.raises(KeyError, match="token"):
        rubricgym.make(server.url)
    monkeypatch.setenv("RUBRICGYM_TOKEN", "tok")
    env = rubricgym.make(server.url)
    env.reset(seed=0)
    asyncio.run(asyncio.sleep(1.0))  # reaped while idle
    with pytest.raises(RemoteError):
        env.step("x")
    assert env.reset(seed=0)[1]["step"] == 0  # reset opens a new session
    env.close()


def test_unreachable_server_is_a_clear_error():
    with pytest.raises(KeyError, match="no rubricgym env server"):
        rubricgym.make("ws://127.0.0.1:9")


def test_rubricgym_run_on_a_url_matches_the_local_run(toy_server, tmp_path):
    runner = CliRunner()
    for name, env in (("remote", toy_server.url), ("local", ENV)):
        args = ["run", env, "--agent", "random", "--tasks", "6", "--seed", "2", "--out", str(tmp_path / name)]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output

    def rewards(name: str) -> dict:
        return {t.task.id: (t.outcome.reward, len(t.steps)) for t in TrajectoryStore(tmp_path / name)}

    assert rewards("remote") == rewards("local") and len(rewards("local")) == 6
