"""The arena's pages: the leaderboard by agent name with CIs, the win matrix, every judged match, and one match
with both trajectories and the judge's verdict in each presentation order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rubricgym.viewer.index import LineFile, loads

VERDICTS = "verdicts.jsonl"
WHY_BT_ELO = (
    "Bradley-Terry fits one strength per agent to all judged games at once (order does not matter; the 95% CI "
    "comes from bootstrap resamples over tasks). Elo updates a rating after each game in the order they were "
    "played, so it depends on that order and on its K-factor, and it has not converged after few games: read "
    "the Bradley-Terry column and its CI; Elo is shown for comparison with online leaderboards."
)


def read_arena(run_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((run_dir / "arena.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(
            f"{run_dir / 'arena.json'} cannot be read ({e}): was the arena interrupted? run it again"
        ) from None
    return data if isinstance(data, dict) else {}


def winner_name(match: dict[str, Any]) -> str:
    """The winning agent's name (``tie`` or ``unjudged`` otherwise), never the side letter."""
    r = match.get("result") or {}
    if r.get("error"):
        return "unjudged"
    w = r.get("winner")
    if w in ("a", "b"):
        return str(match.get(w, w))
    return "tie" if w in (None, "tie") else str(w)


class Matches:
    """``verdicts.jsonl`` read lazily (a live arena's new lines are picked up)."""

    def __init__(self, run_dir: Path):
        self.file = LineFile(run_dir / VERDICTS)

    def all(self) -> list[dict[str, Any]]:
        self.file.refresh()
        out = []
        for k in range(len(self.file)):
            try:
                m = loads(self.file.read(k))
            except ValueError:
                continue
            if isinstance(m, dict):
                m["k"] = k
                m["winner_name"] = winner_name(m)
                out.append(m)
        return out

    def get(self, k: int) -> dict[str, Any]:
        self.file.refresh()
        if not 0 <= k < len(self.file):
            raise KeyError(f"no match {k}: the arena has {len(self.file)} judged games")
        m = loads(self.file.read(k))
        m["k"] = k
        m["winner_name"] = winner_name(m)
        return dict(m)


def orders(match: dict[str, Any]) -> list[dict[str, Any]]:
    """Each presentation order: which agent was shown first, the per-criterion scores of both, combined, rationale."""
    a, b = match.get("a", "a"), match.get("b", "b")
    out = []
    for o in (match.get("result") or {}).get("orders") or []:
        rows = []
        for part in ("path", "answer"):
            sides = o.get(part) or {}
            for c in sorted(set(sides.get("a") or {}) | set(sides.get("b") or {})):
                rows.append(
                    {
                        "part": part,
                        "criterion": c,
                        "a": (sides.get("a") or {}).get(c),
                        "b": (sides.get("b") or {}).get(c),
                    }
                )
        combined = o.get("combined") or {}
        out.append(
            {
                "first": a if o.get("first") == "a" else b,
                "second": b if o.get("first") == "a" else a,
                "rows": rows,
                "a": combined.get("a"),
                "b": combined.get("b"),
                "rationale": o.get("rationale") or "",
            }
        )
    return out
