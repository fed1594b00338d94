"""Micro-batches of an update: which samples train together (``micro_batches``: by length, cut where padding
costs more than another micro-batch) and the batches each rank runs in lockstep (``lockstep_batches``)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import torch

from rubricgym.trainers.algo.samples import Batch, Sample, collate
from rubricgym.trainers.engine.distributed import max_over_ranks
from rubricgym.trainers.engine.sharding import is_sharded

MICRO_BATCH_COST_TOKENS = {"cpu": 64}
"""What running one more micro-batch costs, counted in padded tokens of its forward and backward, by device type
(``micro_batches``). On CPU (the 135M model, 2 threads) a forward and backward took 455 ms for 40 tokens and 948
ms for 160: ~4 ms a token on top of ~290 ms a micro-batch (its backward writes a gradient of every weight, ~650
MB, however few tokens it has), about 70 tokens' worth. Elsewhere a token costs far less than a micro-batch's
kernel launches and gradient writes: ``MICRO_BATCH_COST_DEFAULT``, so a GPU splits a group only around an
outlier many times longer than the rest."""
MICRO_BATCH_COST_DEFAULT = 4096


def micro_batches(samples: Sequence[Sample], size: int, cost_tokens: int | None = None) -> list[list[Sample]]:
    """``samples`` sorted by length (similar lengths together: less padding), in micro-batches of at most ``size``.

    Without ``cost_tokens``: runs of ``size``. With it (what one more micro-batch costs, in padded tokens), the
    cuts that minimise the padded tokens (each micro-batch pads to its longest sample) plus ``cost_tokens`` per
    micro-batch: a group of 8 whose longest completion is twice most of the others' trains that one alone instead
    of padding seven rows to its length. The same samples and loss either way: only the cuts change (and sums
    over micro-batches by float rounding)."""
    ordered = sorted(samples, key=len)
    if cost_tokens is None or len(ordered) <= 1:
        return [ordered[i : i + size] for i in range(0, len(ordered), size)]
    n = len(ordered)
    best, cut = [0.0] + [math.inf] * n, [0] * (n + 1)
    for end in range(1, n + 1):  # best[end]: the cheapest cuts of ordered[:end]; its last micro-batch starts at cut
        width = len(ordered[end - 1])
        for start in range(max(0, end - size), end):  # ascending: on a tie the longer micro-batch wins
            cost = best[start] + (end - start) * width + cost_tokens
            if cost < best[end]:
                best[end], cut[end] = cost, start
    chunks: list[list[Sample]] = []
    end = n
    while end:
        chunks.append(ordered[cut[end] : end])
        end = cut[end]
    return chunks[::-1]


def lockstep_batches(
    model: torch.nn.Module, samples: Sequence[Sample], size: int, pad_id: int
) -> Iterator[tuple[list[Sample], Batch, bool]]:
    """The micro-batches of ``samples`` on ``model``'s device as ``(samples, batch, filler)``. Unsharded, those with a
    generated token. Sharded (every forward and backward a collective), every micro-batch, then ``filler`` ones
    (a two-token batch training its last token) until this rank has run as many as the rank with the most: the
    caller multiplies a filler's loss by zero."""
    device = next(model.parameters()).device
    if not is_sharded(model):
        # cut where padding costs more than a micro-batch (sharded, each micro-batch gathers the weights: by count)
        cost = MICRO_BATCH_COST_TOKENS.get(device.type, MICRO_BATCH_COST_DEFAULT)
        chunks = [c for c in micro_batches(samples, size, cost) if any(s.n_generated for s in c)]
        for chunk in chunks:
            yield chunk, collate(chunk, pad_id).to(device), False
        return
    chunks = micro_batches(samples, size)
    total = max_over_ranks(len(chunks))  # every micro-batch is a collective: all ranks run as many
    for chunk in chunks:
        yield chunk, collate(chunk, pad_id).to(device), not any(s.n_generated for s in chunk)
    for _ in range(total - len(chunks)):
        filler = [_filler(pad_id)]
        yield filler, collate(filler, pad_id).to(device), True


def _filler(pad_id: int) -> Sample:
    s = Sample(rollout=-1)
    s.input_ids = [pad_id, pad_id]
    s.loss_mask, s.step_ids, s.stage_ids = [0, 1], [-1, 0], [-1, 0]
    s.sampled_logprobs, s.advantages = [0.0, 0.0], [0.0, 0.0]
    return s
