"""Samples whose loss is identically zero (all advantages 0, no KL or entropy term) are left out of the update's
forward and backward (``loss.skip_zero_advantage``): the gradient, the optimizer step and the weights after it are
the same as running them."""

from __future__ import annotations

import math

import pytest
import torch

from rubricgym.trainers.algo.samples import Sample
from rubricgym.trainers.config import LossConfig, OptimConfig
from rubricgym.trainers.engine.update import UpdateSettings, compute_gradients, policy_update, trained_samples


def _samples(advantages: list[float], length: int = 30, generated: int = 8, seed: int = 0) -> list[Sample]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for i, a in enumerate(advantages):
        ids = torch.randint(5, 1000, (length + 3 * i,), generator=g).tolist()
        s = Sample(i)
        s.extend(ids[:-generated], False, 0, 0)
        s.extend(ids[-generated:], True, 0, 0, [-2.0] * generated)
        s.advantages = [0.0] * (len(ids) - generated) + [a] * generated
        out.append(s)
    return out


def _model(model_dir):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)


def _settings(skip: bool, **loss) -> UpdateSettings:
    return UpdateSettings(loss=LossConfig(skip_zero_advantage=skip, **loss), optim=OptimConfig(micro_batch=2))


def _gradient(model_dir, samples, skip: bool, aggregation: str) -> tuple[torch.Tensor, dict[str, float]]:
    model = _model(model_dir)
    model.train()
    stats = compute_gradients(model, samples, _settings(skip, aggregation=aggregation), pad_id=0)
    return torch.cat([p.grad.flatten() for p in model.parameters()]), stats


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean"])
def test_skipping_zero_advantage_samples_keeps_the_gradient(tiny_model_dir, aggregation):
    samples = _samples([1.0, 0.0, -1.0, 0.0, 0.0, 0.5])
    full, full_stats = _gradient(tiny_model_dir, samples, False, aggregation)
    skipped, stats = _gradient(tiny_model_dir, samples, True, aggregation)
    assert stats["skipped_samples"] == 3 and "skipped_samples" not in full_stats
    assert stats["tokens"] == full_stats["tokens"] == 48  # every generated token, trained or skipped
    assert full.abs().sum() > 0
    torch.testing.assert_close(skipped, full, rtol=1e-4, atol=1e-8)
    assert stats["loss"] == pytest.approx(full_stats["loss"], rel=1e-5, abs=1e-9)


def test_an_all_zero_batch_steps_the_optimizer_as_running_it_would(tiny_model_dir):
    """AdamW moves weights on a zero gradient (its moments and weight decay): the skipped update must too."""
    first, flat = _samples([1.0, -1.0, 0.5, -0.5]), _samples([0.0] * 4, seed=1)
    weights = []
    for skip in (False, True):
        model = _model(tiny_model_dir)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
        settings = _settings(skip)
        policy_update(model, opt, first, settings, pad_id=0)
        stats = policy_update(model, opt, flat, settings, pad_id=0)
        weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
        if skip:
            assert stats["skipped_samples"] == 4 and stats["tokens"] == 32 and stats["loss"] == 0.0
            assert all(math.isnan(stats[k]) for k in ("entropy", "kl", "clip_fraction"))
        else:
            assert math.isfinite(stats["entropy"]) and stats["entropy"] > 0
    torch.testing.assert_close(weights[1], weights[0], rtol=1e-5, atol=1e-7)


def test_nothing_is_skipped_when_the_loss_has_a_kl_or_entropy_term():
    samples = _samples([0.0, 1.0, 0.0])
    assert [s.rollout for s in trained_samples(samples, LossConfig())] == [1]
    for loss in (LossConfig(beta=0.1), LossConfig(entropy_coef=0.01), LossConfig(skip_zero_advantage=False)):
        assert trained_samples(samples, loss) == samples
    nan = _samples([math.nan])  # a broken advantage is trained, so the update's finiteness check stops the run
    assert trained_samples(nan, LossConfig()) == nan
