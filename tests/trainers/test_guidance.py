"""Guidance for groups that all fail: the trigger rule, adaptive levels, rubric hints, secret screening, the guided
samples' prompts and importance weights, and a training step that guides its groups."""

import asyncio
import json
import math

import pytest
import torch

from rubricgym.core.rubric import Criterion, Rubric, Verdict
from rubricgym.core.types import Message, Outcome, Task, Trajectory
from rubricgym.rewards.prm import Breakdown
from rubricgym.trainers.algo.guidance import Guide, rubric_hint
from rubricgym.trainers.algo.loss import guided_weights
from rubricgym.trainers.algo.rollouts import Rollout
from rubricgym.trainers.algo.samples import Sample, build_samples
from rubricgym.trainers.config import GuidanceConfig, LossConfig
from rubricgym.trainers.engine.sampling import with_hint
from rubricgym.trainers.engine.update import UpdateSettings, compute_gradients


def _rollout(task: Task, outcome: float) -> Rollout:
    return Rollout(Trajectory(task=task, outcome=Outcome(reward=outcome)), [])


def _breakdown(verdicts: list[Verdict]) -> Breakdown:
    return Breakdown(
        trajectory_id="x",
        task_id="t",
        env_id="toy-calculator-v0",
        agent="a",
        rubric_id="r",
        rubric_version="1",
        rubric_hash="h",
        method="weighted",
        total=0.0,
        verdicts=verdicts,
    )


def _task(i: int = 0) -> Task:
    return Task(id=f"t{i}", env_id="toy-calculator-v0", prompt="What is 2 + 3?", hidden={"answer": 5})


def test_guided_weights_are_the_truncated_ratio_and_zero_where_the_sampler_is_unknown():
    old = torch.log(torch.tensor([[0.5, 0.9, 0.2]]))
    sampler = torch.tensor([[math.log(0.8), math.log(0.3), math.nan]])
    w = guided_weights(old, sampler, cap=1.0)
    assert torch.allclose(w, torch.tensor([[0.625, 1.0, 0.0]]))  # 0.5/0.8; 0.9/0.3 = 3 capped at 1; unknown: 0
    assert torch.allclose(guided_weights(old, sampler, cap=4.0)[0, 1], torch.tensor(3.0))


def test_a_group_whose_best_is_below_the_threshold_triggers_and_levels_adapt():
    cfg = GuidanceConfig(threshold=0.5, max_level=3, share=0.5, rubric_hints=False)
    task = _task()
    guide = Guide(cfg, lambda t: ("toy-calculator-v0", {}), lambda t: Rubric(id="r", version="1", criteria=[]))
    guide.hint = lambda task, level, best, stats: f"hint at level {level}"  # the env's hints are tested per family
    assert guide.failed([_rollout(task, 0.0), _rollout(task, 0.4)])
    assert not guide.failed([_rollout(task, 0.0), _rollout(task, 1.0)])
    calls = []

    async def regenerate(tasks, hints, n):
        calls.append((hints[0], n))
        solved = 1.0 if hints[0].endswith("2") else 0.0  # level 1 does not help, level 2 does
        return [[_rollout(t, solved) for _ in range(n)] for t in tasks]

    group = [_rollout(task, 0.0) for _ in range(4)]
    stats = asyncio.run(guide.guide([group], regenerate))
    assert calls == [("hint at level 1", 2), ("hint at level 2", 2)]  # escalated within the step
    assert [r.guidance for r in group] == [0, 0, 2, 2]  # the last share replaced, by the level-2 re-roll
    assert guide.levels == {"t0": 2}  # the next failure starts at level 2
    assert stats.record()["guidance/share"] == 1.0 and stats.record()["guidance/success"] == 1.0
    calls.clear()
    asyncio.run(guide.guide([[_rollout(task, 0.0) for _ in range(4)]], regenerate))
    assert calls == [("hint at level 2", 2)]
    asyncio.run(guide.guide([[_rollout(task, 1.0), _rollout(task, 0.0)]], regenerate))  # solved unguided
    assert guide.levels == {} and len(calls) == 1


def test_escalation_stops_at_the_max_level():
    guide = Guide(GuidanceConfig(max_level=2, rubric_hints=False), lambda t: ("toy-calculator-v0", {}), None)
    guide.hint = lambda task, level, best, stats: f"level {level}"
    seen = []

    async def regenerate(tasks, hints, n):
        seen.append(hints[0])
        return [[_rollout(t, 0.0) for _ in range(n)] for t in tasks]

    asyncio.run(guide.guide([[_rollout(_task(), 0.0) for _ in range(2)]], regenerate))
    assert seen == ["level 1", "level 2"] and guide.levels == {"t0": 2}


def test_rubric_hints_name_the_heaviest_missed_criteria_and_no_pitfall():
    rubric = Rubric(
        id="r",
        version="1",
        criteria=[
            Criterion(id="a", text="Shows the working.", level="optional"),
            Criterion(id="b", text="Uses the calculator tool", level="essential"),
            Criterion(id="c", text="Submits once", level="important"),
            Criterion(id="p", text="Guesses", level="pitfall"),
        ],
    )
    verdicts = [
        Verdict(criterion_id="a", score=0.0, met=False),
        Verdict(criterion_id="b", score=0.0, met=False),
        Verdict(criterion_id="c", score=1.0, met=True),
        Verdict(criterion_id="p", score=0.0, met=False),
    ]
    b = _breakdown(verdicts)
    assert rubric_hint(rubric, b, 1) == "Your work will be judged on: Uses the calculator tool."
    assert rubric_hint(rubric, b, 3) == "Your work will be judged on: Uses the calculator tool; Shows the working."


def test_a_hint_that_states_a_secret_is_never_shown():
    cfg = GuidanceConfig(rubric_hints=True)
    rubric = Rubric(id="r", version="1", criteria=[Criterion(id="x", text="Answers 12345", level="essential")])
    guide = Guide(cfg, lambda t: ("toy-calculator-v0", {}), lambda t: rubric)
    task = Task(id="t", env_id="toy-calculator-v0", prompt="p", hidden={"answer": 12345})
    best = _rollout(task, 0.0)
    best.breakdown = _breakdown([Verdict(criterion_id="x", score=0.0, met=False)])
    from rubricgym.trainers.algo.guidance import GuidanceStats

    stats = GuidanceStats()
    assert rubric_hint(rubric, best.breakdown, 9) == "Your work will be judged on: Answers 12345."
    assert guide.hint(task, 9, best, stats) is None and stats.refused == 1  # level 9: past the env's own hints
    guide.close()


def test_the_hint_goes_in_the_task_and_the_plain_prompt_is_the_unguided_one(tiny_model_dir):
    from rubricgym.trainers.engine.policy import TrainingPolicy

    policy = TrainingPolicy(str(tiny_model_dir))
    messages = [Message(role="system", content="tools"), Message(role="user", content="What is 2 + 3?")]
    hinted = with_hint(messages, "start with the sum")
    assert hinted[1].content == "What is 2 + 3?\n\nHint: start with the sum" and messages[1].content == "What is 2 + 3?"

    class Turn:
        def __init__(self, prompt, plain, completion):
            self.prompt_ids, self.plain_prompt_ids = prompt, plain
            self.completion_ids, self.logprobs = completion, [-0.5] * len(completion)

    plain = policy.render(messages)
    turn = Turn(policy.render(hinted), plain, [5, 6])
    (guided,) = build_samples(0, [turn], [0], plain=True)
    assert guided.guided and guided.input_ids == [*plain, 5, 6] and guided.loss_mask == [0] * len(plain) + [1, 1]
    (hinted_sample,) = build_samples(0, [turn], [0])
    assert not hinted_sample.guided and hinted_sample.input_ids[: len(turn.prompt_ids)] == turn.prompt_ids
    with pytest.raises(ValueError, match="plain_prompt_ids"):
        build_samples(0, [Turn([1, 2], None, [3])], [0], plain=True)


@pytest.mark.parametrize("mode", ["none", "sampler", "tis"])
def test_a_guided_sample_trains_like_tis_at_the_guidance_cap_whatever_off_policy_says(tiny_model_dir, mode):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))

    def sample(guided: bool) -> Sample:
        s = Sample(0, guided=guided)
        s.extend([1, 2, 3], False, 0, 0)
        s.extend([4, 5, 6], True, 0, 0, [-1.0, -9.0, -0.5])
        s.advantages = [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
        return s

    def grads(s: Sample, loss: LossConfig) -> tuple[dict, torch.Tensor]:
        model.zero_grad()
        stats = compute_gradients(model, [s], UpdateSettings(loss=loss, guidance_cap=1.5), pad_id=0)
        return stats, torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    stats, g = grads(sample(True), LossConfig(off_policy=mode))
    ref_stats, ref = grads(sample(False), LossConfig(off_policy="tis", tis_cap=1.5))
    assert torch.allclose(g, ref, atol=1e-7) and math.isfinite(stats["loss"])
    assert stats["guided_tokens"] == 3 and 0 < stats["guided_weight_min"] <= stats["guided_weight_mean"] <= 1.5
    assert "guided_tokens" not in ref_stats  # unguided batches log no guided statistics


def test_a_training_step_guides_groups_that_all_fail(tiny_config, tmp_path):
    from rubricgym.trainers.trainer import Trainer

    cfg = tiny_config(
        tmp_path / "run",
        steps=1,
        group_size=4,
        guidance={"threshold": 0.5, "max_level": 2, "share": 0.5},
        # the tiny model's rollouts all score alike: run their zero-advantage samples so the weights are measured
        loss={"skip_zero_advantage": False},
    )
    trainer = Trainer(cfg)
    seen = []
    collect = trainer.backend.collect

    async def spy(tasks, seeds, n, **kw):
        seen.append(kw.get("hints"))
        return await collect(tasks, seeds, n, **kw)

    trainer.backend.collect = spy
    trainer.run()
    (record,) = [json.loads(x) for x in (cfg.run_dir / "metrics.jsonl").read_text().splitlines() if '"train"' in x]
    assert record["guidance/share"] == 1.0  # a random tiny model solves nothing: every group is guided
    assert record["guidance/rerolls"] >= 1 and record["guidance/level_mean"] >= 1
    assert 0 < record["guided_weight_mean"] <= 1.0 and record["guided_tokens"] > 0
    assert all(math.isfinite(record[k]) for k in ("loss", "grad_norm", "guided_weight_min"))
    hints = [h for batch in seen if batch for h in batch]
    assert hints and all(isinstance(h, str) and h for h in hints)
    kept = [json.loads(x) for x in (cfg.run_dir / "trajectories.jsonl").read_text().splitlines()]
    assert sum(t["metrics"].get("guidance_level", 0) > 0 for t in kept) == 2 * 2  # 2 groups x half of 4
    ckpt = json.loads((cfg.run_dir / "checkpoints" / "step-000001" / "state.json").read_text())
    assert set(ckpt["guidance"]["levels"]) == {t["task"]["id"] for t in kept}
