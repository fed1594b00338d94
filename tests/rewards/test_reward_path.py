"""The one reward path (issue #24 item 1-2): one rule picks a trajectory's rubric for every consumer, and one set of
judges scores it; LLM criteria without a judge fail before any work."""

import asyncio
import json

import pytest

import rubricgym
from rubricgym.arena.arena import TaskRubricJudge
from rubricgym.core.rubric import Rubric, Verdict
from rubricgym.rewards.cli import score_run
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.monitor import HackingMonitor, MonitorConfig, credit_shares
from rubricgym.rewards.path import JudgeSettings, RewardPath, build_judges, choose_rubric
from rubricgym.rewards.prm import ScoredTrajectory
from rubricgym.trainers.step import judge_stats


def _task_rubric(toy_rubric: dict) -> dict:
    """The toy default rubric minus one criterion: a task rubric whose totals differ from the default's."""
    return {**toy_rubric, "id": "toy-task-own", "criteria": toy_rubric["criteria"][:2]}


def test_the_rule_override_then_task_then_entry_then_default(toy_rubric):
    task = rubricgym.TaskSet.generate("toy-calculator-v0", 1, seed=0)[0]
    entry = {**toy_rubric, "id": "entry"}
    assert choose_rubric(task).id == rubricgym.spec("toy-calculator-v0").load().default_rubric().id
    assert choose_rubric(task, entry=entry).id == "entry"
    own = task.model_copy(update={"rubric": _task_rubric(toy_rubric)})
    assert choose_rubric(own, entry=entry).id == "toy-task-own"
    assert choose_rubric(own, entry=entry, override={**toy_rubric, "id": "cli"}).id == "cli"


def test_score_train_eval_and_arena_agree_on_a_task_rubric(oracle_trajs, random_trajs, toy_rubric):
    trajs = [
        t.model_copy(update={"task": t.task.model_copy(update={"rubric": _task_rubric(toy_rubric)})})
        for t in (oracle_trajs[0], random_trajs[0])
    ]
    entry = {**toy_rubric, "id": "entry"}
    offline = asyncio.run(score_run([t.model_copy(deep=True) for t in trajs], None, [CheckJudge()]))
    training = asyncio.run(RewardPath([CheckJudge()], entry=entry).score_many([t.model_copy(deep=True) for t in trajs]))
    assert [b.total for b in offline] == [b.total for b in training]
    assert {b.rubric_id for b in offline} == {"toy-task-own"}  # not the entry's, not the default
    arena = TaskRubricJudge(Rubric.from_dict(entry), [CheckJudge()]).for_task(trajs[0].task)
    assert arena.prm.rubric.id == "toy-task-own"
    # the monitors (and the buffer) read these same breakdowns: the task rubric's rollouts are its own credit, not
    # the entry rubric's
    scored = [ScoredTrajectory(t, b) for t, b in zip(trajs, training, strict=True)]
    own = Rubric.from_dict(_task_rubric(toy_rubric))
    assert credit_shares(scored, own) and credit_shares(scored, own) == credit_shares(
        [ScoredTrajectory(t, b) for t, b in zip(trajs, offline, strict=True)], own
    )
    watch = asyncio.run(HackingMonitor(MonitorConfig(alarms=[]), Rubric.from_dict(entry)).observe(1, scored))
    assert not any(k.startswith("monitor/credit/") for k in watch)


def test_llm_criteria_without_a_judge_fail_before_any_work(toy_rubric):
    rubric = {**toy_rubric, "criteria": [*toy_rubric["criteria"], {"id": "clear", "text": "Explains each step."}]}
    task = rubricgym.TaskSet.generate("toy-calculator-v0", 1, seed=0)[0]
    path = RewardPath([CheckJudge()], entry=rubric)
    with pytest.raises(ValueError, match="need an LLM judge .*: clear\\)"):
        path.require_judges([task])
    judged = RewardPath(
        build_judges(JudgeSettings(base_url="http://127.0.0.1:9/v1", model="m", cache=None)), entry=rubric
    )
    judged.require_judges([task])  # an endpoint is configured: nothing to refuse


def test_the_training_config_takes_a_judge_section(tmp_path, tiny_model_dir):
    from rubricgym.trainers.config import ConfigError, validate_config, world_problems

    llm_rubric = {"id": "r", "criteria": [{"id": "clear", "text": "Explains each step."}]}
    data = {"run_dir": str(tmp_path / "run"), "model": {"name": str(tiny_model_dir)}, "env": {"rubric": llm_rubric}}
    with pytest.raises(ConfigError, match="field 'judge': the rubric's criteria clear need an LLM judge"):
        validate_config(data)  # before the run directory or the model exists
    cfg = validate_config({**data, "judge": {"base_url": "http://127.0.0.1:9/v1", "model": "smol", "concurrency": 2}})
    assert not [p for p in world_problems(cfg) if p[0] == "judge"]
    judges = build_judges(cfg.judge, tmp_path)
    assert [type(j).__name__ for j in judges] == ["CheckJudge", "LLMJudge"] and (
        tmp_path / "judge_cache.sqlite"
    ).exists()
    with pytest.raises(ConfigError, match="base_url and model"):
        validate_config({**data, "judge": {"base_url": "http://x/v1"}})
    # the rubric buffer's LLM writer adds criteria only a judge can score: no judge, no start
    llm_buffer = {"writer": "llm", "base_url": "http://127.0.0.1:9/v1", "model": "smol"}
    with pytest.raises(ConfigError, match="writer 'llm' writes criteria only an LLM can judge"):
        validate_config({**data, "env": {}, "rubric_buffer": llm_buffer})
    validate_config({**data, "env": {}, "rubric_buffer": llm_buffer, "judge": cfg.judge.model_dump()})


def test_judge_stats_count_llm_verdicts_errors_and_cache_hits():
    def v(judge: str, **kw) -> Verdict:
        return Verdict(criterion_id="c", judge=judge, **kw)

    class B:  # the one field judge_stats reads
        def __init__(self, verdicts):
            self.verdicts = verdicts

    stats = judge_stats(
        [
            B([v("check", score=1.0, met=True), v("llm:m", score=1.0, met=True, latency_s=0.4)]),
            B([Verdict.not_applicable("c", "never came near", judge="applies_if")]),  # decided by a condition
            B([v("llm:m", error="timeout", latency_s=0.2), v("llm:m", score=0.0, met=False, cached=True)]),
        ]
    )
    assert stats == {
        "judge/verdicts": 3.0,
        "judge/errors": 1.0,
        "judge/cache_hits": 1.0,
        "judge/latency_s": pytest.approx(0.3),
    }
    assert judge_stats([B([v("check", score=1.0, met=True)])]) == {}
    assert judge_stats([B([Verdict.failed("c", "unknown check 'x'", judge="applies_if")])]) == {}
    json.dumps(stats)
