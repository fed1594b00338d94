"""AEM entropy modulation: the weights against a worked example, per-turn entropies from the model, the advantages
scaled per turn within each group, and a training step that logs it."""

import json
import math

import pytest
import torch

from rubricgym.trainers.algo.entropy import aem_weights, modulate
from rubricgym.trainers.algo.logprobs import generated_logprobs
from rubricgym.trainers.algo.samples import Sample
from rubricgym.trainers.config import EntropyModulationConfig
from rubricgym.trainers.engine.update import UpdateSettings, turn_entropies


def test_weights_match_the_worked_example():
    # H = [0.5, 1.0, 1.5] -> H~ = [0, 0.5, 1] -> exp(-H~) = [1, 0.6065307, 0.3678794], mean 0.6581367
    w = aem_weights([0.5, 1.0, 1.5], lam=1.0, min_range=0.1)
    assert w == pytest.approx([1.519441, 0.921588, 0.558971], abs=1e-5)
    assert sum(w) / len(w) == pytest.approx(1.0)
    assert aem_weights([0.5, 1.0, 1.5], lam=0.0) == pytest.approx([1.0, 1.0, 1.0])  # lam 0: no modulation


def test_a_group_of_similar_entropies_and_unknown_turns_are_left_alone():
    assert aem_weights([0.50, 0.55, 0.59], min_range=0.1) == [1.0, 1.0, 1.0]  # range 0.09 < 0.1
    w = aem_weights([0.5, math.nan, 1.5], lam=1.0)
    assert w[1] == 1.0 and w[0] == pytest.approx(2 / (1 + math.exp(-1))) and w[0] > 1 > w[2]
    assert aem_weights([1.0]) == [1.0]


def _sample(rollout: int, turns: list[int], advantage: float) -> Sample:
    s = Sample(rollout)
    for t in turns:
        s.extend([1, 2], False, t, 0)
        s.extend([3, 4], True, t, 0, [-1.0, -1.0])
    s.advantages = [advantage * m for m in s.loss_mask]
    return s


def test_modulate_scales_each_turns_advantage_within_its_group():
    samples = [_sample(0, [0, 1], 1.0), _sample(1, [0], -1.0), _sample(2, [0], 2.0)]
    ents = {(0, 0): 0.5, (0, 1): 1.5, (1, 0): 1.0, (2, 0): 3.0}
    stats = modulate(samples, ents, group_of=[0, 0, 1], cfg=EntropyModulationConfig(lam=1.0, min_range=0.1))
    a, b, c = aem_weights([0.5, 1.5, 1.0])  # group 0's turns, sorted by (rollout, turn)
    assert samples[0].advantages == pytest.approx([0, 0, a, a, 0, 0, b, b])
    assert samples[1].advantages == pytest.approx([0, 0, -c, -c])
    assert samples[2].advantages == pytest.approx([0, 0, 2.0, 2.0])  # a group of one turn: alpha 1
    assert stats["aem/groups_modulated"] == 0.5 and stats["aem/alpha_max"] == pytest.approx(a)


def test_turn_entropies_are_the_mean_token_entropy_of_each_turn(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    s = Sample(0)
    s.extend([5, 6, 7], False, 0, 0)
    s.extend([8, 9], True, 0, 0, [-1.0, -1.0])
    s.extend([10], False, 1, 0)
    s.extend([11, 12, 13], True, 1, 0, [-1.0] * 3)
    got = turn_entropies(model, [s], UpdateSettings(), pad_id=0)
    ids = torch.tensor([s.input_ids])
    mask = torch.tensor([s.loss_mask], dtype=torch.float32)
    with torch.no_grad():
        _, ent = generated_logprobs(model, ids, torch.ones_like(ids), mask, 1.0, with_entropy=True)
    assert set(got) == {(0, 0), (0, 1)}
    assert got[(0, 0)] == pytest.approx(float(ent[0, 3:5].mean()), rel=1e-5)
    assert got[(0, 1)] == pytest.approx(float(ent[0, 6:9].mean()), rel=1e-5)
    assert all(p.grad is None for p in model.parameters())  # no graph, no gradient


@pytest.mark.slow
def test_a_training_step_modulates_and_logs(tiny_config, tmp_path):
    from rubricgym.trainers.trainer import Trainer

    cfg = tiny_config(tmp_path / "run", steps=1, group_size=4, loss={"entropy_modulation": {"lam": 1.0}})
    Trainer(cfg).run()
    (record,) = [json.loads(x) for x in (cfg.run_dir / "metrics.jsonl").read_text().splitlines() if '"train"' in x]
    assert record["aem/turn_entropy"] > 0 and record["aem/alpha_min"] <= 1.0 <= record["aem/alpha_max"]
    assert math.isfinite(record["loss"]) and record["aem_s"] >= 0
