"""AEM: entropy modulation of advantages for multi-turn agents (``loss.entropy_modulation``).

An update on a response changes the policy's entropy in proportion to ``A * (S - H)`` (its advantage times its
surprisal minus the entropy), so rewarded low-entropy responses sharpen the policy and entropy collapses within a
few steps. AEM reweights each agent turn's advantage by its response-level entropy relative to its group:

    H_t  = mean token entropy of turn t (the policy's distribution at the training temperature, no gradient)
    H~_t = (H_t - min_group H) / (max_group H - min_group H)        (min-max within the task's group, every turn
                                                                     of every rollout of the group)
    a_t  = exp(-lam * H~_t) / mean_group exp(-lam * H~)             (mean 1 over the group's turns)
    A    <- a_t * A on the tokens of turn t

and leaves a group alone (``a = 1``) when its turn entropies span less than ``min_range`` nats. The entropies come
from one no-grad forward over the step's samples before the update (``engine.update.turn_entropies``: the
advantages must be fixed before the loss), about a third of the update's forward-and-backward cost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rubricgym.trainers.algo.samples import Sample
from rubricgym.trainers.config import EntropyModulationConfig


def aem_weights(entropies: Sequence[float], lam: float = 1.0, min_range: float = 0.1) -> list[float]:
    """AEM's weights for one group's turn entropies (see the module docstring); NaN entries get weight 1 and are
    left out of the normalisation."""
    h = np.asarray(entropies, dtype=float)
    known = np.isfinite(h)
    out = np.ones_like(h)
    if known.sum() < 2:
        return out.tolist()
    lo, hi = float(h[known].min()), float(h[known].max())
    if hi - lo < min_range:
        return out.tolist()
    e = np.exp(-lam * (h[known] - lo) / (hi - lo))
    out[known] = e / e.mean()
    return out.tolist()


def modulate(
    samples: Sequence[Sample],
    entropies: dict[tuple[int, int], float],
    group_of: Sequence[int],
    cfg: EntropyModulationConfig,
) -> dict[str, float]:
    """Scale each turn's advantages in ``samples`` (in place) by its AEM weight; ``group_of[rollout]`` is the
    rollout's group. Returns the step's ``aem/...`` statistics."""
    by_group: dict[int, list[tuple[int, int]]] = {}
    for key in sorted(entropies):
        by_group.setdefault(group_of[key[0]], []).append(key)
    alpha: dict[tuple[int, int], float] = {}
    modulated = 0
    for keys in by_group.values():
        weights = aem_weights([entropies[k] for k in keys], cfg.lam, cfg.min_range)
        modulated += int(any(w != 1.0 for w in weights))
        alpha.update(zip(keys, weights, strict=True))
    for s in samples:
        if not any(s.loss_mask):
            continue
        s.advantages = [
            a * alpha.get((s.rollout, t), 1.0) if m else a
            for a, t, m in zip(s.advantages, s.step_ids, s.loss_mask, strict=True)
        ]
    values = list(alpha.values())
    ents = list(entropies.values())
    return {
        "aem/turn_entropy": float(np.mean(ents)) if ents else math.nan,
        "aem/alpha_min": min(values) if values else 1.0,
        "aem/alpha_max": max(values) if values else 1.0,
        "aem/groups_modulated": modulated / len(by_group) if by_group else 0.0,
    }
