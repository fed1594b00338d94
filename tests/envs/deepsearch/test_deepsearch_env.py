"""deepsearch-v0 end to end: Gymnasium's checker, tools, stages, what steps record, rewards and scripted agents."""

from __future__ import annotations

import asyncio
import json

import pytest
from gymnasium.utils.env_checker import check_env

from rubricgym.core.registry import make
from rubricgym.core.rollout import rollout
from rubricgym.core.types import Trajectory
from rubricgym.envs.deepsearch import DeepSearchEnv
from rubricgym.envs.deepsearch.agents import AGENTS


def call(name: str, **args: object) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def play(agent: str, task, **env_kwargs) -> Trajectory:
    return asyncio.run(rollout(make("deepsearch-v0", **env_kwargs), AGENTS[agent](seed=0), task, seed=0))


def test_gymnasium_check_env_passes():
    check_env(make("deepsearch-v0"))


def test_rubricgym_checker_passes():
    from rubricgym.env_checker import check_env_id

    report = check_env_id("deepsearch-v0", fuzz=60)
    assert report.ok, [r for r in report.rows if not r[1]]


def test_named_agents_and_default_rubric_follow_the_contract():
    assert {"oracle", "shortcut", "random"} <= set(DeepSearchEnv.agents())
    rubric = DeepSearchEnv.default_rubric()
    checks = DeepSearchEnv.checks()
    assert {
        "outcome_correct",
        "carr_rubric",
        "c_grpo",
        "hops_searched",
        "cited_pages_opened",
        "no_unseen_citations",
        "no_repeated_searches",
    } <= set(checks)
    assert all(c.check in checks for c in rubric.criteria)
    a = rubric.aggregation
    assert (a.method, a.alpha, a.outcome_check, a.rubric_check) == ("carr", 0.3, "outcome_correct", "carr_rubric")


def test_tools_explain_bad_arguments(ds_env):
    ds_env.reset(seed=1)
    cases = [
        (call("search", query="   "), "empty"),
        (call("open", doc="https://nowhere.test/x"), "no page"),
        (call("open", doc=ds_env.corpus.docs[0].url, offset=10**9), "outside the page"),
        (call("find", doc=ds_env.corpus.docs[0].url, pattern=""), "empty"),
        (call("answer", text=" "), "empty"),
        (call("search", query="x", k="five"), "must be integer"),
    ]
    for action, expected in cases:
        obs, reward, terminated, truncated, info = ds_env.step(action)
        assert expected in obs and not terminated and reward == 0
        assert info["tool_error"] or info["parse_error"]
    obs, *_ = ds_env.step(call("find", doc=ds_env.corpus.docs[0].url, pattern="zzqqxx"))
    assert "No match" in obs
    obs, *_ = ds_env.step(call("search", query="qqqzzzxxx"))
    assert "No results" in obs


def test_long_pages_are_windowed_and_observations_truncated_with_a_marker(ds_env):
    env = make("deepsearch-v0", window_chars=200)
    env.reset(seed=0)
    doc = max(env.corpus.docs, key=lambda d: len(d.text))
    obs, *_ = env.step(call("open", doc=doc.url))
    assert "more characters: open(doc=" in obs and "offset=" in obs
    big = make("deepsearch-v0", window_chars=50_000)
    big.max_observation_chars = 300
    big.reset(seed=0)
    obs, *_ = big.step(call("open", doc=doc.url))
    assert "[... truncated" in obs


def test_oracle_trajectory_records_stages_and_what_was_seen(ds_tasks):
    traj = play("oracle", ds_tasks[2])
    stages = traj.stages()
    assert stages[0] == "plan" and stages[-1] == "answer"
    assert {"gather", "review"} <= set(stages)
    assert stages.index("review") > stages.index("gather")
    for s in traj.steps:
        tool = s.info["tool"]
        if tool in ("search", "open", "find"):
            assert s.info["seen"] and all({"url", "text"} <= set(x) for x in s.info["seen"])
        if tool == "search":
            assert s.info["results"][0]["url"].startswith("https://")
    assert traj.outcome.reward == 1.0 and traj.outcome.summary["correct"]


def test_checks_are_pure_functions_of_a_stored_trajectory(ds_tasks):
    traj = play("oracle", ds_tasks[4])
    back = Trajectory.model_validate_json(traj.model_dump_json())
    for name, c in DeepSearchEnv.checks().items():
        if c.scope == "trajectory":
            assert c(back) == c(traj), name
    results = {n: c(back) for n, c in DeepSearchEnv.checks().items() if c.scope == "trajectory"}
    for name in (
        "outcome_correct",
        "carr_rubric",
        "hops_searched",
        "cited_pages_opened",
        "no_unseen_citations",
        "no_repeated_searches",
        "answered",
    ):
        assert results[name].met, (name, results[name].rationale)
    assert results["carr_rubric"].score == 1.0
    details = results["carr_rubric"].details["statements"]
    assert all(r["supported"] and r["reachable"] and all(r["filled"].values()) for r in details)
    steps = [DeepSearchEnv.checks()["step_new_evidence"](back, i).met for i in range(len(back.steps))]
    assert any(steps) and not steps[0]  # the plan step sees nothing


def test_oracle_beats_the_shortcut_even_when_its_guess_is_right(ds_tasks):
    checks = DeepSearchEnv.checks()
    for task in ds_tasks:
        oracle, lucky, shortcut = play("oracle", task), play("shortcut-lucky", task), play("shortcut", task)
        assert checks["outcome_correct"](lucky).met  # the guess is right ...
        assert checks["carr_rubric"](lucky).score == 0.0  # ... but nothing supports it
        assert not checks["cited_pages_opened"](lucky).met and checks["hops_searched"](lucky).score < 1
        o, lk, s = (checks["c_grpo"](t).score for t in (oracle, lucky, shortcut))
        assert o == 1.0 and lk == pytest.approx(0.7) and s <= lk < o
        assert oracle.outcome.reward == o and lucky.outcome.reward == lk


def test_task_rubric_scores_with_the_rewards_process_reward_model(ds_tasks):
    from rubricgym.rewards import CheckJudge, ProcessRewardModel

    task = ds_tasks[3]
    totals = {}
    for agent in ("oracle", "shortcut-lucky"):
        traj = play(agent, task)
        breakdown = asyncio.run(ProcessRewardModel(task.rubric, [CheckJudge()]).score(traj))
        assert breakdown.n_errors == 0
        totals[agent] = breakdown.total
    assert totals["oracle"] == pytest.approx(1.0) and totals["shortcut-lucky"] == pytest.approx(0.7)


def test_process_pitfalls_are_caught(ds_env, ds_tasks):
    task = ds_tasks[0]
    ds_env.reset(options={"task": task})
    ds_env.step(call("search", query="town"))
    ds_env.step(call("search", query="  Town "))  # identical after normalising
    other = ds_env.corpus.docs[3].url
    answer = f"Answer: {task.hidden['answer']}\nSee [1]({other}) and [2](https://nowhere.test/x)."
    ds_env.step(call("answer", text=answer))
    traj = ds_env.trajectory()
    checks = DeepSearchEnv.checks()
    assert not checks["no_repeated_searches"](traj).met
    unseen = checks["no_unseen_citations"](traj)
    assert not unseen.met and "https://nowhere.test/x" in unseen.rationale
    assert not checks["cited_pages_opened"](traj).met


def test_tasks_of_another_world_replay(ds_env):
    small = DeepSearchEnv(n_docs=300, world_seed=9)
    task = small.task_set(1, seed=0)[0]
    traj = play("oracle", task)  # played in a default (500-page) env
    assert traj.outcome.reward == 1.0
    assert ds_env.corpus.key != small.corpus.key


def test_reward_can_be_the_bare_outcome(ds_tasks):
    traj = play("shortcut-lucky", ds_tasks[0], reward="outcome")
    assert traj.outcome.reward == 1.0


def test_bad_constructor_arguments_say_what_to_do():
    with pytest.raises(ValueError, match="difficulty"):
        DeepSearchEnv(difficulty="brutal")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="hops"):
        DeepSearchEnv(hops=9)
    with pytest.raises(ValueError, match="questions"):
        DeepSearchEnv(corpus="/tmp")


def test_announced_steps_count_down_to_the_last_call():
    # The teacher answers on its last turn; without the count a clone cannot see when that is (issue #38).
    kwargs = {"hops": 1, "n_docs": 100, "distractors": 0, "max_steps": 3, "window_chars": 600}
    env = DeepSearchEnv(**kwargs, announce_steps=True)
    env.reset(options={"task": env.task_set(1)[0]})
    replies = [env.step(call("search", query="historian"))[0] for _ in range(3)]
    assert replies[0].endswith("\n\n[2 of 3 steps left]")
    assert replies[1].endswith("\n\n[1 of 3 steps left: the next call is your last]")
    assert replies[2].endswith("Step limit reached (3 steps): the episode is over.")
    assert "steps left" not in replies[2]
    quiet = DeepSearchEnv(**kwargs)
    quiet.reset(options={"task": quiet.task_set(1)[0]})
    assert "steps left" not in quiet.step(call("search", query="historian"))[0]
    env.reset(options={"task": env.task_set(1)[0]})
    assert "steps left" not in env.step(call("answer", text="Answer: nobody"))[0]  # the episode is over
