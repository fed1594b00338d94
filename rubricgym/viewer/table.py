"""The episode table's query: filters (entry, outcome, a criterion met or unmet, reward range, parse errors), sort
and page, parsed from URL parameters with errors that say what was wrong."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from rubricgym.viewer.index import RunIndex, Summary

PAGE_SIZE = 50
SORTS = ("row", "task", "agent", "outcome", "total", "env_reward", "steps", "errors", "train_step")
OUTCOMES = ("solved", "failed", "truncated", "unfinished", "unsolved")
"""``unsolved`` is every outcome but ``solved``."""


class QueryError(ValueError):
    """A table parameter the viewer cannot use (the message names it and the accepted values)."""


@dataclass
class Query:
    entry: str = ""
    outcome: str = ""
    criterion: str = ""
    state: str = "unmet"
    """Whether ``criterion`` must be ``met`` or ``unmet``."""
    min_total: float | None = None
    max_total: float | None = None
    parse_errors: str = ""
    """``yes``: only episodes with a parse error; ``no``: only those without."""
    sort: str = "row"
    desc: bool = False
    page: int = 1

    @property
    def filtered(self) -> bool:
        return bool(
            self.entry
            or self.outcome
            or self.criterion
            or self.min_total is not None
            or self.max_total is not None
            or self.parse_errors
        )

    @property
    def plain(self) -> bool:
        """File order, no filter: the first page can be read without summarising the whole run."""
        return not self.filtered and self.sort == "row" and not self.desc

    def params(self, **over: Any) -> dict[str, str]:
        """The non-default parameters (with ``over`` applied), for links."""
        values = {f.name: getattr(self, f.name) for f in fields(self)} | over
        default = Query()
        out = {}
        for k, v in values.items():
            if v == getattr(default, k) or v is None:
                continue
            out[k] = ("1" if v else "") if isinstance(v, bool) else str(v)
        return out


def _number(name: str, raw: str) -> float | None:
    if raw.strip() == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        raise QueryError(f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise QueryError(f"{name} must be a finite number, got {raw!r}")
    return value


def parse_query(params: Mapping[str, str]) -> Query:
    """A ``Query`` from URL parameters; ``QueryError`` for a value that is not one of the accepted ones."""
    q = Query(
        entry=params.get("entry", "").strip(),
        outcome=params.get("outcome", "").strip(),
        criterion=params.get("criterion", "").strip(),
        state=params.get("state", "unmet").strip() or "unmet",
        min_total=_number("min_total", params.get("min_total", "")),
        max_total=_number("max_total", params.get("max_total", "")),
        parse_errors=params.get("parse_errors", "").strip(),
        sort=params.get("sort", "row").strip() or "row",
        desc=params.get("desc", "") not in ("", "0", "false"),
    )
    if q.outcome and q.outcome not in OUTCOMES:
        raise QueryError(f"outcome must be one of {', '.join(OUTCOMES)}, got {q.outcome!r}")
    if q.state not in ("met", "unmet"):
        raise QueryError(f"state must be met or unmet, got {q.state!r}")
    if q.parse_errors not in ("", "yes", "no"):
        raise QueryError(f"parse_errors must be yes or no, got {q.parse_errors!r}")
    if q.sort not in SORTS:
        raise QueryError(f"sort must be one of {', '.join(SORTS)}, got {q.sort!r}")
    raw_page = params.get("page", "1").strip() or "1"
    if not raw_page.isdigit() or int(raw_page) < 1:
        raise QueryError(f"page must be a whole number from 1, got {raw_page!r}")
    q.page = int(raw_page)
    return q


def keep(s: Summary, q: Query) -> bool:
    """Whether episode ``s`` passes the query's filters."""
    if q.entry and q.entry not in (s.entry, s.env_id):
        return False
    if q.outcome == "unsolved":
        if s.solved:
            return False
    elif q.outcome and s.outcome != q.outcome:
        return False
    if q.criterion and q.criterion not in (s.met if q.state == "met" else s.unmet):
        return False
    if q.min_total is not None and (s.total is None or s.total < q.min_total):
        return False
    if q.max_total is not None and (s.total is None or s.total > q.max_total):
        return False
    if q.parse_errors == "yes" and not s.parse_errors:
        return False
    return not (q.parse_errors == "no" and s.parse_errors)


def _key(sort: str) -> Any:
    if sort == "row":
        return lambda s: (s.store, s.line)
    if sort == "task":
        return lambda s: s.task_id
    if sort == "agent":
        return lambda s: s.agent
    if sort == "outcome":
        return lambda s: s.outcome
    if sort == "errors":
        return lambda s: s.errors
    if sort == "train_step":
        return lambda s: -1 if s.train_step is None else s.train_step
    # numbers that may be missing: missing sorts first ascending
    return lambda s: (getattr(s, sort) is not None, getattr(s, sort) or 0.0)


@dataclass
class TablePage:
    rows: list[Summary]
    total: int
    """Episodes matching the query."""
    pages: int
    query: Query
    entries: list[str]
    criteria: list[str]


def page(index: RunIndex, q: Query, size: int = PAGE_SIZE) -> TablePage:
    """The rows of ``q.page`` (file order without a filter reads only that page's lines)."""
    index.refresh()
    if q.plain:
        n = len(index)
        rows = index.first((q.page - 1) * size, size)
        entries = sorted({s.entry or s.env_id for s in rows})
        criteria = sorted({c for s in rows for c in s.met | s.unmet})
        return TablePage(rows, n, max(1, math.ceil(n / size)), q, entries, criteria)
    every = list(index.all())
    matched = [s for s in every if keep(s, q)]
    matched.sort(key=_key(q.sort), reverse=q.desc)
    start = (q.page - 1) * size
    return TablePage(
        matched[start : start + size],
        len(matched),
        max(1, math.ceil(len(matched) / size)),
        q,
        sorted({s.entry or s.env_id for s in every}),
        sorted(_criteria(every)),
    )


def _criteria(rows: Iterable[Summary]) -> set[str]:
    out: set[str] = set()
    for s in rows:
        out |= s.met | s.unmet
    return out
