"""The off-policy corrections of one micro-batch of the update (``trainers/engine/update.py``): which log-probs the PPO
ratio is taken against and the per-token importance weights, for ``loss.off_policy`` and for guided rows, with
the sampler/learner mismatch statistics the step logs."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from rubricgym.trainers.algo.loss import guided_weights, importance_weights, mismatch_kl
from rubricgym.trainers.algo.samples import Batch
from rubricgym.trainers.config import LossConfig

OffPolicy = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float | None], tuple[torch.Tensor, torch.Tensor | None]]


def _tis(
    old: torch.Tensor, sampler: torch.Tensor, mask: torch.Tensor, cap: float | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    return old, importance_weights(old, sampler, mask, cap)


def _sampler(
    old: torch.Tensor, sampler: torch.Tensor, mask: torch.Tensor, cap: float | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    return torch.where(torch.isfinite(sampler) & (mask > 0), sampler, old), None


OFF_POLICY: dict[str, OffPolicy] = {
    "tis": _tis,
    "sampler": _sampler,
    "none": lambda old, sampler, mask, cap: (old, None),
}
"""``loss.off_policy`` -> (pi_old, sampler, mask, cap) -> (the ratio's denominator, per-token weights or None)."""


def _guided_rows(
    b: Batch,
    learner_old: torch.Tensor,
    old: torch.Tensor,
    weights: torch.Tensor | None,
    cap: float,
    totals: dict[str, float],
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Guided rows (hinted sampler, plain prompt): the PPO ratio against the learner's pi_old and the truncated
    weight ``min(pi_old / mu, cap)``, whatever ``loss.off_policy`` gives the other rows; adds the guided tokens'
    statistics to ``totals`` and returns the smallest guided weight."""
    gw = guided_weights(learner_old, b.sampled_logprobs, cap)
    old = torch.where(b.guided, learner_old, old)
    weights = torch.where(b.guided, gw, weights if weights is not None else torch.ones_like(gw))
    on = (b.loss_mask > 0) & b.guided
    totals["guided_tokens"] += float(on.sum())
    totals["guided_weight_mean"] += float((gw * on).sum())
    totals["guided_truncated"] += float(((torch.exp(learner_old - b.sampled_logprobs) > cap) & on).sum())
    return old, weights, float(gw[on].min()) if bool(on.any()) else math.inf


def corrections(
    b: Batch, old: torch.Tensor, lo: LossConfig, guidance_cap: float, totals: dict[str, float]
) -> tuple[torch.Tensor, torch.Tensor | None, int, float]:
    """The off-policy corrections of one micro-batch: the PPO ratio's denominator and per-token weights (or None)
    for ``loss.off_policy`` and, on guided rows, ``_guided_rows``; adds the mismatch statistics to ``totals``.
    Returns them with the count of tokens with a known sampler log-prob and the smallest guided weight."""
    sampler = b.sampled_logprobs
    plain_mask = b.loss_mask * ~b.guided  # the sampler/learner mismatch of unguided tokens
    kl_sum, n_known = mismatch_kl(old, sampler, plain_mask)
    totals["mismatch_kl"] += kl_sum
    learner_old = old
    old, weights = OFF_POLICY[lo.off_policy](old, sampler, b.loss_mask, lo.tis_cap)
    if weights is not None and lo.tis_cap is not None:
        raw = importance_weights(old, sampler, plain_mask, None)
        totals["is_truncated"] += float(((raw > lo.tis_cap) & (plain_mask > 0)).sum())
    low = math.inf
    if bool(b.guided.any()):
        old, weights, low = _guided_rows(b, learner_old, old, weights, guidance_cap, totals)
    return old, weights, n_known, low
