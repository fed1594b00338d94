"""How numbers look in tables and reports: one formatter for every CLI table and the trainers' displays, and the
one wording of an outcome beside a rubric reward (every summary shows the solve rate first and says when the two
moved apart)."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Column, Table
from rich.text import Text

from rubricgym.core.types import SOLVED_AT, Outcome

__all__ = [
    "SOLVED_AT",
    "disagreement",
    "fit_table",
    "fits",
    "fmt_ci",
    "fmt_number",
    "keep_ids",
    "solve_rate",
    "unsolved_outscore",
]


def fmt_number(x: float | None, spec: str = ".3f", missing: str = "-") -> str:
    """``x`` with the format ``spec`` (``".3f"``, ``".2f"``, ``".4g"``...), or ``missing`` when there is none."""
    return missing if x is None else format(x, spec)


def fmt_ci(ci: Sequence[float] | None, spec: str = ".3f", missing: str = "-") -> str:
    """A confidence interval as ``[95% CI lo, hi]``, or ``missing`` when there is none."""
    return missing if not ci else f"[95% CI {format(ci[0], spec)}, {format(ci[1], spec)}]"


def solve_rate(outcomes: Sequence[Outcome]) -> float | None:
    """The share of episodes that solved their task (``Outcome.succeeded``: the env's verdict, else an outcome
    reward of 1); ``None`` when there is no episode."""
    return sum(o.succeeded for o in outcomes) / len(outcomes) if outcomes else None


def disagreement(
    rubric_gain: float,
    outcome_before: float,
    outcome_after: float,
    *,
    env: str | None = None,
    outcome: str = "solve rate",
    spec: str = ".1%",
) -> str | None:
    """A warning when the rubric reward and the outcome (the solve rate, or a partial-credit env's mean outcome
    reward) moved in opposite directions, else ``None``: a rubric that rises while fewer tasks are solved pays for
    something other than solving them, and a summary must not let the rubric gain hide that."""
    outcome_gain = outcome_after - outcome_before
    if not (rubric_gain > 0 > outcome_gain or rubric_gain < 0 < outcome_gain):
        return None  # same direction, or one of them did not move (nan compares false: no warning)
    moved = f"{format(outcome_before, spec)} -> {format(outcome_after, spec)}"
    where = f"; see rubricgym check {env}" if env else ""
    if rubric_gain > 0:
        return (
            f"warning: rubric reward rose ({rubric_gain:+.3f}) while the {outcome} fell ({moved}): "
            f"the rubric may pay for activity{where}"
        )
    return (
        f"warning: rubric reward fell ({rubric_gain:+.3f}) while the {outcome} rose ({moved}): "
        f"the rubric may not pay for what solves the task{where}"
    )


def unsolved_outscore(solved: Sequence[bool], rubric: Sequence[float | None], *, name: str = "rubric") -> str | None:
    """A warning when the episodes that failed their task earn a higher mean rubric reward than those that solved
    it (one run, no before/after to compare), else ``None``: such a rubric pays for something other than solving."""
    won = [r for s, r in zip(solved, rubric, strict=True) if s and r is not None and r == r]
    lost = [r for s, r in zip(solved, rubric, strict=True) if not s and r is not None and r == r]
    if not won or not lost:
        return None
    w, lo = sum(won) / len(won), sum(lost) / len(lost)
    if lo <= w:
        return None
    return (
        f"warning: unsolved episodes earn a higher {name} reward ({lo:.3f} over {len(lost)}) than solved ones "
        f"({w:.3f} over {len(won)}): the rubric may pay for activity, not for solving the task"
    )


FOLD_AT = 12
"""Longest word a non-id column keeps whole; a longer one folds onto the next line at a narrow width."""


def _cell_text(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain


def _min_width(column: Column) -> int:
    """The narrowest ``column`` may get: an id column's longest line, else its longest word up to ``FOLD_AT``."""
    texts = [_cell_text(c) for c in (column.header, *column.cells)]
    if column.no_wrap:
        return max(len(ln) for t in texts for ln in t.splitlines() or [""])
    return min(max((len(w) for t in texts for w in t.split()), default=1), FOLD_AT)


def keep_ids(table: Table, ids: Sequence[str] = ()) -> Table:
    """Make ``table`` safe for narrow terminals without cutting what people copy: the columns headed ``ids`` (env
    ids, task ids, criterion ids) are never wrapped or cut (each as wide as its longest value), every other column
    keeps its words (up to ``FOLD_AT`` characters) and folds longer ones instead of ending them in ``…``, and the
    borders take less room. Call it after the rows are added; ``fit_table`` also handles a width the ids do not
    fit."""
    table.box = box.SIMPLE_HEAD
    table.padding = (0, 1)
    table.pad_edge = False
    for column in table.columns:
        if _cell_text(column.header) in ids:
            column.no_wrap, column.overflow = True, "ignore"
        else:
            column.overflow = "fold"
        column.min_width = _min_width(column)
    return table


def fits(console: Console, table: Table) -> bool:
    """Whether ``table`` (after ``keep_ids``) can be drawn in ``console``'s width with every column at least its
    minimum: ids whole, other words whole up to ``FOLD_AT``."""
    gaps = sum(table.padding[1] + table.padding[3] for _ in table.columns) - (0 if table.pad_edge else 2)
    return sum(_min_width(c) for c in table.columns) + gaps <= console.width


def fit_table(console: Console, table: Table, ids: Sequence[str] = ()) -> RenderableType:
    """``table`` with its ids kept whole (``keep_ids``) where it fits ``console``; else the same rows as cards: the
    ids on a line of their own, then each other column as ``header value``, wrapped, so nothing is cut."""
    keep_ids(table, ids)
    if fits(console, table):
        return table
    headers = [_cell_text(c.header) for c in table.columns]
    columns = [[_cell_text(cell) for cell in c.cells] for c in table.columns]
    cards: list[RenderableType] = [Text(str(table.title), style="bold")] if table.title else []
    for row in zip(*columns, strict=True):
        first = " · ".join(v for h, v in zip(headers, row, strict=True) if h in ids) or row[0]
        rest = " · ".join(f"{h} {v}" for h, v in zip(headers, row, strict=True) if h not in ids and v)
        cards += [
            Text(first, style="bold", overflow="ignore", no_wrap=True),
            Padding(rest.replace("\n", " "), (0, 0, 0, 2)),
        ]
    return Group(*cards)
