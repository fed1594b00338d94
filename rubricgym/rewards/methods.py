"""The totals of the aggregation methods in ``core.aggregation.AGGREGATIONS``, one function per method.

The process reward model rolls verdicts up (per step, per criterion, the outcome signal) into a ``RollUp``; a
method's ``total`` turns that into the trajectory's ``Total``: the scalar reward, what goes onto each step, and
the errors the method adds (an outcome signal it gates on that failed counts as one: mask, never guess). The
formulas are the pure functions of ``rewards.aggregate``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rubricgym.core.rubric import Rubric
from rubricgym.core.types import Trajectory
from rubricgym.rewards import aggregate as agg
from rubricgym.rewards.verdict import Verdict


@dataclass
class RollUp:
    """What a method totals from: the rubric, the trajectory and the roll-ups of its applicable verdicts."""

    rubric: Rubric
    trajectory: Trajectory
    per_step: list[float | None]
    per_criterion: dict[str, float]
    """Mean score per criterion over its scored verdicts; a method may add entries (CaRR's ``__chain__``)."""
    by_id: dict[str, Verdict]
    """The trajectory-scope verdicts by criterion id (failed and N/A ones included)."""
    signal: float | None
    """The outcome signal in [0, 1] (``aggregation.outcome_check`` or the env's outcome reward)."""
    signal_error: str | None
    failed: int
    """How many verdicts failed."""
    named_score: Callable[[str, bool], tuple[float | None, str | None]]
    """``named_score(name, binary)``: (score, error) of the criterion or env check ``name``."""

    def rubric_total(self, exclude: str | None = None) -> float | None:
        """The weighted aggregate over the criteria (but ``exclude``): 0 when none applied, ``None`` when none
        could be judged (nothing applicable earns nothing; nothing judgeable is unknown)."""
        weight = {c.id: c.resolved_weight for c in self.rubric.criteria}
        ids = [i for i in self.per_criterion if i != exclude]
        if not ids:
            return None if self.failed else 0.0
        return agg.weighted_mean([self.per_criterion[i] for i in ids], [weight[i] for i in ids])


@dataclass
class Total:
    """A method's result: the total (``None``: unknown, mask it), the per-step rewards and added errors."""

    total: float | None
    step_rewards: list[float | None] = field(default_factory=list)
    errors: int = 0


def _gate_error(r: RollUp) -> int:
    return int(r.signal_error is not None)


def weighted_total(r: RollUp) -> Total:
    """RaR explicit / signed weights: the weighted aggregate over the criteria; steps get their roll-up."""
    return Total(r.rubric_total(), list(r.per_step))


def renorm_total(r: RollUp) -> Total:
    """ReNorm: ``r_t = (r_proc,t - 0.5) + (r_out - 0.5)`` on every step; the total is their mean."""
    if r.signal is None:
        return Total(None, [None] * len(r.per_step), _gate_error(r))
    steps: list[float | None] = list(agg.renorm_step_rewards(r.per_step, r.signal))  # None: no process term
    given = [s for s in steps if s is not None]
    total = (sum(given) / len(given) if given else None) if steps else r.signal - 0.5
    return Total(total, steps, _gate_error(r))


def swe_trace_total(r: RollUp) -> Total:
    """SWE-TRACE: the outcome-gated margin over the process score (the outcome criterion left out of it)."""
    a = r.rubric.aggregation
    s_prm = r.rubric_total(exclude=a.outcome_check)
    total = None if r.signal is None or s_prm is None else agg.swe_trace_margin(s_prm, r.signal >= 0.5, a.gamma)
    return Total(total, list(r.per_step), _gate_error(r))


def carr_total(r: RollUp) -> Total:
    """CaRR + C-GRPO: the chain reward (one env check's score, or a BFS over the statements' verdicts) mixed
    with the outcome; a statement nobody could judge leaves the chain unknown (mask, do not guess)."""
    a = r.rubric.aggregation
    errors = _gate_error(r)
    if a.rubric_check:  # the chain scored by one env check
        chain, chain_error = r.named_score(a.rubric_check, False)
        errors += chain_error is not None
        total = None if r.signal is None or chain_error else agg.c_grpo_reward(r.signal, chain, a.alpha)
        return Total(total, list(r.per_step), errors)
    statements = [c for c in r.rubric.criteria if c.entities]
    stated = [r.by_id.get(c.id) for c in statements]
    if r.signal is None or any(v is None or not v.ok for v in stated):
        return Total(None, list(r.per_step), errors)
    supported = [bool(v.met) if v.applicable else None for v in stated if v is not None]
    chain_score = agg.carr_rubric_reward([c.entities or [] for c in statements], supported, a.answer_entity)
    r.per_criterion["__chain__"] = chain_score
    return Total(agg.c_grpo_reward(r.signal, chain_score, a.alpha), list(r.per_step), errors)
