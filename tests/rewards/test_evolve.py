"""RubricEM's per-stage rubric buffer on real toy rollouts: contrastive additions under per-stage caps,
retirement of criteria that stopped discriminating, and recorded versions that re-score identically."""

import pytest

from rubricgym.core.rubric import Rubric
from rubricgym.rewards.evolve import (
    SCORED,
    BufferConfig,
    RubricBuffer,
    ScoredRollout,
    check_writer,
    read_scored,
    read_versions,
    reproduce,
)
from rubricgym.rewards.judges import env_checks
from rubricgym.rewards.prm import ProcessRewardModel, ScoredTrajectory


def base_without_used_calculator(toy_rubric) -> Rubric:
    return Rubric.from_dict(
        {**toy_rubric, "criteria": [c for c in toy_rubric["criteria"] if c["id"] != "used_calculator"]}
    )


async def scored(rubric, groups) -> list[list[ScoredTrajectory]]:
    prm = ProcessRewardModel(rubric)
    return [[ScoredTrajectory(t, b) for t, b in zip(g, await prm.score_many(g), strict=True)] for g in groups]


async def test_buffer_adds_from_contrast_retires_and_records(oracle_trajs, guess_trajs, toy_rubric, tmp_path):
    base = base_without_used_calculator(toy_rubric)
    record = tmp_path / "rubric_versions.jsonl"
    buf = RubricBuffer(
        base,
        ["compute", "answer"],
        BufferConfig(caps=[3, 2], retire_after=2),
        check_writer(env_checks("toy-calculator-v0")),
        record=record,
    )
    # the oracle takes its answer from the calculator, the guess does not: the unused check "answer_grounded" (first
    # by name of those that separate them) is added to the stage whose reward separates them most, "compute" (the
    # guess has no compute stage reward)
    groups = await scored(base, [[oracle_trajs[0], guess_trajs[0]]])
    v1 = await buf.update(1, groups)
    assert v1 is not None and [c.id for c in v1.criteria][-1] == "evolved_answer_grounded"
    added = v1.criterion("evolved_answer_grounded")
    assert added.check == "answer_grounded" and added.stage == "compute"
    assert v1.version == "3+e1" and v1.hash != base.hash
    # it discriminates while the group is mixed; two oracle rollouts do not vary: retired after 2 quiet steps
    same = [[oracle_trajs[1].model_copy(deep=True), oracle_trajs[2].model_copy(deep=True)]]
    assert await buf.update(2, await scored(v1, same)) is None
    v3 = await buf.update(3, await scored(v1, same))
    assert v3 is not None and "evolved_answer_grounded" not in {c.id for c in v3.criteria}
    assert v3.hash == Rubric.model_validate({**base.model_dump(), "version": "3+e2"}).hash
    # every version recorded with its hash; a recorded version re-scores a trajectory identically
    versions = read_versions(record)
    assert [(v.step, v.added, v.retired) for v in versions] == [
        (0, [], []),
        (1, ["evolved_answer_grounded"], []),
        (3, [], ["evolved_answer_grounded"]),
    ]
    for v in versions:
        assert Rubric.model_validate(v.rubric).hash == v.hash
    t = oracle_trajs[0].model_copy(deep=True)
    then = (await ProcessRewardModel(v1).score(t)).model_dump(exclude={"verdicts"})
    again = (await ProcessRewardModel(buf.version(v1.hash)).score(t.model_copy(deep=True))).model_dump(
        exclude={"verdicts"}
    )
    assert then == again and then["rubric_hash"] == v1.hash


async def test_caps_bound_each_stage(oracle_trajs, guess_trajs, toy_rubric):
    base = base_without_used_calculator(toy_rubric)
    buf = RubricBuffer(
        base, ["compute", "answer"], BufferConfig(caps=[0, 0]), check_writer(env_checks("toy-calculator-v0"))
    )
    assert await buf.update(1, await scored(base, [[oracle_trajs[0], guess_trajs[0]]])) is None
    assert buf.cap("compute") == 0 and buf.cap("unknown-stage") == 0
    with pytest.raises(KeyError, match="no recorded rubric version"):
        buf.version("nope")


def lucky_guess(guess_traj):
    """A guess that happened to be right: correct, but no calculator (so nothing it does is worth rewarding)."""
    t = guess_traj.model_copy(deep=True)
    t.steps[-1].info["correct"] = True
    return t


async def test_a_lucky_best_does_not_hide_a_contrasting_pair(oracle_trajs, guess_trajs, toy_rubric):
    # real policies tie at the top: the first best rollout here is a lucky guess that shares every unused
    # behaviour with the worst one, while the oracle (equally correct) used the calculator; the buffer must
    # still find the contrast between the oracle and the wrong guess (it compared only best vs worst before)
    base = Rubric.from_dict({**toy_rubric, "criteria": [c for c in toy_rubric["criteria"] if c["id"] == "correct"]})
    wrong = next(t for t in guess_trajs if not t.steps[-1].info.get("correct"))
    group = [lucky_guess(wrong), oracle_trajs[0], wrong]
    groups = await scored(base, [group])
    assert [s.reward for s in groups[0]] == [0.7, 0.7, 0.0]  # gated on correct (swe_trace, gamma 0.7)
    buf = RubricBuffer(
        base, ["compute", "answer"], BufferConfig(caps=[2, 2]), check_writer(env_checks("toy-calculator-v0"))
    )
    v1 = await buf.update(1, groups)
    assert v1 is not None and [c.id for c in buf.buffered] == ["evolved_answer_from_work"]
    assert buf.buffered[0].stage == "answer"  # the stage whose reward separates the oracle from the guess


async def test_recorded_versions_reproduce_the_scored_rollouts(oracle_trajs, guess_trajs, toy_rubric, tmp_path):
    base = base_without_used_calculator(toy_rubric)
    buf = RubricBuffer(
        base,
        ["compute", "answer"],
        BufferConfig(caps=[3, 2], retire_after=1),
        check_writer(env_checks("toy-calculator-v0")),
        record=tmp_path / "rubric_versions.jsonl",
    )
    v1 = await buf.update(1, await scored(base, [[oracle_trajs[0], guess_trajs[0]]]))
    assert v1 is not None
    await buf.update(2, await scored(v1, [[oracle_trajs[1], oracle_trajs[2]]]))  # retires: no variance
    checks = await reproduce(tmp_path)
    assert [(c.step, c.rollouts, c.identical) for c in checks] == [(0, 2, 2), (1, 2, 2), (2, 0, 0)]
    assert checks[1].added == ["evolved_answer_grounded"] and checks[2].retired == ["evolved_answer_grounded"]
    # a stored score that the recorded rubric does not give back is caught
    lines = (tmp_path / SCORED).read_text().splitlines()
    rec = ScoredRollout.model_validate_json(lines[0])
    assert rec.breakdown.total is not None
    rec.breakdown.total += 0.25
    (tmp_path / SCORED).write_text("\n".join([rec.model_dump_json(), *lines[1:]]) + "\n")
    assert [c.identical for c in await reproduce(tmp_path)] == [1, 2, 0]


async def test_scored_record_restarts_with_a_run_and_survives_a_resume(oracle_trajs, guess_trajs, toy_rubric, tmp_path):
    base = base_without_used_calculator(toy_rubric)
    record = tmp_path / "rubric_versions.jsonl"

    def buffer() -> RubricBuffer:
        return RubricBuffer(
            base, ["compute", "answer"], BufferConfig(), check_writer(env_checks("toy-calculator-v0")), record=record
        )

    first = buffer()
    for step in (1, 2, 3):
        await first.update(step, await scored(first.current, [[oracle_trajs[0], guess_trajs[0]]]))
    steps = [r.step for r in read_scored(tmp_path / SCORED)]
    assert steps == [1, 1, 2, 2, 3, 3]
    resumed = buffer()  # as the trainer does on resume: a new buffer, then (here: no) checkpointed state
    await resumed.update(3, await scored(base, [[oracle_trajs[1], guess_trajs[1]]]))  # steps 1-2 were checkpointed
    assert [r.step for r in read_scored(tmp_path / SCORED)] == [1, 1, 2, 2, 3, 3]
    assert read_scored(tmp_path / SCORED)[-1].trajectory.id == guess_trajs[1].id  # step 3 scored afresh
    fresh = buffer()
    await fresh.update(1, await scored(base, [[oracle_trajs[2]]]))
    assert [r.step for r in read_scored(tmp_path / SCORED)] == [1]


async def test_masked_rollouts_and_unscored_stages_inform_nothing(oracle_trajs, guess_trajs, toy_rubric):
    base = base_without_used_calculator(toy_rubric)
    checks = check_writer(env_checks("toy-calculator-v0"))
    # the contrasting pair of the first test, but the better rollout is masked (a verdict failed): its reward is
    # nan, not the partial total its trajectory's reward keys still show, so there is no pair to learn from
    [[better, worse]] = await scored(base, [[oracle_trajs[0], guess_trajs[0]]])
    masked = ScoredTrajectory(better.trajectory, better.breakdown.model_copy(update={"n_errors": 1}))
    assert better.trajectory.rewards["rubric"] > worse.reward and masked.reward != masked.reward
    buf = RubricBuffer(base, ["compute", "answer"], BufferConfig(caps=[3, 2]), checks)
    assert await buf.update(1, [[masked, worse]]) is None
    # a stage the worse rollout reached with every criterion N/A separates nothing (the trajectory's reward keys
    # have no entry for it, which used to read as a 0 and made it the widest gap)
    reached = oracle_trajs[1].model_copy(deep=True)
    [[twin]] = await scored(base, [[reached]])
    stages = {k: v for k, v in twin.breakdown.per_stage.items() if k != "compute"} | {"answer": 0.5}
    na = ScoredTrajectory(reached, twin.breakdown.model_copy(update={"per_stage": stages}))
    assert better.breakdown.per_stage["compute"] == 1.0 and any(s.stage == "compute" for s in reached.steps)
    assert buf._stage(better, na) == "answer"
    # a stage the worse rollout never reached earned it 0 there: the guess skipped computing
    assert not any(s.stage == "compute" for s in worse.trajectory.steps)
    assert buf._stage(better, worse) == "compute"


async def test_rollouts_another_rubric_scored_are_not_the_buffers(oracle_trajs, guess_trajs, toy_rubric):
    base = base_without_used_calculator(toy_rubric)
    own = Rubric.from_dict({**toy_rubric, "id": "task-own"})  # a task's own rubric scored this contrasting group
    buf = RubricBuffer(
        base, ["compute", "answer"], BufferConfig(caps=[3, 2]), check_writer(env_checks("toy-calculator-v0"))
    )
    assert await buf.update(1, await scored(own, [[oracle_trajs[0], guess_trajs[0]]])) is None
    assert await buf.update(2, await scored(base, [[oracle_trajs[0], guess_trajs[0]]])) is not None
