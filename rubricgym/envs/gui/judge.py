"""State judges (MobileGym style): goal predicates over an app's JSON state, progress, and unexpected side effects.

A goal names a ``field`` by a path into the state (``notes[title=Groceries].body``: key ``notes``, the first list
item whose ``title`` is ``Groceries``, its ``body``; ``[*folder=Work]`` keeps every match, a list) or into the
submitted answer sheet (``answer.phone``), an ``op`` and the ``expected`` value. ``check_goals`` returns one
``{field, expected, actual, passed}`` row per goal; success is all passed, progress is passed / total.
Side effects: the state is flattened to ``path -> value`` (list items keyed by their ``id``) and every changed
path that no ``expected_changes`` pattern (``*`` wildcards) covers is an unexpected side effect.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Op = Literal["eq", "ieq", "contains", "exists", "absent", "len", "approx"]
_SEGMENT = re.compile(r"([^.\[\]]+)((?:\[[^\]]*\])*)")


class Goal(BaseModel):
    """One predicate over the final state (or the answer sheet)."""

    model_config = ConfigDict(extra="forbid")
    field: str
    op: Op = "eq"
    expected: Any = None


def _segments(path: str) -> list[tuple[str, list[str]]]:
    out, pos = [], 0
    while pos < len(path):
        m = _SEGMENT.match(path, pos)
        if m is None:
            raise ValueError(f"bad state path {path!r} at character {pos}")
        out.append((m.group(1), re.findall(r"\[([^\]]*)\]", m.group(2))))
        pos = m.end() + 1  # skip the dot
    return out


def resolve(state: Any, path: str) -> Any:
    """The value at ``path`` in ``state`` (``None`` when any part is missing)."""
    cur = state
    for key, filters in _segments(path):
        cur = cur.get(key) if isinstance(cur, dict) else None
        for f in filters:
            if not isinstance(cur, list):
                return None
            many = f.startswith("*")
            attr, _, value = f.lstrip("*").partition("=")
            if attr.isdigit() and not value:
                cur = cur[int(attr)] if int(attr) < len(cur) else None
                continue
            hits = [x for x in cur if isinstance(x, dict) and str(x.get(attr)) == value]
            cur = hits if many else (hits[0] if hits else None)
    return cur


def _norm(x: Any) -> str:
    return " ".join(str(x).split()).casefold()


def passes(op: str, actual: Any, expected: Any) -> bool:
    if op == "eq":
        return actual == expected
    if op == "ieq":
        return actual is not None and _norm(actual) == _norm(expected)
    if op == "contains":
        return actual is not None and _norm(expected) in _norm(actual)
    if op == "exists":
        return actual is not None
    if op == "absent":
        return actual is None or actual == []
    if op == "len":
        return isinstance(actual, list) and len(actual) == expected
    if op == "approx":
        try:
            return abs(float(str(actual).replace("$", "").strip()) - float(expected)) < 0.011
        except (TypeError, ValueError):
            return False
    raise ValueError(f"unknown goal op {op!r}")


def check_goals(goals: list[Goal], state: dict[str, Any], answer: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One ``{field, expected, actual, passed}`` row per goal, read from ``state`` and the answer sheet."""
    rows = []
    root = {**state, "answer": answer or {}}
    for g in goals:
        actual = resolve(root, g.field)
        rows.append(
            {
                "field": g.field,
                "op": g.op,
                "expected": g.expected,
                "actual": actual,
                "passed": passes(g.op, actual, g.expected),
            }
        )
    return rows


def progress(rows: list[dict[str, Any]]) -> float:
    return sum(r["passed"] for r in rows) / len(rows) if rows else 1.0


def state_progress(rows: list[dict[str, Any]]) -> float:
    """``progress`` over the goals on the app's state, leaving out the answer sheet's (answers count at the end,
    so a per-step reward never says whether an answer is right)."""
    return progress([r for r in rows if not r["field"].startswith("answer.")])


def gained(now: float, start: float) -> float:
    """The share of what was left open at the start that holds now (0 when nothing was left open)."""
    return 0.0 if start >= 1.0 else max(0.0, (now - start) / (1.0 - start))


def flatten(state: Any, prefix: str = "") -> dict[str, Any]:
    """``path -> scalar`` for every leaf; list items with an ``id`` are keyed ``[id=X]``, others by index."""
    out: dict[str, Any] = {}
    if isinstance(state, dict):
        for k, v in state.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(state, list):
        for i, v in enumerate(state):
            key = f"id={v['id']}" if isinstance(v, dict) and "id" in v else str(i)
            out.update(flatten(v, f"{prefix}[{key}]"))
        if not state:
            out[prefix] = []
    else:
        out[prefix] = state
    return out


def changed_paths(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Flattened paths whose value differs, appeared or disappeared between two states."""
    a, b = flatten(before), flatten(after)
    return sorted(k for k in a.keys() | b.keys() if a.get(k, _MISSING) != b.get(k, _MISSING))


_MISSING = object()


def _pattern(glob: str) -> re.Pattern[str]:
    return re.compile("^" + ".*".join(re.escape(part) for part in glob.split("*")) + "$")


def unexpected_changes(before: dict[str, Any], after: dict[str, Any], expected: list[str]) -> list[str]:
    """Changed paths that no ``expected`` glob pattern covers (unexpected side effects, USE)."""
    pats = [_pattern(p) for p in expected]
    return [p for p in changed_paths(before, after) if not any(x.match(p) for x in pats)]
