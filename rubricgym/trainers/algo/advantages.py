"""Advantage estimators: pure functions from rewards to per-rollout (or per-stage, per-step) advantages.

Every formula is in ``docs/algorithms.md`` and is unit-tested against a hand-computed example
(``tests/trainers/test_advantages.py``). Inputs are numpy arrays; a reward of ``nan`` marks a sample whose
verdicts errored: it is excluded from every mean and std and gets advantage 0 (and its loss mask 0 in the
trainer), so a judge failure is never treated as a zero reward.

- ``grpo_advantages``: group-relative advantages ``(r_i - mean_g r) / scale`` where ``scale`` is the group std
  (GRPO, DeepSeekMath), the batch std, or 1 (``none``, Dr. GRPO, arXiv 2503.20783).
- ``rloo_advantages``: leave-one-out baseline ``r_i - mean_{j != i} r_j`` (RLOO, arXiv 2402.14740).
- ``stage_returns`` / ``stage_advantages``: RubricEM's stage-structured GRPO (SS-GRPO, arXiv 2605.10899):
  ``G[i,k] = Σ_{j>=k} Λ[k,j] R[i,j]``, normalised per stage across the group.
- ``step_advantages``: PPR / ReNorm per-step rewards (arXiv 2509.25598) normalised across the group's steps.
- ``spread_to_tokens``: give every token of a segment (a stage, a step) that segment's advantage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

EPS = 1e-6
Scale = Literal["group", "batch", "none"]

PAPER_LAMBDA = np.array([[1.0, 0.4, 0.6, 0.8], [0.0, 1.0, 0.4, 0.8], [0.0, 0.0, 1.0, 0.8], [0.0, 0.0, 0.0, 1.0]])
"""RubricEM's Λ for its four stages (plan, research, review, answer)."""


def _stats(x: np.ndarray) -> tuple[float, float]:
    """Mean and population std over the finite entries (0, 0 when there are none)."""
    finite = x[np.isfinite(x)]
    if finite.size == 0:
        return 0.0, 0.0
    return float(finite.mean()), float(finite.std())


def grpo_advantages(
    rewards: Sequence[Sequence[float]] | np.ndarray, scale: Scale = "group", eps: float = EPS
) -> np.ndarray:
    """Group-relative advantages for ``rewards`` of shape (groups, G); ``nan`` rewards get 0.

    ``scale="group"``: divide by each group's std + eps (GRPO); ``"batch"``: by the std of all rewards in the
    batch + eps (more robust when groups are nearly constant); ``"none"``: no division (Dr. GRPO, which
    removes the std's bias towards easy and hard prompts). Stds are population stds (ddof 0).
    """
    r = np.asarray(rewards, dtype=float)
    if r.ndim != 2:
        raise ValueError(f"rewards must be 2-D (groups, group_size), got shape {r.shape}")
    if scale not in ("group", "batch", "none"):
        raise ValueError(f"scale must be 'group', 'batch' or 'none', got {scale!r}")
    out = np.zeros_like(r)
    _, batch_std = _stats(r)
    for g in range(r.shape[0]):
        mean, std = _stats(r[g])
        denom = {"group": std + eps, "batch": batch_std + eps, "none": 1.0}[scale]
        out[g] = (r[g] - mean) / denom
    out[~np.isfinite(r)] = 0.0
    return out


def rloo_advantages(rewards: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """REINFORCE leave-one-out: ``A_i = r_i - mean_{j != i} r_j`` within each group; ``nan`` rewards get 0.

    A group with fewer than two valid rewards has no baseline: its advantages are 0.
    """
    r = np.asarray(rewards, dtype=float)
    if r.ndim != 2:
        raise ValueError(f"rewards must be 2-D (groups, group_size), got shape {r.shape}")
    out = np.zeros_like(r)
    for g in range(r.shape[0]):
        ok = np.isfinite(r[g])
        n = int(ok.sum())
        if n < 2:
            continue
        total = r[g][ok].sum()
        out[g][ok] = r[g][ok] - (total - r[g][ok]) / (n - 1)
    return out


def default_lambda(k: int) -> np.ndarray:
    """RubricEM's Λ generalised to ``k`` stages (it equals the paper's matrix for k = 4).

    Row k: 1 on the diagonal, 0.8 on the final (answer) stage, and 0.4, 0.6, ... (capped at 0.8) on the stages
    in between, in order: later stages' scores flow back to earlier ones, the answer's most.
    """
    if k < 1:
        raise ValueError(f"need at least one stage, got {k}")
    lam = np.zeros((k, k))
    for row in range(k):
        lam[row, row] = 1.0
        for col in range(row + 1, k):
            lam[row, col] = 0.8 if col == k - 1 else min(0.8, 0.4 + 0.2 * (col - row - 1))
    return lam


def stage_returns(stage_scores: np.ndarray, lam: np.ndarray | None = None) -> np.ndarray:
    """SS-GRPO stage returns ``G[i,k] = Σ_{j>=k} Λ[k,j] R[i,j]`` for ``stage_scores`` R of shape (N, K).

    ``Λ`` must be upper triangular (a stage's return never includes earlier stages). A ``nan`` stage score
    (stage not judged) contributes nothing to the stage returns it feeds, and its own return is ``nan``.
    """
    r = np.asarray(stage_scores, dtype=float)
    if r.ndim != 2:
        raise ValueError(f"stage scores must be 2-D (rollouts, stages), got shape {r.shape}")
    k = r.shape[1]
    lam = default_lambda(k) if lam is None else np.asarray(lam, dtype=float)
    if lam.shape != (k, k):
        raise ValueError(f"Λ must be {k}x{k} for {k} stages, got {lam.shape}")
    if np.any(np.tril(lam, -1) != 0):
        raise ValueError("Λ must be upper triangular: a stage's return only sums the stages from it onwards")
    g = np.nan_to_num(r, nan=0.0) @ lam.T
    g[~np.isfinite(r)] = np.nan
    return g


def stage_advantages(stage_scores: np.ndarray, lam: np.ndarray | None = None, eps: float = EPS) -> np.ndarray:
    """SS-GRPO advantages ``A[i,k] = (G[i,k] - mean_i G[·,k]) / (std_i G[·,k] + eps)`` for one group.

    ``stage_scores`` has shape (N rollouts, K stages). Every token of stage block k of rollout i gets
    ``A[i,k]`` (see ``spread_to_tokens``). Stages a rollout never reached (``nan``) get 0.
    """
    g = stage_returns(stage_scores, lam)
    out = np.zeros_like(g)
    for k in range(g.shape[1]):
        mean, std = _stats(g[:, k])
        out[:, k] = (g[:, k] - mean) / (std + eps)
    out[~np.isfinite(g)] = 0.0
    return out


def step_advantages(
    step_rewards: Sequence[Sequence[float]], scale: Scale = "group", eps: float = EPS
) -> list[list[float]]:
    """Per-step advantages for one group from per-step rewards (e.g. ReNorm's ``r_t``), ragged per rollout.

    Steps of all rollouts in the group are pooled for the baseline: ``A_{i,t} = (r_{i,t} - mean) / scale``
    (``group`` std, or ``none``; ``batch`` equals ``group`` here since one group is given). ReNorm's rewards
    are already centred at 0 by construction, but the group baseline still removes a common offset.
    """
    flat = np.array([x for row in step_rewards for x in row], dtype=float)
    mean, std = _stats(flat)
    denom = 1.0 if scale == "none" else std + eps
    return [[0.0 if not np.isfinite(x) else (x - mean) / denom for x in row] for row in step_rewards]


def spread_to_tokens(segment_ids: np.ndarray, values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Per-token values: token t gets ``values[segment_ids[t]]``; a segment id < 0 (prompt, env text) gets 0.

    ``segment_ids`` labels each token with its stage (SS-GRPO) or step (ReNorm) index.
    """
    seg = np.asarray(segment_ids, dtype=int)
    vals = np.asarray(values, dtype=float)
    if seg.size and seg.max(initial=-1) >= len(vals):
        raise ValueError(f"segment id {int(seg.max())} has no value (got {len(vals)} values)")
    out = np.zeros(seg.shape, dtype=float)
    inside = seg >= 0
    out[inside] = vals[seg[inside]]
    return out
