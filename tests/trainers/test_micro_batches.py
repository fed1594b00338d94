"""Micro-batches cut by padding cost: a group whose lengths differ widely trains in several micro-batches, each
padded to its own longest sample, and the gradient is the one a single padded micro-batch gives."""

from __future__ import annotations

import pytest
import torch

from rubricgym.trainers.algo.samples import Sample
from rubricgym.trainers.engine import batching
from rubricgym.trainers.engine.batching import micro_batches


def _of_lengths(lengths: list[int]) -> list[Sample]:
    out = []
    for i, n in enumerate(lengths):
        s = Sample(i)
        s.extend(list(range(5, 5 + n)), True, 0, 0)
        out.append(s)
    return out


def _padded(chunks: list[list[Sample]]) -> int:
    return sum(len(c) * max(len(s) for s in c) for c in chunks)


# the completion lengths (prompt included) of one group of 8 in bench/trainer_vs_trl.py
GROUP = [49, 62, 65, 66, 71, 82, 121, 230]


def test_without_a_cost_micro_batches_are_runs_of_the_size_in_length_order():
    samples = _of_lengths([30, 10, 20, 50, 40])
    chunks = micro_batches(samples, 2)
    assert [[len(s) for s in c] for c in chunks] == [[10, 20], [30, 40], [50]]


def test_a_long_outlier_trains_alone_instead_of_padding_the_group_to_its_length():
    samples = _of_lengths(GROUP)
    chunks = micro_batches(samples, 8, cost_tokens=64)
    assert sorted(id(s) for c in chunks for s in c) == sorted(id(s) for s in samples)  # each sample once
    assert [len(s) for c in chunks for s in c] == sorted(GROUP)
    assert chunks[-1] == [max(samples, key=len)]
    assert _padded(chunks) + 64 * len(chunks) < _padded([samples]) + 64
    assert _padded(chunks) < 0.6 * _padded([samples])  # 1840 padded tokens in one micro-batch


@pytest.mark.parametrize("cost", [0, 64, 10_000])
def test_cuts_never_exceed_the_size_and_cost_no_more_than_runs_of_it(cost):
    lengths = [int(x) for x in torch.randint(5, 300, (23,), generator=torch.Generator().manual_seed(cost))]
    samples = _of_lengths(lengths)
    chunks = micro_batches(samples, 4, cost_tokens=cost)
    assert all(1 <= len(c) <= 4 for c in chunks)
    assert [len(s) for c in chunks for s in c] == sorted(lengths)
    runs = micro_batches(samples, 4)
    assert _padded(chunks) + cost * len(chunks) <= _padded(runs) + cost * len(runs)
    if cost == 0:  # padding is all that counts: no micro-batch pads at all
        assert all(len({len(s) for s in c}) == 1 for c in chunks)


def test_equal_lengths_stay_in_one_micro_batch():
    chunks = micro_batches(_of_lengths([100] * 8), 8, cost_tokens=64)
    assert len(chunks) == 1


def test_the_gradient_is_the_one_of_a_single_padded_micro_batch(tiny_model_dir, monkeypatch):
    from transformers import AutoModelForCausalLM

    from rubricgym.trainers.config import OptimConfig
    from rubricgym.trainers.engine.update import UpdateSettings, compute_gradients

    g = torch.Generator().manual_seed(0)
    samples = []
    for i, n in enumerate([12, 14, 15, 16, 60]):
        ids = torch.randint(5, 1000, (n,), generator=g).tolist()
        s = Sample(i)
        s.extend(ids[:6], False, 0, 0)
        s.extend(ids[6:], True, 0, 0, [0.0] * (n - 6))
        s.advantages = [0.0] * 6 + [1.0 if i % 2 else -1.0] * (n - 6)
        samples.append(s)
    settings = UpdateSettings(optim=OptimConfig(micro_batch=8))
    assert len(micro_batches(samples, 8, batching.MICRO_BATCH_COST_TOKENS["cpu"])) > 1  # the CPU default cuts it

    def grads(cost: int) -> tuple[torch.Tensor, dict[str, float]]:
        monkeypatch.setitem(batching.MICRO_BATCH_COST_TOKENS, "cpu", cost)
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
        stats = compute_gradients(model, samples, settings, pad_id=0)
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]), stats

    cut, cut_stats = grads(batching.MICRO_BATCH_COST_TOKENS["cpu"])
    whole, whole_stats = grads(10**9)  # one micro-batch, padded to 60
    assert cut.abs().sum() > 0
    torch.testing.assert_close(cut, whole, rtol=1e-4, atol=1e-7)
    assert cut_stats["tokens"] == whole_stats["tokens"] == sum(s.n_generated for s in samples)
    assert cut_stats["loss"] == pytest.approx(whole_stats["loss"], rel=1e-5)
