"""Outcome consistency of clinical-v0's default rubric (issue #39): gated on the diagnosis, no failed episode
outranks a solved one on the same case, chance-level play earns next to nothing, and the guesser baseline knows a
real case file's diagnoses, so "a right guess beats random activity" is measurable on real data."""

import asyncio
import statistics
from pathlib import Path

import pytest

import rubricgym
from rubricgym.core.rollout import rollout
from rubricgym.core.rubric import load_rubric
from rubricgym.envs.clinical.env import ClinicalEnv
from rubricgym.envs.clinical.osce import import_osce, write_cases
from rubricgym.envs.clinical.schema import load_kb
from rubricgym.rewards.consistency import audit_consistency
from rubricgym.rewards.gaming import judgeable
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.prm import ProcessRewardModel
from rubricgym.rewards.shortcuts import run_battery

from .conftest import call, start

REAL = Path(__file__).with_name("data") / "osce_real_mess.jsonl"


@pytest.fixture(scope="module")
def real_cases(tmp_path_factory) -> str:
    cases, overlay, _ = import_osce(REAL, load_kb())
    return str(write_cases(tmp_path_factory.mktemp("real") / "cases.jsonl", cases, overlay))


def _sources(real_cases: str) -> dict[str, tuple[dict, int]]:
    return {"synthetic": ({}, 20), "real": ({"cases": real_cases}, 9)}


def test_the_default_rubric_is_gated_on_the_diagnosis():
    rubric = load_rubric(ClinicalEnv.default_rubric())
    gate = rubric.aggregation
    assert gate.method == "swe_trace" and gate.outcome_check == "correct"
    assert rubric.criterion("correct").check == "diagnosis_correct"
    assert load_rubric(rubricgym.spec("clinical-cost-v0").load().default_rubric()).aggregation.method == "swe_trace"


@pytest.mark.parametrize("source", ["synthetic", "real"])
def test_no_failed_episode_outranks_a_solved_one(real_cases, source):
    kw, n = _sources(real_cases)[source]
    report = asyncio.run(audit_consistency("clinical-v0", n_tasks=n, env_kwargs=kw))
    assert report.ok, report.problems()
    means = report.agent_means()
    assert means["oracle"] is not None and means["oracle"] >= 0.9
    for role in ("outcome:failed", "outcome:partial"):  # a wrong diagnosis stays under 1 - gamma = 0.4
        assert max(e.total or 0.0 for e in report.episodes if e.agent == role) <= 0.4 + 1e-9, role
    chance = [e.total or 0.0 for e in report.episodes if e.agent in ("random", "probe:empty", "probe:activity")]
    assert statistics.mean(chance) <= 0.1


def _play(kw: dict, tasks: list, name: str) -> tuple[list[float], list[bool]]:
    rubric, _ = judgeable(ClinicalEnv.default_rubric(), [CheckJudge()])
    prm = ProcessRewardModel(rubric, [CheckJudge()])
    agent = ClinicalEnv.agents()[name]

    async def go() -> tuple[list[float], list[bool]]:
        trajs = [
            await rollout(rubricgym.make("clinical-v0", **kw), agent(seed=i), t, seed=i) for i, t in enumerate(tasks)
        ]
        right = [bool(t.steps and t.steps[-1].info.get("correct")) for t in trajs]
        return [b.total or 0.0 for b in await prm.score_many(trajs)], right

    return asyncio.run(go())


def test_random_activity_with_a_wrong_diagnosis_earns_at_most_005(real_cases):
    for kw, n in _sources(real_cases).values():
        env = rubricgym.make("clinical-v0", **kw)
        tasks = env.task_set(n, seed=0, split="test")
        totals, right = _play(kw, tasks, "random")
        wrong = [t for t, r in zip(totals, right, strict=True) if not r]
        assert wrong and statistics.mean(wrong) <= 0.05


def test_random_activity_that_orders_a_key_exam_by_chance_stays_at_chance_level(kb):
    """Random questions, systems and exams ("unsure" impressions), one of them a key exam by luck, then a wrong
    diagnosis: 0.17 under the plain weighted sum (the key exam alone earned it), at most 0.1 behind the gate."""
    env = rubricgym.make("clinical-v0")
    start(env, kb, "acute_appendicitis")
    for action in (
        call("ask", question="Have you had a rash?"),
        call("examine", system="skin"),
        call("order", exam="CBC", impression="unsure", reason="random"),
        call("order", exam="MRI brain", impression="unsure", reason="random"),
        call("diagnose", diagnosis="Migraine", reason="a guess"),
    ):
        env.step(action)
    rubric, _ = judgeable(ClinicalEnv.default_rubric(), [CheckJudge()])
    b = asyncio.run(ProcessRewardModel(rubric, [CheckJudge()]).score(env.trajectory()))
    assert b.per_criterion["key_exams"] == 0.5 and b.per_criterion["correct"] == 0.0
    assert b.total is not None and b.total <= 0.1


def test_the_guesser_knows_the_file_s_diagnoses_and_beats_random_on_real_cases(real_cases):
    kw = {"cases": real_cases}
    env = rubricgym.make("clinical-v0", **kw)
    tasks = env.task_set(len(env.cases))
    guesses = {t.hidden["diagnosis"]["name"]: ClinicalEnv.agents()["guesser"].guess(t) for t in tasks}
    assert set(guesses.values()) <= set(env.label_space)  # it guesses among the file's labels
    kb = load_kb()
    unknown = [c.diagnosis.name for c in env.cases if c.condition is None]
    assert any(guesses[d] == d for d in unknown), guesses  # right on a case the knowledge base does not know
    assert len(unknown) >= 6 and all(d not in {c.name for c in kb.conditions.values()} for d in unknown)
    guesser, right = _play(kw, tasks, "guesser")
    random, _ = _play(kw, tasks, "random")
    assert any(right) and statistics.mean(guesser) > statistics.mean(random) + 0.2


def test_every_shotgun_over_the_file_s_diagnoses_earns_nothing(real_cases):
    kw = {"cases": real_cases}
    env = rubricgym.make("clinical-v0", **kw)
    report = asyncio.run(run_battery("clinical-v0", env_kwargs=kw, tasks=env.task_set(len(env.cases))))
    assert report.ok, report.problems()
    names = {p.name for p in report.probes}
    assert {"shotgun", "shotgun_spaces", "shotgun_or", "shotgun_slashes", "shotgun_lines", "shotgun_pair"} <= names
    assert all(p.reward <= 0.05 and (p.total or 0.0) <= 0.05 for p in report.probes if p.name.startswith("shotgun"))
