"""Which suite entry each training task comes from: fixed weights, or Self-Evolving Curriculum (SEC).

SEC treats the entries as arms of a non-stationary bandit. After a step, an arm's reward is the mean absolute
advantage of the rollouts drawn from it (a proxy for how much the policy can still learn there: 0 when every
rollout of a group scored the same); its value follows TD(0), ``Q(c) <- Q(c) + alpha (r_c - Q(c))``, and the
next step draws entries from the Boltzmann distribution ``p(c) ∝ exp(Q(c) / tau)``. Arms not drawn in a step
keep their value. Draws are seeded by (seed, position in the task stream), so a resumed run that restores Q
draws exactly what the uninterrupted run would have.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field


class CurriculumConfig(BaseModel):
    """``env.curriculum`` of a training config over a suite."""

    model_config = ConfigDict(extra="forbid")

    method: Literal["weights", "sec"] = "weights"
    """``weights``: draw entries by the suite's weights; ``sec``: the learning-progress bandit above."""
    alpha: float = Field(0.5, gt=0.0, le=1.0)
    """SEC's TD(0) step size."""
    temperature: float = Field(0.2, gt=0.0)
    """SEC's Boltzmann temperature tau (mean |advantage| under GRPO scaling lies in [0, ~1])."""


def mean_abs_advantage(advantages: Sequence[float]) -> float | None:
    """SEC's arm reward: the mean |A| of an arm's rollouts (``None`` when it had none with a finite value)."""
    finite = [abs(a) for a in advantages if math.isfinite(a)]
    return sum(finite) / len(finite) if finite else None


class SuiteSampler:
    """Draws suite entries for a step's task slots and learns SEC values from their advantages."""

    def __init__(self, weights: dict[str, float], cfg: CurriculumConfig | None = None, seed: int = 0):
        if not weights:
            raise ValueError("a suite sampler needs at least one entry")
        self.names = list(weights)
        total = sum(weights.values())
        self.weights = np.array([weights[n] / total for n in self.names])
        self.cfg = cfg or CurriculumConfig()
        self.seed = seed
        self.q = {n: 0.0 for n in self.names}

    def probabilities(self) -> dict[str, float]:
        if self.cfg.method == "weights":
            return dict(zip(self.names, self.weights.tolist(), strict=True))
        z = np.array([self.q[n] for n in self.names]) / self.cfg.temperature
        p = np.exp(z - z.max())
        return dict(zip(self.names, (p / p.sum()).tolist(), strict=True))

    def draw(self, position: int, n: int) -> list[str]:
        """Entries for ``n`` task slots starting at stream ``position`` (deterministic given Q)."""
        p = self.probabilities()
        rng = np.random.default_rng([self.seed, position, 7919])
        picks = rng.choice(len(self.names), size=n, p=[p[k] for k in self.names])
        return [self.names[int(k)] for k in picks]

    def update(self, rewards: dict[str, float | None]) -> dict[str, float]:
        """TD(0) on the arms that were drawn (``rewards[c]`` = their mean |advantage|); returns the new Q."""
        for name, r in rewards.items():
            if r is not None and math.isfinite(r):
                self.q[name] += self.cfg.alpha * (r - self.q[name])
        return dict(self.q)

    def state_dict(self) -> dict[str, float]:
        return dict(self.q)

    def load_state_dict(self, q: dict[str, float]) -> None:
        self.q.update({k: float(v) for k, v in q.items() if k in self.q})
