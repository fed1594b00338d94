"""PRM-guided test-time scaling on real toy and deep-search episodes: look-ahead utilities, pruning, sampling,
the noisy policy, and the agent specs `rubricgym run --agent` accepts."""

import json

import pytest

import rubricgym
from rubricgym.core.rollout import rollout
from rubricgym.envs.toy.agents import CalculatorOracle, RandomAgent
from rubricgym.rewards.search import NoisyAgent, PRMGuidedAgent, wrap_agent


def toy_task():
    return rubricgym.make("toy-calculator-v0").task_set(1, seed=4, split="test")[0]


async def test_utility_prefers_the_oracles_step_and_a_right_answer():
    task = toy_task()
    agent = PRMGuidedAgent(CalculatorOracle(), "toy-calculator-v0", k=2).episode(task, 0)
    oracle_first = (
        await CalculatorOracle()
        .episode(task, 0)
        .act(rubricgym.make("toy-calculator-v0").reset_typed(seed=0, task=task).messages, [])
    )
    good = await agent.utility(oracle_first)
    junk = await agent.utility("not a tool call")
    wrong = await agent.utility('<tool_call>{"name": "answer", "arguments": {"value": -12345}}</tool_call>')
    right = await agent.utility(
        "<tool_call>" + json.dumps({"name": "answer", "arguments": {"value": task.hidden["answer"]}}) + "</tool_call>"
    )
    assert junk == 0.0 and wrong == 0.0  # an invalid step, and a wrong terminal answer: its final total
    assert 0.0 < good < 1.0 and right == pytest.approx(0.7)  # right but ungrounded: the gate (gamma 0.7), no process
    assert right > wrong


def test_choose_prunes_and_samples_by_utility():
    agent = PRMGuidedAgent(CalculatorOracle(), "toy-calculator-v0", k=4, beta=1e6, keep=0.5, seed=0)
    chosen, kept = agent.choose([0.1, 0.9, 0.5, 0.2])
    assert kept == [1, 2] and chosen == 1
    agent = PRMGuidedAgent(CalculatorOracle(), "toy-calculator-v0", k=4, beta=0.0, keep=1.0, seed=0)
    picks = {agent.choose([0.0, 1.0])[0] for _ in range(50)}
    assert picks == {0, 1}  # beta 0: uniform over the kept draws, i.e. proportional to pi


async def test_guidance_beats_the_noisy_policy_on_deep_search():
    env_id = "deepsearch-v0"
    agents = rubricgym.spec(env_id).load().agents()
    tasks = rubricgym.make(env_id).task_set(2, seed=0, split="test")
    wins = {1: 0, 8: 0}
    for k in wins:
        for i, task in enumerate(tasks):
            noisy = NoisyAgent(agents["oracle"](seed=0), agents["random"](seed=0), p=0.5, seed=i)
            agent = noisy if k == 1 else PRMGuidedAgent(noisy, env_id, k=k, seed=i)
            traj = await rollout(rubricgym.make(env_id), agent, task, seed=i)
            wins[k] += traj.outcome.reward > 0
    assert wins[8] == 2 and wins[8] > wins[1]


async def test_noisy_agent_keeps_the_base_in_step():
    task = toy_task()
    noisy = NoisyAgent(CalculatorOracle(), RandomAgent(seed=1), p=1.0, seed=0).episode(task, 0)
    traj = await rollout(rubricgym.make("toy-calculator-v0", max_steps=3), noisy, task, seed=0)
    assert len(traj.steps) == 3 and traj.outcome.reward == 0.0
    with pytest.raises(ValueError, match="p must be"):
        NoisyAgent(CalculatorOracle(), RandomAgent(), p=2)


def test_agent_specs():
    made = []

    def resolve(name):
        made.append(name)
        return {"oracle": CalculatorOracle, "random": RandomAgent}[name]()

    a = wrap_agent("toy-calculator-v0", "tts(k=3,beta=2):noisy(p=0.25):oracle", resolve)
    assert isinstance(a, PRMGuidedAgent) and (a.k, a.beta) == (3, 2.0)
    assert isinstance(a.policy, NoisyAgent) and a.policy.p == 0.25 and made == ["oracle", "random"]
    assert wrap_agent("toy-calculator-v0", "oracle", resolve) is None
    with pytest.raises(ValueError, match="takes"):
        wrap_agent("toy-calculator-v0", "tts(p=1):oracle", resolve)
    with pytest.raises(ValueError, match="key=number"):
        wrap_agent("toy-calculator-v0", "noisy(p=x):oracle", resolve)


def test_run_cli_accepts_a_tts_agent(tmp_path):
    from typer.testing import CliRunner

    from rubricgym.cli import app

    res = CliRunner().invoke(
        app,
        [
            "run",
            "toy-calculator-v0",
            "--agent",
            "tts(k=2):noisy(p=0.5):oracle",
            "--tasks",
            "2",
            "--out",
            str(tmp_path / "r"),
        ],
        env={"COLUMNS": "200"},
    )
    assert res.exit_code == 0, res.output
    store = rubricgym.TrajectoryStore(tmp_path / "r")
    assert len(list(store)) == 2
