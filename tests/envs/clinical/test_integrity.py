"""Reward integrity of clinical-v0 (issue #22, items 3-7): nothing hidden reaches the agent, a shotgun or a wrong
answer earns nothing, and the default rubric ranks work above random activity on both case sources."""

import asyncio
import json

import pytest

import rubricgym
from rubricgym.core.env import ToolOutput
from rubricgym.core.leaves import leaves
from rubricgym.core.registry import register, unregister
from rubricgym.core.rollout import rollout
from rubricgym.core.tools import tool
from rubricgym.envs.clinical.cases import EXAMPLE_CASES
from rubricgym.envs.clinical.diagnosis import match_diagnosis
from rubricgym.envs.clinical.env import ClinicalEnv
from rubricgym.envs.clinical.schema import load_kb
from rubricgym.rewards.gaming import empty_trajectory, judgeable
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.leaks import audit_leaks
from rubricgym.rewards.prm import ProcessRewardModel
from rubricgym.rewards.shortcuts import run_battery

from .conftest import call

SOURCES = {"synthetic": {}, "real-format": {"cases": str(EXAMPLE_CASES)}}


def _tasks(kw: dict, n: int) -> list:
    env = rubricgym.make("clinical-v0", **kw)
    return [env.task_for(c) for c in env.cases] if env.cases else env.task_set(n, seed=0, split="test")


@pytest.mark.parametrize("source", SOURCES)
def test_task_ids_and_params_say_nothing_of_the_diagnosis(source):
    for task in _tasks(SOURCES[source], 20):
        d = task.hidden["diagnosis"]
        visible = (task.id + json.dumps(task.params)).lower()
        assert d["name"].lower() not in visible and task.hidden["case_id"].lower() not in visible
        assert not {"diagnosis", "key_exams", "cant_miss", "condition"} & set(task.params["case"])
    ids = [t.id for t in _tasks({}, 30)]
    assert len(set(ids)) == 30 and ids == [t.id for t in _tasks({}, 30)]  # unique and deterministic


@pytest.mark.parametrize("source", SOURCES)
def test_leak_audit_passes_on_both_case_sources(source):
    kw = SOURCES[source]
    report = asyncio.run(audit_leaks("clinical-v0", env_kwargs=kw, tasks=_tasks(kw, 6)))
    assert report.ok, report.line()
    assert report.episodes >= 24 and report.exempt.get("agent wrote it", 0) > 0


def test_order_info_the_agent_sees_does_not_flag_key_exams(kb):
    env = rubricgym.make("clinical-v0")
    task = env.task_for(env.cases[0]) if env.cases else env.task_set(1, seed=3)[0]
    env.reset(seed=0, options={"task": task})
    key = task.hidden["key_exams"][0]
    _, _, _, _, info = env.step(call("order", exam=kb.exams[key].name, impression="x", reason="y z"))
    assert "covers" not in info["details"] and "justified" not in info["details"]
    assert env.steps[-1].info["covers"]  # the private record keeps it for the checks


def test_a_diagnosis_listing_many_conditions_is_not_credited():
    kb = load_kb()
    env = rubricgym.make("clinical-v0", cases=str(EXAMPLE_CASES))
    names = ", ".join(c.name for c in kb.conditions.values())
    for case in env.cases:
        task = env.task_for(case)
        d = task.hidden["diagnosis"]
        assert match_diagnosis(kb, task.hidden, d["name"]) == "case"
        assert match_diagnosis(kb, task.hidden, f"{names}, {d['name']}") != "case"
        assert match_diagnosis(kb, task.hidden, f"{d['name']} or {names}") == "several"  # a list commits to none
        assert match_diagnosis(kb, task.hidden, "case") is None  # the index's internal id is not a name


def test_no_key_exams_and_no_cant_miss_are_not_applicable():
    env = rubricgym.make("clinical-v0", cases=str(EXAMPLE_CASES))
    case = env.cases[0].model_copy(update={"key_exams": [], "cant_miss": [], "rubric": []})
    task = env.task_for(case)
    env.reset(seed=0, options={"task": task})
    env.step(call("diagnose", diagnosis="Migraine", reason="a guess"))
    rubric, _ = judgeable(ClinicalEnv.default_rubric(), [CheckJudge()])
    b = asyncio.run(ProcessRewardModel(rubric, [CheckJudge()]).score(env.trajectory()))
    assert "key_exams" not in b.per_criterion and "cant_miss" not in b.per_criterion
    assert b.total is not None and b.total <= 0.05


@pytest.mark.parametrize("source", SOURCES)
def test_default_rubric_ranks_work_above_random_activity(source):
    kw = SOURCES[source]
    tasks = _tasks(kw, 20)
    rubric, _ = judgeable(ClinicalEnv.default_rubric(), [CheckJudge()])
    prm = ProcessRewardModel(rubric, [CheckJudge()])
    agents = ClinicalEnv.agents()

    async def totals(name: str) -> tuple[list[float], list[bool]]:
        trajs = [
            await rollout(rubricgym.make("clinical-v0", **kw), agents[name](seed=i), t, seed=i)
            for i, t in enumerate(tasks)
        ]
        lucky = [len(t.steps) == 1 and bool(t.steps[-1].info.get("correct")) for t in trajs]
        return [b.total for b in await prm.score_many(trajs)], lucky

    (oracle, _), (shotgun, _), (guesser, right), (random, same_guess) = (
        asyncio.run(totals(n)) for n in ("oracle", "shotgun", "guesser", "random")
    )
    nothing = [b.total for b in asyncio.run(prm.score_many([empty_trajectory(t) for t in tasks]))]
    assert sum(random) / len(random) <= 0.1 and sum(nothing) / len(nothing) <= 0.1
    ordered = sum(o > s > g for o, s, g in zip(oracle, shotgun, guesser, strict=True))
    assert ordered >= 0.95 * len(tasks), (oracle, shotgun, guesser)
    # a right guess beats random activity (unless random's first act was the very same right guess)
    assert all(g > r or lucky for g, r, ok, lucky in zip(guesser, random, right, same_guess, strict=True) if ok)
    assert any(right)


def test_shortcut_battery_holds_on_the_real_format_cases():
    kw = SOURCES["real-format"]
    report = asyncio.run(run_battery("clinical-v0", env_kwargs=kw, tasks=_tasks(kw, 0)[:8]))
    assert report.ok, report.problems()
    assert report.oracle is not None and report.oracle.total >= 0.9


def test_tool_examples_name_no_condition_a_policy_could_copy_for_credit(kb):
    env = rubricgym.make("clinical-v0")
    examples = [
        s
        for spec in env.tools()
        for prop in spec.parameters["properties"].values()
        for _, s in leaves(prop.get("examples"))
        if isinstance(s, str)
    ]
    assert any("condition" in s for s in examples)  # the diagnose tool's examples are among them
    cases = rubricgym.make("clinical-v0", cases=str(EXAMPLE_CASES))
    tasks = [*env.task_set(40, seed=0), *env.task_set(16, seed=0, split="test-unseen")]
    tasks += [cases.task_for(c) for c in cases.cases]
    named = {(ex, match_diagnosis(kb, t.hidden, ex)) for t in tasks for ex in examples}
    assert {m for _, m in named} == {None}, sorted((ex, m) for ex, m in named if m is not None)


class _OldExample(ClinicalEnv):
    """clinical-v0 with the diagnose example it once had: "Acute inferior STEMI", an answer of test-unseen only."""

    env_id = "test-clinical-old-example-v0"

    @tool(examples={"diagnosis": "Acute inferior STEMI"})
    def diagnose(self, diagnosis: str, reason: str = "", differential: list[str] | None = None) -> ToolOutput:
        """Commit to a final diagnosis; this ends the episode.

        Args:
            diagnosis: the diagnosis, in words
            reason: the findings and results that support it
            differential: the other diagnoses you considered and excluded
        """
        return ClinicalEnv.diagnose(self, diagnosis, reason, differential)


def test_the_shortcut_battery_catches_a_copied_example_that_answers_one_held_out_split_only():
    """The base policy copied the old example into every diagnosis and "solved" test-unseen's STEMI cases. The
    battery probes every held-out split with each constant the tool specs show: the example call pays on
    test-unseen (1 of its 6 cardiology cases is STEMI) and nowhere on test, where no case is STEMI."""
    kw = {"specialty": "cardiology"}
    register(_OldExample.env_id, _OldExample, replace=True)
    try:
        old = asyncio.run(run_battery(_OldExample.env_id, n_tasks=6, env_kwargs=kw))
    finally:
        unregister(_OldExample.env_id)
    paid = {p.name for p in old.probes if p.reward > old.threshold}
    # the example call as the system prompt shows it, and its text as the diagnosis
    assert paid == {
        "constant[0] the terminal tool's example call on test-unseen",
        "constant[1] 'Acute inferior STEMI' on test-unseen",
    }, old.problems()
    assert any(p.name.startswith("constant[0]") and p.reward == 0 for p in old.probes)  # on test
    now = asyncio.run(run_battery("clinical-v0", n_tasks=6, env_kwargs=kw))
    assert now.ok, now.problems()
    assert any(p.name.endswith("on test-unseen") for p in now.probes)
    fixed = asyncio.run(run_battery("clinical-v0", n_tasks=2, env_kwargs={"condition": "stemi"}))
    assert fixed.probes and not any("test-unseen" in p.name for p in fixed.probes)  # a split the env refuses
