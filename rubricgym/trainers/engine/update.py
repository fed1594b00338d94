"""One policy update: token log-probs of the generated tokens (``algo/logprobs.py``, through the FSDP2 root when
sharded: ``logprobs_of``), the PPO-clip loss, backward, clip, AdamW step.

Micro-batches and data-parallel ranks normalise by the *whole* batch's token (or sequence) count, and ranks sum
their gradients with ``all_reduce``, so gradient accumulation and ``torch.distributed`` training give the
same gradient as one process on the full batch.

Off-policy samples: each sample carries the sampler's per-token log-probs (``Sample.sampled_logprobs``, NaN
where unknown). ``off_policy="tis"`` (default) takes the PPO ratio against the learner's log-probs at the start of
the update (pi_old, the detached first-epoch forward: no extra pass) and weights each token by the truncated
importance weight ``min(pi_old / mu, tis_cap)``; ``"sampler"`` takes the ratio directly against the sampler's
log-probs (classic PPO with the sampler as behaviour policy); ``"none"`` ignores the sampler. The mismatch
``KL(mu || pi_old)`` is logged in every mode. With ``ppo_epochs > 1`` pi_old is stored at the first epoch.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from rubricgym.trainers.algo.corrections import corrections
from rubricgym.trainers.algo.logprobs import generated_logprobs
from rubricgym.trainers.algo.loss import ppo_clip_loss
from rubricgym.trainers.algo.samples import Sample
from rubricgym.trainers.config import LossConfig, OptimConfig, TrainConfig
from rubricgym.trainers.engine.batching import lockstep_batches
from rubricgym.trainers.engine.distributed import any_rank
from rubricgym.trainers.engine.lora import reference
from rubricgym.trainers.engine.sharding import LOGPROBS_METHOD, grad_norm_and_clip, is_sharded


@dataclass(frozen=True)
class UpdateSettings:
    """What one update reads: the run's ``loss`` and ``optim`` config sections themselves (not copies of their
    fields), the temperature the sampler's log-probs were taken at, and whether to run under bf16 autocast."""

    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    temperature: float = 1.0
    bf16_autocast: bool = False
    guidance_cap: float = 1.0
    """Truncation of guided samples' importance weights (``GuidanceConfig.cap``)."""

    @classmethod
    def of(cls, cfg: TrainConfig) -> UpdateSettings:
        """The settings of a run (greedy sampling trains at temperature 1)."""
        t = cfg.generation.temperature
        cap = cfg.guidance.cap if cfg.guidance is not None else 1.0
        return cls(cfg.loss, cfg.optim, t if t > 0 else 1.0, cfg.model.bf16_autocast, cap)


LogProbs = Callable[..., tuple[torch.Tensor, torch.Tensor | None]]


def logprobs_of(model: torch.nn.Module) -> LogProbs:
    """``generated_logprobs`` bound to ``model``: through the FSDP2 root's registered forward method when the
    model is sharded (``trainers/engine/sharding.py``), so the root's parameters are gathered for it."""
    method = getattr(model, LOGPROBS_METHOD, None)
    if method is not None:
        return method
    return lambda *args, **kwargs: generated_logprobs(model, *args, **kwargs)


def _all_reduce(value: float) -> float:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        t = torch.tensor([value], dtype=torch.float64)
        torch.distributed.all_reduce(t)
        return float(t.item())
    return value


_COUNTED = {
    "token-mean": lambda s: s.n_generated,  # generated tokens
    "seq-mean": lambda s: int(s.n_generated > 0),  # sequences with generated tokens
}


def trained_samples(samples: Sequence[Sample], loss: LossConfig) -> list[Sample]:
    """The samples the update runs (``loss.skip_zero_advantage``): with no KL or entropy term, a sample whose
    generated tokens all have advantage 0 has a loss of exactly 0 (PPO-clip is ``-A`` times the ratio) and no
    gradient, so only the others run. The normalizer still counts every sample, so the gradient is unchanged."""
    if not loss.skip_zero_advantage or loss.beta > 0 or loss.entropy_coef:
        return list(samples)
    return [s for s in samples if any(a != 0 for a, m in zip(s.advantages, s.loss_mask, strict=True) if m)]


def normalizer(samples: Sequence[Sample], aggregation: str) -> float:
    """The whole batch's denominator across ranks: generated tokens, or sequences with generated tokens."""
    return _all_reduce(float(sum(_COUNTED[aggregation](s) for s in samples)))


def compute_gradients(
    model: torch.nn.Module,
    samples: Sequence[Sample],
    settings: UpdateSettings,
    *,
    pad_id: int,
    old_logprobs: dict[int, torch.Tensor] | None = None,
    ref_model: torch.nn.Module | None = None,
) -> dict[str, float]:
    """Accumulate the loss's gradient over ``samples`` into ``model``'s ``.grad`` (no optimizer step).

    ``old_logprobs`` maps ``id(sample)`` to the learner's log-probs at the start of the update (pi_old); a sample
    missing from it uses the current policy's detached log-probs (exactly pi_old at the first epoch), which are
    then stored in it so that later epochs reuse them.
    """
    lo = settings.loss
    norm = normalizer(samples, lo.aggregation)
    trained = trained_samples(samples, lo)
    keys = (
        "loss",
        "policy_loss",
        "kl",
        "entropy",
        "clip_fraction",
        "tokens",
        "mismatch_kl",
        "is_weight_mean",
        "is_truncated",
        "guided_tokens",
        "guided_weight_mean",
        "guided_truncated",
    )
    totals = dict.fromkeys(keys, 0.0)
    guided_min = math.inf
    known = 0
    device = next(model.parameters()).device
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if settings.bf16_autocast else contextlib.nullcontext()
    forward = logprobs_of(model)
    for chunk, b, filler in lockstep_batches(model, trained, settings.optim.micro_batch, pad_id):
        with autocast:
            logp, entropy = forward(
                b.input_ids,
                b.attention_mask,
                b.loss_mask,
                settings.temperature,
                with_entropy=True,
                entropy_grad=bool(lo.entropy_coef),
            )
            ref = None
            if ref_model is not None:  # a LoRA run's reference is its own network with the adapters off
                with torch.no_grad(), reference(ref_model) as ref_net:
                    ref, _ = logprobs_of(ref_net)(b.input_ids, b.attention_mask, b.loss_mask, settings.temperature)
        if filler:  # a sharded rank's extra micro-batch: the collectives run, the gradient gets zero
            (logp.sum() * 0.0).backward()
            continue
        width = logp.shape[1]
        if old_logprobs is not None and all(id(s) in old_logprobs for s in chunk):
            old = torch.stack([torch.nn.functional.pad(old_logprobs[id(s)], (0, width - len(s))) for s in chunk])
        else:
            old = logp.detach()
            if old_logprobs is not None:
                old_logprobs.update({id(s): old[i, : len(s)].clone() for i, s in enumerate(chunk)})
        old, weights, n_known, low = corrections(b, old, settings.loss, settings.guidance_cap, totals)
        known += n_known
        guided_min = min(guided_min, low)
        if entropy is not None and not lo.entropy_coef:
            entropy = entropy.detach()
        loss, stats = ppo_clip_loss(
            logp,
            old,
            b.advantages,
            b.loss_mask,
            ref_logp=ref,
            beta=lo.beta,
            entropy=entropy,
            entropy_coef=lo.entropy_coef,
            clip_low=lo.clip_low,
            clip_high=lo.clip_high,
            aggregation=lo.aggregation,
            normalizer=norm,
            is_weights=weights,
        )
        loss.backward()
        for k in ("loss", "policy_loss", "kl", "entropy"):
            totals[k] += getattr(stats, k)
        for k in ("clip_fraction", "is_weight_mean"):
            totals[k] += getattr(stats, k) * stats.tokens
        totals["tokens"] += stats.tokens
    means = _means(totals, known, guided_min)
    if lo.skip_zero_advantage:  # the skipped samples' tokens count as covered (their loss and gradient are 0)
        if len(trained) < len(samples) and not means["tokens"]:
            _zero_gradients(model)
            means.update(entropy=math.nan, kl=math.nan, clip_fraction=math.nan)
        means["skipped_samples"] = len(samples) - len(trained)
        means["tokens"] += sum(s.n_generated for s in samples) - sum(s.n_generated for s in trained)
    return means


def _zero_gradients(model: torch.nn.Module) -> None:
    """Zero gradients where none were computed because every sample was skipped: the optimizer then steps as it
    would on the samples' all-zero gradient (AdamW's moments and weight decay move; it skips a ``None`` gradient),
    and every data-parallel rank holds the same gradients to sum."""
    for p in model.parameters():
        if p.requires_grad and p.grad is None:
            p.grad = torch.zeros_like(p)


def _means(totals: dict[str, float], known: int, guided_min: float) -> dict[str, float]:
    """Token sums to means (guided statistics only when there were guided tokens)."""
    if totals["tokens"]:
        for k in ("clip_fraction", "is_weight_mean", "is_truncated"):
            totals[k] /= totals["tokens"]
    else:
        totals["is_weight_mean"] = 1.0
    if totals["guided_tokens"]:
        for k in ("guided_weight_mean", "guided_truncated"):
            totals[k] /= totals["guided_tokens"]
        totals["guided_weight_min"] = guided_min
    else:
        for k in ("guided_tokens", "guided_weight_mean", "guided_truncated"):
            del totals[k]
    totals["mismatch_kl"] = totals["mismatch_kl"] / known if known else 0.0
    return totals


def sync_gradients(model: torch.nn.Module) -> None:
    """Sum gradients across ``torch.distributed`` ranks (each rank's loss is already globally normalised). A
    sharded model's were reduce-scattered (summed) by FSDP2 in its backward already."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()) or is_sharded(model):
        return
    for p in model.parameters():
        if p.grad is not None:
            torch.distributed.all_reduce(p.grad)


def _local(t: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a DTensor, else the tensor."""
    to_local = getattr(t, "to_local", None)
    return to_local() if to_local is not None else t


class NonFiniteUpdate(FloatingPointError):
    """The loss, a gradient or the updated weights stopped being finite: the run must stop, not save them."""


def _check_finite(stats: dict[str, float], norm: float) -> None:
    if not math.isfinite(stats.get("loss", 0.0)):
        raise NonFiniteUpdate(f"the loss is {stats['loss']} (before the optimizer step; the weights are untouched)")
    if not math.isfinite(norm):
        raise NonFiniteUpdate(f"the gradient norm is {norm} (before the optimizer step; the weights are untouched)")


def _check_weights(model: torch.nn.Module) -> None:
    # one sum per tensor first (a NaN or inf anywhere makes it non-finite); the per-element scan names the tensor
    sums = [_local(p).sum() for p in model.parameters()]
    fine = not sums or bool(torch.isfinite(torch.stack(sums)).all())
    bad = [] if fine else [n for n, p in model.named_parameters() if not bool(torch.isfinite(_local(p)).all())]
    if is_sharded(model) and any_rank(bool(bad)) and not bad:
        bad = ["a shard on another rank"]  # every rank stops together
    if bad:
        raise NonFiniteUpdate(
            f"the optimizer step made {len(bad)} weight tensor(s) non-finite (first: {bad[0]}); lower optim.lr"
        )


def policy_update(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    samples: Sequence[Sample],
    settings: UpdateSettings,
    *,
    pad_id: int,
    ref_model: torch.nn.Module | None = None,
) -> dict[str, float]:
    """``ppo_epochs`` optimizer steps on ``samples``; returns the last epoch's loss statistics.

    pi_old is the first epoch's detached forward, kept for the later epochs (no separate no-grad pass). A loss or
    gradient that is not finite stops before the optimizer step, weights it made non-finite right after it
    (``NonFiniteUpdate``): the caller never saves them, so the last checkpoint stays the last good state.
    """
    model.train()
    old: dict[int, torch.Tensor] | None = {} if settings.loss.ppo_epochs > 1 else None
    stats: dict[str, float] = {}
    for _ in range(settings.loss.ppo_epochs):
        optimizer.zero_grad(set_to_none=True)
        stats = compute_gradients(model, samples, settings, pad_id=pad_id, old_logprobs=old, ref_model=ref_model)
        sync_gradients(model)
        max_norm = settings.optim.max_grad_norm
        norm = grad_norm_and_clip([p for p in model.parameters() if p.grad is not None], max_norm)
        if max_norm is not None:
            stats["grad_norm"] = norm
        _check_finite(stats, norm)
        optimizer.step()
        _check_weights(model)
    optimizer.zero_grad(set_to_none=True)
    model.eval()
    return stats


@torch.no_grad()
def turn_entropies(
    model: torch.nn.Module, samples: Sequence[Sample], settings: UpdateSettings, *, pad_id: int
) -> dict[tuple[int, int], float]:
    """The mean token entropy of each (rollout, turn) over its trained tokens, from one no-grad forward."""
    sums: dict[tuple[int, int], list[float]] = {}
    device = next(model.parameters()).device
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if settings.bf16_autocast else contextlib.nullcontext()
    was_training = model.training
    model.eval()
    forward = logprobs_of(model)
    try:
        for chunk, b, filler in lockstep_batches(model, samples, settings.optim.micro_batch, pad_id):
            with autocast:
                _, ent = forward(b.input_ids, b.attention_mask, b.loss_mask, settings.temperature, with_entropy=True)
            assert ent is not None
            if filler:
                continue
            for i, s in enumerate(chunk):
                row = ent[i, : len(s)].float().cpu().numpy()
                steps = np.asarray(s.step_ids)
                mask = np.asarray(s.loss_mask) > 0
                for t in np.unique(steps[mask]):
                    on = mask & (steps == t)
                    acc = sums.setdefault((s.rollout, int(t)), [0.0, 0.0])
                    acc[0] += float(row[on].sum())
                    acc[1] += float(on.sum())
    finally:
        model.train(was_training)
    return {k: total / n for k, (total, n) in sums.items() if n}
