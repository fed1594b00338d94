"""``PanelJudge``: several judges on one criterion, combined by majority or mean, with agreement statistics.

Agreement is computed over the met/not-met votes of every item the panel judged in which all members answered:
percent agreement (mean pairwise agreement per item, Fleiss' P̄) and Fleiss' kappa (agreement beyond chance).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rubricgym.core.types import Trajectory
from rubricgym.rewards.judges import Judge
from rubricgym.rewards.rubric import Criterion, Rubric
from rubricgym.rewards.verdict import Evidence, Verdict


def item_agreement(counts: Sequence[int]) -> float:
    """Fleiss' P_i: the fraction of rater pairs that agree on one item, from its per-category counts."""
    n = sum(counts)
    if n < 2:
        raise ValueError("agreement needs at least two ratings of the item")
    return sum(c * (c - 1) for c in counts) / (n * (n - 1))


def fleiss_kappa(table: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa of an items x categories table of rating counts (same number of raters per item).

    ``None`` when chance agreement is 1 (every rating in one category), where kappa is undefined.
    """
    if not table:
        return None
    n = sum(table[0])
    if any(sum(row) != n for row in table):
        raise ValueError("every item needs the same number of ratings for Fleiss' kappa")
    n_items, k = len(table), len(table[0])
    p_bar = sum(item_agreement(row) for row in table) / n_items
    p_cat = [sum(row[j] for row in table) / (n_items * n) for j in range(k)]
    p_e = sum(p * p for p in p_cat)
    if p_e >= 1.0:
        return None
    return (p_bar - p_e) / (1.0 - p_e)


@dataclass
class Agreement:
    items: int
    percent_agreement: float | None
    unanimous: float | None
    fleiss_kappa: float | None


def agreement(votes: Sequence[Sequence[bool]]) -> Agreement:
    """Agreement of binary votes (one list of member votes per item; items of unequal size are skipped)."""
    if not votes:
        return Agreement(0, None, None, None)
    size = max(len(v) for v in votes)
    rows = [[sum(v), len(v) - sum(v)] for v in votes if len(v) == size and size >= 2]
    if not rows:
        return Agreement(0, None, None, None)
    return Agreement(
        items=len(rows),
        percent_agreement=sum(item_agreement(r) for r in rows) / len(rows),
        unanimous=sum(1 for r in rows if 0 in r) / len(rows),
        fleiss_kappa=fleiss_kappa(rows),
    )


class PanelJudge:
    """Combine several judges: ``majority`` (met if most members say met; score = fraction saying met) or
    ``mean`` (score = mean member score; met if it is at least 0.5). Members that fail are left out and named
    in the verdict; if all fail, the verdict is an error."""

    def __init__(
        self, judges: Sequence[Judge], method: Literal["majority", "mean"] = "majority", id: str | None = None
    ):
        if not judges:
            raise ValueError("a panel needs at least one judge")
        if method not in ("majority", "mean"):
            raise ValueError(f"panel method must be 'majority' or 'mean', got {method!r}")
        self.judges = list(judges)
        self.method = method
        self.id = id or f"panel({','.join(j.id for j in self.judges)})"
        self.model = None
        self.votes: list[list[bool]] = []
        """Member votes of every item where all members answered (what ``agreement`` is computed from)."""

    def can_judge(self, criterion: Criterion) -> bool:
        return any(j.can_judge(criterion) for j in self.judges)

    def agreement(self) -> Agreement:
        return agreement(self.votes)

    async def judge(
        self,
        criterion: Criterion,
        trajectory: Trajectory,
        step: int | None = None,
        *,
        rubric: Rubric | None = None,
    ) -> Verdict:
        members = [j for j in self.judges if j.can_judge(criterion)]
        verdicts = list(await asyncio.gather(*(j.judge(criterion, trajectory, step, rubric=rubric) for j in members)))
        ok = [v for v in verdicts if v.ok]
        latency = max((v.latency_s for v in verdicts), default=0.0)
        if not ok:
            errors = "; ".join(f"{v.judge}: {v.error}" for v in verdicts) or "no member can judge this criterion"
            return Verdict.failed(
                criterion.id,
                f"every panel member failed ({errors})",
                step=step,
                judge=self.id,
                latency_s=latency,
                members=verdicts,
            )
        na = [v for v in ok if not v.applicable]
        if len(na) * 2 > len(ok):  # most members that answered say the criterion does not apply
            return Verdict.not_applicable(
                criterion.id,
                " | ".join(f"{v.judge}: {v.rationale}" for v in na)[:2000],
                step=step,
                judge=self.id,
                latency_s=latency,
                members=verdicts,
                details={"failed_members": len(verdicts) - len(ok), "not_applicable_members": len(na)},
            )
        ok = [v for v in ok if v.applicable]
        votes = [bool(v.met) for v in ok]
        if len(ok) == len(members):
            self.votes.append(votes)
        if self.method == "majority":
            score = sum(votes) / len(votes)
            met = sum(votes) * 2 > len(votes)
        else:
            score = sum(float(v.score or 0.0) for v in ok) / len(ok)
            met = score >= 0.5
        item = agreement([votes]) if len(votes) >= 2 else None
        return Verdict(
            criterion_id=criterion.id,
            step=step,
            score=score,
            met=met,
            rationale=" | ".join(f"{v.judge}: {v.rationale}" for v in ok)[:2000],
            evidence=Evidence(steps=sorted({s for v in ok for s in v.evidence.steps})),
            judge=self.id,
            latency_s=latency,
            members=verdicts,
            details={
                "failed_members": len(verdicts) - len(ok),
                "agreement": item.percent_agreement if item else None,
            },
        )
