"""Rubric aggregation: pure functions that turn per-criterion scores into rewards.

Each function implements one formula from ``docs/algorithms.md`` and is unit-tested against a worked example
computed by hand (``tests/rewards/test_aggregate.py``). Inputs are plain numbers, never verdicts: the process
reward model drops failed verdicts (and reports them) before it calls these, so a judge error can never turn
into a zero here. A score of ``None`` is a criterion that does not apply (N/A): it leaves both numerator and
denominator, so an all-N/A rubric totals 0 (doing nothing earns nothing), never a vacuous 1.

- ``rar_explicit``: RaR explicit weighted mean ``r = Σ w_j c_j / Σ w_j`` (Essential 1.0, Important 0.7,
  Optional 0.3, Pitfall 0.9 phrased positively).
- ``rar_implicit``: RaR implicit, one Likert score for the whole rubric mapped to [0, 1].
- ``signed_reward``: signed weights with negative (pitfall) criteria, as in "Reward hacking in rubric-based
  RL":
  ``R = [Σ_{w>0} w g + Σ_{w<0} |w| (1 - g)] / Σ |w|``.
- ``renorm_step_rewards``: PPR / ReNorm hybrid, ``r_t = (r_proc,t - 0.5) + (r_out - 0.5)``.
- ``swe_trace_margin``: SWE-TRACE outcome-gated margin, ``(1-γ) s`` if tests fail, ``γ + (1-γ) s`` if they
  pass.
- ``carr_rubric_reward`` and ``c_grpo_reward``: CaRR's citation-aware chain reward (BFS over supported
  single-hop statements from the answer entity) and its C-GRPO mixing with the outcome reward.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

from rubricgym.core.rubric import LEVEL_WEIGHTS

__all__ = [
    "LEVEL_WEIGHTS",
    "c_grpo_reward",
    "carr_rubric_reward",
    "rar_explicit",
    "rar_implicit",
    "renorm_step_rewards",
    "signed_reward",
    "swe_trace_margin",
    "swe_trace_reward",
    "weighted_mean",
]

Score = float | None
"""A criterion score in [0, 1], or ``None`` when the criterion does not apply (N/A)."""


def _check_lengths(scores: Sequence[Score], weights: Sequence[float]) -> None:
    if len(scores) != len(weights):
        raise ValueError(f"got {len(scores)} scores but {len(weights)} weights: pass one weight per score")


def _applicable(scores: Sequence[Score], weights: Sequence[float]) -> list[tuple[float, float]]:
    """(score, weight) of the criteria that apply, each score checked to lie in [0, 1]."""
    _check_lengths(scores, weights)
    out = []
    for c, w in zip(scores, weights, strict=True):
        if c is not None:
            _check_unit("a criterion score", c)
            out.append((float(c), float(w)))
    return out


def _check_unit(name: str, value: float) -> None:
    if not (0.0 <= value <= 1.0) or math.isnan(value):
        raise ValueError(f"{name} must be in [0, 1], got {value}")


def rar_explicit(scores: Sequence[Score], weights: Sequence[float]) -> float:
    """RaR explicit aggregation ``Σ w_j c_j / Σ w_j`` over the applicable criteria (scores ``c_j`` in [0, 1]).

    Weights must be non-negative (use ``signed_reward`` for negative criteria). N/A criteria (``None``) are in
    neither sum. No applicable criteria, or a total weight of zero, gives 0.0.
    """
    for w in weights:
        if w < 0:
            raise ValueError(f"rar_explicit needs non-negative weights, got {w}; use signed_reward for those")
    pairs = _applicable(scores, weights)
    total = sum(w for _, w in pairs)
    if total == 0:
        return 0.0
    return sum(w * c for c, w in pairs) / total


def rar_implicit(likert: float, low: float = 1.0, high: float = 10.0) -> float:
    """RaR implicit aggregation: one judge's Likert score for the whole rubric, mapped linearly to [0, 1]."""
    if high <= low:
        raise ValueError(f"the Likert scale needs low < high, got {low}..{high}")
    if not low <= likert <= high:
        raise ValueError(f"Likert score {likert} is outside the scale {low}..{high}")
    return (likert - low) / (high - low)


def signed_reward(scores: Sequence[Score], weights: Sequence[float]) -> float:
    """Signed-weight reward ``[Σ_{w>0} w g + Σ_{w<0} |w| (1 - g)] / Σ |w|`` over the applicable criteria.

    A negative weight marks a pitfall phrased negatively ("claims X without a source"): meeting it (g = 1)
    costs its weight. With only positive weights this equals ``rar_explicit``. Scores may be fractional; an
    N/A criterion (``None``, e.g. a pitfall about edits when nothing was edited) is in neither sum.
    """
    pairs = _applicable(scores, weights)
    total = sum(abs(w) for _, w in pairs)
    if total == 0:
        return 0.0
    return sum(w * g if w > 0 else abs(w) * (1.0 - g) for g, w in pairs) / total


def renorm_step_rewards(process: Sequence[Score], outcome: float) -> list[float]:
    """ReNorm per-step rewards ``r_t = (r_proc,t - 0.5) + (r_out - 0.5)``.

    ``process`` are per-step process scores in [0, 1]; ``outcome`` is the episode's outcome in {0, 1} (a
    fraction is accepted). Each r_t lies in [-1, 1]; for a binary outcome its sign agrees with the outcome
    unless the process score pulls the other way by more than 0.5. A step with no applicable criterion
    (``None``) has no process term: ``r_t = r_out - 0.5``.
    """
    _check_unit("the outcome reward", outcome)
    out = []
    for p in process:
        if p is None:
            out.append(outcome - 0.5)
            continue
        _check_unit("a process score", p)
        out.append((p - 0.5) + (outcome - 0.5))
    return out


def swe_trace_margin(s_prm: float, tests_pass: bool, gamma: float = 0.7) -> float:
    """SWE-TRACE outcome-gated margin: ``(1-γ) s_prm`` if tests fail, ``γ + (1-γ) s_prm`` if they pass.

    With γ in (0.5, 1) every passing trajectory outranks every failing one, whatever their process scores.
    """
    _check_unit("s_prm", s_prm)
    if not 0.5 < gamma < 1.0:
        raise ValueError(f"gamma must be in (0.5, 1) so passing always outranks failing, got {gamma}")
    return (gamma if tests_pass else 0.0) + (1.0 - gamma) * s_prm


def swe_trace_reward(scores: Sequence[Score], weights: Sequence[float], tests_pass: bool, gamma: float = 0.7) -> float:
    """SWE-TRACE margin over per-criterion process scores: ``s_prm = Σ w_k q_k / Σ |w_k|`` (signed, over the
    applicable criteria; N/A ones are in neither sum, none applicable gives ``s_prm = 0``), then
    ``swe_trace_margin``."""
    return swe_trace_margin(signed_reward(scores, weights), tests_pass, gamma)


def carr_rubric_reward(
    rubrics: Sequence[Sequence[str]], supported: Sequence[bool | None], answer_entity: str = "E0"
) -> float:
    """CaRR's chain reward: supported statements reachable from the answer entity / applicable statements.

    ``rubrics[i]`` lists the entity ids that single-hop statement i mentions (e.g. ``["E0", "E1"]``);
    ``supported[i]`` is True when all its entities were identified and cited content fully supports it, and
    ``None`` when the statement does not apply (it is dropped from the graph and the denominator).
    Entities are nodes; a supported statement connects all its entities. A BFS from ``answer_entity`` over
    supported statements only finds the reachable ones; unsupported statements never connect anything.
    No applicable statements gives 0.0.
    """
    if len(rubrics) != len(supported):
        raise ValueError(f"got {len(rubrics)} statements but {len(supported)} supported flags")
    kept = [i for i, s in enumerate(supported) if s is not None]
    rubrics, supported = [rubrics[i] for i in kept], [bool(supported[i]) for i in kept]
    if not rubrics:
        return 0.0
    by_entity: dict[str, list[int]] = {}
    for i, entities in enumerate(rubrics):
        if supported[i]:
            for e in entities:
                by_entity.setdefault(e, []).append(i)
    reached_entities = {answer_entity}
    reached_statements: set[int] = set()
    queue = deque([answer_entity])
    while queue:
        entity = queue.popleft()
        for i in by_entity.get(entity, []):
            if i in reached_statements:
                continue
            reached_statements.add(i)
            for other in rubrics[i]:
                if other not in reached_entities:
                    reached_entities.add(other)
                    queue.append(other)
    return len(reached_statements) / len(rubrics)


def c_grpo_reward(outcome: float, rubric: float | None, alpha: float = 0.3) -> float:
    """C-GRPO mixing (as coded by CaRR, α = 0.3): ``R = R_o`` if ``R_o == 0`` else ``(1-α) R_o + α R_rubric``.

    A wrong answer gets nothing however well it is cited, so the rubric only ranks correct answers. A chain
    that does not apply (``None``: no applicable statement) leaves the outcome alone: ``R = R_o``.
    """
    _check_unit("the outcome reward", outcome)
    if rubric is not None:
        _check_unit("the rubric reward", rubric)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if outcome == 0 or rubric is None:
        return outcome
    return (1.0 - alpha) * outcome + alpha * rubric


def weighted_mean(scores: Sequence[Score], weights: Sequence[float], signed: bool = True) -> float | None:
    """The rubric aggregate the process reward model uses for a group of criteria (a step, a stage).

    ``signed_reward`` when ``signed`` (it equals ``rar_explicit`` for non-negative weights), else
    ``rar_explicit``. ``None`` when no criterion applies, so callers can tell "nothing to judge" from 0.
    """
    if all(s is None for s in scores):
        return None
    return signed_reward(scores, weights) if signed else rar_explicit(scores, weights)
