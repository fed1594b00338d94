"""Token-level PPO-clip policy loss with asymmetric clipping, k3 KL to a reference, entropy bonus.

Pure functions on tensors of shape (batch, tokens); ``mask`` is 1 on tokens the policy generated and 0 on
prompt, env/tool text, padding and on every token of a sample whose verdicts errored (masked, never scored 0).

- Clipped surrogate (PPO, arXiv 1707.06347) with DAPO's asymmetric "clip-higher" range
  ``[1 - eps_low, 1 + eps_high]`` = [0.8, 1.28] by default (arXiv 2503.14476, used by ArenaRL).
- KL to a frozen reference with Schulman's k3 estimator ``exp(ref - logp) - (ref - logp) - 1`` (unbiased,
  always >= 0; GRPO, arXiv 2402.03300); ``beta = 0`` needs no reference model.
- Off-policy correction (samples drawn by another engine, e.g. vLLM in bf16, or by a stale policy): truncated
  importance sampling (TIS, Yao et al. 2025 "Your efficient RL framework secretly brings you off-policy RL
  training"): each token's loss is weighted by ``min(pi_old / mu, cap)``, detached, where ``mu`` is the sampler's
  recorded probability and ``pi_old`` the learner's at the start of the update. The mismatch ``KL(mu || pi_old)``
  is estimated on the sampled tokens with k3 and logged.
- Aggregation: ``token-mean`` (every generated token weighs the same, DAPO) or ``seq-mean`` (mean per
  sequence, then over sequences, the original GRPO).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

Aggregation = Literal["token-mean", "seq-mean"]


@dataclass
class LossStats:
    """Diagnostics of one loss evaluation (means over unmasked tokens)."""

    loss: float
    policy_loss: float
    kl: float
    entropy: float
    clip_fraction: float
    ratio_mean: float
    tokens: int
    mismatch_kl: float = 0.0
    is_weight_mean: float = 1.0
    is_truncated: float = 0.0


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference): ``exp(ref - logp) - (ref - logp) - 1``."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


def importance_weights(
    old_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor, cap: float | None
) -> torch.Tensor:
    """Detached per-token truncated importance weights ``min(exp(old_logp - sampler_logp), cap)``.

    Tokens whose sampler log-prob is unknown (NaN: a greedy turn, or an engine that returned none) and tokens off
    ``mask`` get weight 1; ``cap=None`` leaves the weights untruncated (plain importance sampling).
    """
    with torch.no_grad():
        known = torch.isfinite(sampler_logp) & (mask > 0)
        w = torch.exp(old_logp - torch.where(known, sampler_logp, old_logp))
        if cap is not None:
            w = w.clamp(max=cap)
        return torch.where(known, w, torch.ones_like(w))


def guided_weights(old_logp: torch.Tensor, sampler_logp: torch.Tensor, cap: float) -> torch.Tensor:
    """Detached weights of a guided sample's tokens: ``min(exp(old_logp - sampler_logp), cap)`` with ``old_logp``
    the learner's log-prob under the plain prompt and ``sampler_logp`` the hinted sampler's. A token whose
    sampler log-prob is unknown gets 0: it cannot be corrected, so it is not trained on."""
    with torch.no_grad():
        known = torch.isfinite(sampler_logp)
        w = torch.exp(old_logp - torch.where(known, sampler_logp, old_logp)).clamp(max=cap)
        return torch.where(known, w, torch.zeros_like(w))


def mismatch_kl(old_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor) -> tuple[float, int]:
    """k3 estimate of ``KL(sampler || learner)`` from the sampled tokens (summed) and the count of known tokens."""
    with torch.no_grad():
        known = torch.isfinite(sampler_logp) & (mask > 0)
        kl = k3_kl(sampler_logp.where(known, old_logp), old_logp)  # d = old - sampler: x ~ sampler
        return float((kl * known).sum()), int(known.sum())


def _token_mean(values: torch.Tensor, mask: torch.Tensor, normalizer: float | None) -> torch.Tensor:
    denom = mask.sum().clamp(min=1.0) if normalizer is None else max(normalizer, 1.0)
    return (values * mask).sum() / denom


def _seq_mean(values: torch.Tensor, mask: torch.Tensor, normalizer: float | None) -> torch.Tensor:
    per_seq = (values * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    has = (mask.sum(-1) > 0).to(values.dtype)
    denom = has.sum().clamp(min=1.0) if normalizer is None else max(normalizer, 1.0)
    return (per_seq * has).sum() / denom


AGGREGATIONS: dict[str, Callable[[torch.Tensor, torch.Tensor, float | None], torch.Tensor]] = {
    "token-mean": _token_mean,
    "seq-mean": _seq_mean,
}
"""Per-token values and mask -> the loss: every generated token weighs the same (DAPO), or each sequence (GRPO)."""


def aggregate(
    values: torch.Tensor, mask: torch.Tensor, how: Aggregation = "token-mean", normalizer: float | None = None
) -> torch.Tensor:
    """Reduce per-token ``values`` over the tokens where ``mask`` is 1 (an all-masked batch gives 0).

    ``normalizer`` replaces the denominator (the token count for token-mean, the count of sequences with
    tokens for seq-mean) by the whole batch's, so micro-batches and data-parallel shards sum to exactly the
    full-batch loss and gradient.
    """
    if how not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {', '.join(AGGREGATIONS)}, got {how!r}")
    return AGGREGATIONS[how](values, mask.to(values.dtype), normalizer)


def ppo_clip_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    ref_logp: torch.Tensor | None = None,
    beta: float = 0.0,
    entropy: torch.Tensor | None = None,
    entropy_coef: float = 0.0,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    aggregation: Aggregation = "token-mean",
    normalizer: float | None = None,
    is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, LossStats]:
    """The loss to minimise and its diagnostics.

    Per token: ``w max(-A ρ, -A clip(ρ, 1-clip_low, 1+clip_high)) + beta k3 - entropy_coef H`` with
    ``ρ = exp(logp - old_logp)`` and ``w`` the (detached) ``is_weights`` (1 when None); ``advantages`` is per
    token (a sequence-level advantage broadcast, or a stage/step advantage spread over its tokens).
    ``normalizer``: see ``aggregate``.
    """
    if beta > 0 and ref_logp is None:
        raise ValueError("beta > 0 needs the reference log-probs (ref_logp); set beta=0 to train without KL")
    if entropy_coef and entropy is None:
        raise ValueError("entropy_coef != 0 needs the per-token entropy")
    mask = mask.to(logp.dtype)
    ratio = torch.exp(logp - old_logp)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    per_token = torch.maximum(unclipped, clipped)
    if is_weights is not None:
        per_token = per_token * is_weights.detach()
    policy = aggregate(per_token, mask, aggregation, normalizer)
    loss = policy
    kl_value = torch.zeros((), dtype=logp.dtype)
    if ref_logp is not None:
        kl_value = aggregate(k3_kl(logp, ref_logp), mask, aggregation, normalizer)
        if beta > 0:
            loss = loss + beta * kl_value
    ent_value = torch.zeros((), dtype=logp.dtype)
    if entropy is not None:
        ent_value = aggregate(entropy, mask, aggregation, normalizer)
        if entropy_coef:
            loss = loss - entropy_coef * ent_value
    with torch.no_grad():
        n = mask.sum().clamp(min=1.0)
        clip_frac = (((ratio < 1.0 - clip_low) | (ratio > 1.0 + clip_high)).to(mask.dtype) * mask).sum() / n
        stats = LossStats(
            loss=float(loss),
            policy_loss=float(policy),
            kl=float(kl_value),
            entropy=float(ent_value),
            clip_fraction=float(clip_frac),
            ratio_mean=float((ratio * mask).sum() / n),
            tokens=int(mask.sum()),
        )
        if is_weights is not None:
            stats.is_weight_mean = float((is_weights * mask).sum() / n)
    return loss, stats


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Log-probs of ``targets`` under ``logits / temperature`` (the distribution the sampler drew from).

    ``logits[:, t]`` predicts ``targets[:, t]``. Computed row by row through ``log_softmax`` gathered at the
    target, without materialising a second full-vocabulary tensor per row.
    """
    if temperature != 1.0:
        logits = logits / temperature
    return torch.gather(logits.log_softmax(-1), -1, targets.unsqueeze(-1)).squeeze(-1)


def token_entropy(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Per-token entropy of ``softmax(logits / temperature)``."""
    if temperature != 1.0:
        logits = logits / temperature
    logp = logits.log_softmax(-1)
    return -(logp.exp() * logp).sum(-1)


LOGPROB_CHUNK = 512
"""Rows of the (tokens x vocab) logits alive at once in ``selected_logprobs`` (512 x 49k fp32 = 100 MB)."""


class _SelectedLogprobs(torch.autograd.Function):
    """log softmax(h W^T / T)[target] in row chunks, fp32, recomputing each chunk's logits in backward.

    Saves only ``h``, the targets and one log-sum-exp per row, so no (tokens x vocab) tensor outlives a chunk:
    the naive path keeps the log-softmax for backward and allocates its gradient (3 x tokens x vocab floats).
    The chunk-sized intermediates are computed in place in one reused buffer (and the weight gradient's product in
    a second): every fresh 100 MB tensor costs its page faults, and the values are the ones the out-of-place
    expressions give, bit for bit.
    """

    @staticmethod
    def forward(ctx, h, weight, targets, temperature, with_entropy):
        lses, picked, ents = [], [], []
        w = weight.float()
        buf = None
        for hc, tc in zip(h.split(LOGPROB_CHUNK), targets.split(LOGPROB_CHUNK), strict=True):
            if buf is None:
                buf = h.new_empty((hc.shape[0], w.shape[0]), dtype=torch.float32)
            logits = torch.mm(hc.float(), w.t(), out=buf[: hc.shape[0]])
            if temperature != 1.0:
                logits.div_(temperature)
            lse = logits.logsumexp(-1)
            lses.append(lse)
            picked.append(logits.gather(-1, tc.unsqueeze(-1)).squeeze(-1) - lse)
            if with_entropy:  # H = lse - sum(p * logits)
                p = torch.sub(logits, lse.unsqueeze(-1)).exp_()
                ents.append(lse - p.mul_(logits).sum(-1))
        lse = torch.cat(lses) if lses else h.new_zeros(0, dtype=torch.float32)
        ctx.save_for_backward(h, weight, targets, lse)
        ctx.temperature = temperature
        out = torch.cat(picked) if picked else lse.clone()
        ent = torch.cat(ents) if ents else out.new_zeros(out.shape)
        ctx.mark_non_differentiable(ent)
        return out, ent

    @staticmethod
    def backward(ctx, grad, _grad_ent):
        h, weight, targets, lse = ctx.saved_tensors
        t = ctx.temperature
        w = weight.float()
        grad_h = torch.empty(h.shape, dtype=torch.float32, device=h.device) if ctx.needs_input_grad[0] else None
        grad_w = torch.zeros_like(w) if ctx.needs_input_grad[1] else None
        buf = part = None
        for start in range(0, h.shape[0], LOGPROB_CHUNK):
            sl = slice(start, start + LOGPROB_CHUNK)
            hc, g = h[sl].float(), grad[sl].float()
            if buf is None:
                buf = torch.empty((hc.shape[0], w.shape[0]), dtype=torch.float32, device=h.device)
            logits = torch.mm(hc, w.t(), out=buf[: hc.shape[0]])
            if t != 1.0:
                logits.div_(t)
            # d logp[target] / d logits = onehot(target) - softmax ; then the 1/T of the scaling
            dlogits = logits.sub_(lse[sl].unsqueeze(-1)).exp_().mul_(-g.unsqueeze(-1))
            dlogits.scatter_add_(-1, targets[sl].unsqueeze(-1), g.unsqueeze(-1))
            if t != 1.0:
                dlogits.div_(t)
            if grad_h is not None:
                torch.mm(dlogits, w, out=grad_h[sl])
            if grad_w is not None:
                part = torch.mm(dlogits.t(), hc, out=part if part is not None else torch.empty_like(grad_w))
                grad_w += part
        if grad_h is not None:
            grad_h = grad_h.to(h.dtype)
        if grad_w is not None:
            grad_w = grad_w.to(weight.dtype)
        return grad_h, grad_w, None, None, None


def selected_logprobs(
    h: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs (N,) of ``targets`` under ``softmax(h @ weight.T / temperature)`` computed in fp32 (also under
    bf16 autocast: the LM head and the log-softmax are the precision-sensitive ops), and optionally the logged
    (non-differentiable) entropy of the same distribution, with memory of one row chunk of logits."""
    with torch.autocast(h.device.type, enabled=False):
        out, ent = _SelectedLogprobs.apply(h, weight, targets, float(temperature), bool(with_entropy))
    return out, (ent if with_entropy else None)
