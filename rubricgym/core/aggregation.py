"""Aggregation methods as a table: name -> ``AggregationMethod`` (what it needs of a rubric, how it totals).

Like the trainer's estimators, a method is one entry of ``AGGREGATIONS``: a rubric's ``aggregation.method`` is
validated against it, the process reward model totals with the entry's ``total``, and nothing else lists the
names. The formulas live in ``rewards.aggregate``; ``total`` is a function of ``rewards.methods.RollUp`` (the
roll-ups the process reward model made) given directly or as a ``"module:function"`` string imported on first use
(the env registry's convention), so ``core`` names the built-in methods without importing ``rewards``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rubricgym.core.rubric import Rubric


@dataclass(frozen=True)
class AggregationMethod:
    """One aggregation method.

    ``total``: ``total(roll_up) -> rewards.methods.Total``, or ``"module:function"`` naming it.
    ``check``: what the method needs of a rubric: ``check(rubric)`` returns a message that says what to fix, or
    ``None``; a rubric that fails it does not load.
    ``whole_rubric``: judged as one (RaR implicit: one LLM score for the whole rubric), not criterion by criterion;
    the process reward model then asks a judge with ``judge_rubric`` instead of rolling verdicts up.
    """

    total: str | Callable[[Any], Any]
    check: Callable[[Rubric], str | None] | None = None
    whole_rubric: bool = False

    def total_fn(self) -> Callable[[Any], Any]:
        """The ``total`` function, imported if it was named by a string."""
        if not isinstance(self.total, str):
            return self.total
        module, _, attr = self.total.partition(":")
        fn: Callable[[Any], Any] = getattr(importlib.import_module(module), attr)
        return fn


def _non_negative(rubric: Rubric) -> str | None:
    if any(c.resolved_weight < 0 for c in rubric.criteria):
        return "aggregation 'rar' needs non-negative weights: use method 'signed' for negative ones"
    return None


def _margin(rubric: Rubric) -> str | None:
    gamma = rubric.aggregation.gamma
    return None if 0.5 < gamma < 1.0 else f"swe_trace needs gamma in (0.5, 1), got {gamma}"


def _chain(rubric: Rubric) -> str | None:
    if rubric.aggregation.rubric_check or any(c.entities for c in rubric.criteria):
        return None
    return (
        "aggregation 'carr' needs criteria with 'entities' (the statement's entity ids) "
        "or a 'rubric_check' naming the criterion or check that scores the chain"
    )


_M = "rubricgym.rewards.methods"
AGGREGATIONS: dict[str, AggregationMethod] = {
    "rar": AggregationMethod(f"{_M}:weighted_total", _non_negative),
    "signed": AggregationMethod(f"{_M}:weighted_total"),
    "rar_implicit": AggregationMethod(f"{_M}:weighted_total", whole_rubric=True),
    "renorm": AggregationMethod(f"{_M}:renorm_total"),
    "swe_trace": AggregationMethod(f"{_M}:swe_trace_total", _margin),
    "carr": AggregationMethod(f"{_M}:carr_total", _chain),
}
"""Method name -> ``AggregationMethod``; add an entry to make a new method loadable and scored everywhere."""


def aggregation_method(name: str) -> AggregationMethod:
    """The named method, or a ``ValueError`` listing the known ones."""
    try:
        return AGGREGATIONS[name]
    except KeyError:
        raise ValueError(f"unknown aggregation method {name!r}; use one of {', '.join(AGGREGATIONS)}") from None
