"""Tournament-ranked advantages (ArenaRL, arXiv 2601.06487): rank a group by pairwise comparisons.

Rollout 0 of a group is the *anchor* (generated greedily). The topologies that rank a group live in
``rubricgym.suites.topology`` (shared with the arena, which ranks agents the same way); this module maps rank to
advantage with ``r_i = 1 - rank_i/(N-1)``, ``A_i = (r_i - mean r)/(std r + 1e-6)``.
"""

from __future__ import annotations

import numpy as np

from rubricgym.suites.topology import (  # noqa: F401  (re-exported: the trainer's tournament API)
    TOPOLOGIES,
    Compare,
    MatchResult,
    Topology,
    TournamentResult,
    bracket_order,
    expected_comparisons,
    run_tournament,
)


def rank_advantages(ranks: list[float] | np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """ArenaRL's rank -> advantage: ``r_i = 1 - rank_i/(N-1)``, ``A_i = (r_i - mean r)/(std r + eps)``."""
    rk = np.asarray(ranks, dtype=float)
    n = rk.size
    if n < 2:
        return np.zeros(n)
    r = 1.0 - rk / (n - 1)
    return (r - r.mean()) / (r.std() + eps)
