"""Ratings from pairwise games: Bradley-Terry MLE with bootstrap CIs over tasks, online Elo, win rates, Kendall tau.

A *game* is one judged comparison of two players on one task: ``(i, j, s, task)`` with ``s`` player i's result
(1 win, 0.5 tie, 0 loss). Bradley-Terry: ``P(i beats j) = sigma(beta_i - beta_j)``, fitted by maximising the
log-likelihood (a tie counts as half a win each way) with a small L2 term for identifiability, by Newton's
method; ratings are reported on the Elo scale ``1000 + 400/ln(10) * beta`` with mean beta 0. Confidence
intervals come from resampling *tasks* with replacement and refitting (the 2.5/97.5 percentiles). Online Elo
depends on game order; it is shown beside Bradley-Terry, never instead (ALGORITHMS.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

ELO_SCALE = 400.0 / math.log(10.0)
BASE = 1000.0


@dataclass(frozen=True)
class Game:
    """One judged comparison: player ``i``'s result ``s`` (1 / 0.5 / 0) against player ``j`` on ``task``."""

    i: int
    j: int
    s: float
    task: str = ""


def _arrays(games: Sequence[Game]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    i = np.array([g.i for g in games], dtype=int)
    j = np.array([g.j for g in games], dtype=int)
    s = np.array([g.s for g in games], dtype=float)
    return i, j, s


def _fit(n: int, i: np.ndarray, j: np.ndarray, s: np.ndarray, w: np.ndarray, l2: float) -> np.ndarray:
    """Newton's method with backtracking on the L2-regularised Bradley-Terry log-likelihood; returns beta."""

    def loglik(beta: np.ndarray) -> float:
        d = beta[i] - beta[j]
        # s log sigma(d) + (1-s) log sigma(-d), computed stably
        return float(np.sum(w * (s * -np.logaddexp(0, -d) + (1 - s) * -np.logaddexp(0, d)))) - 0.5 * l2 * beta @ beta

    beta = np.zeros(n)
    current = loglik(beta)
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(beta[i] - beta[j])))
        r = w * (s - p)
        grad = np.bincount(i, r, n) - np.bincount(j, r, n) - l2 * beta
        c = w * p * (1 - p)
        hess = -l2 * np.eye(n)
        np.add.at(hess, (i, i), -c)
        np.add.at(hess, (j, j), -c)
        np.add.at(hess, (i, j), c)
        np.add.at(hess, (j, i), c)
        step = np.linalg.lstsq(hess, grad, rcond=None)[0]  # l2 = 0 leaves the shift direction singular
        t = 1.0
        while t > 1e-6:
            cand = beta - t * step
            value = loglik(cand)
            if value >= current - 1e-12:
                break
            t /= 2
        beta, gain, current = cand, value - current, value
        if abs(gain) < 1e-10 or np.max(np.abs(t * step)) < 1e-8:
            break
    return beta - beta.mean()


def bradley_terry(
    n: int, games: Sequence[Game], *, weights: Sequence[float] | None = None, l2: float = 1e-2
) -> np.ndarray:
    """Bradley-Terry strengths ``beta`` (mean 0) of ``n`` players from ``games``; players without games get 0."""
    if not games:
        return np.zeros(n)
    i, j, s = _arrays(games)
    w = np.ones(len(games)) if weights is None else np.asarray(weights, dtype=float)
    return _fit(n, i, j, s, w, l2)


def to_elo_scale(beta: np.ndarray) -> np.ndarray:
    """Bradley-Terry strengths on the Elo scale (1000 + 400/ln 10 * beta)."""
    return BASE + ELO_SCALE * np.asarray(beta, dtype=float)


def bootstrap_bt(
    n: int, games: Sequence[Game], *, resamples: int = 300, level: float = 0.95, seed: int = 0, l2: float = 1e-2
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile CI (``lo``, ``hi`` arrays of beta) from refits on tasks resampled with replacement."""
    if not games:
        return np.zeros(n), np.zeros(n)
    tasks = sorted({g.task for g in games})
    index = {t: k for k, t in enumerate(tasks)}
    game_task = np.array([index[g.task] for g in games])
    i, j, s = _arrays(games)
    rng = np.random.default_rng(seed)
    fits = np.empty((resamples, n))
    for b in range(resamples):
        counts = np.bincount(rng.integers(0, len(tasks), len(tasks)), minlength=len(tasks)).astype(float)
        fits[b] = _fit(n, i, j, s, counts[game_task], l2)
    lo, hi = np.quantile(fits, [(1 - level) / 2, 1 - (1 - level) / 2], axis=0)
    return lo, hi


def elo(n: int, games: Sequence[Game], *, k: float = 16.0) -> np.ndarray:
    """Online Elo in game order (start 1000, K-factor ``k``): order-dependent, for comparison with BT."""
    r = np.full(n, BASE)
    for g in games:
        expected = 1.0 / (1.0 + 10 ** ((r[g.j] - r[g.i]) / 400.0))
        r[g.i] += k * (g.s - expected)
        r[g.j] -= k * (g.s - expected)
    return r


def win_matrix(n: int, games: Sequence[Game]) -> tuple[np.ndarray, np.ndarray]:
    """``(rate, count)``: ``rate[a, b]`` is a's score share against b (ties half), ``nan`` where they never met."""
    points = np.zeros((n, n))
    count = np.zeros((n, n), dtype=int)
    for g in games:
        points[g.i, g.j] += g.s
        points[g.j, g.i] += 1 - g.s
        count[g.i, g.j] += 1
        count[g.j, g.i] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(count > 0, points / np.maximum(count, 1), np.nan)
    return rate, count


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's tau-b between two score vectors (higher = better in both)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    dx = np.sign(x[:, None] - x[None, :])
    dy = np.sign(y[:, None] - y[None, :])
    upper = np.triu_indices(len(x), 1)
    dx, dy = dx[upper], dy[upper]
    denom = math.sqrt(float(np.sum(dx != 0)) * float(np.sum(dy != 0)))
    return float(np.sum(dx * dy) / denom) if denom else 0.0
