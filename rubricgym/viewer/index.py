"""Lazy episode indexes: a run is never loaded whole.

``StoreIndex`` keeps the byte offset of every complete line of a ``trajectories.jsonl`` (one pass over the file in
fixed-size chunks; a live run's new lines are picked up from where the last pass stopped) and parses a line only
when its page is shown. Sorting and filtering need a small ``Summary`` per episode (task, agent, outcome, totals,
error counts, criteria met and unmet): those are built once per line, kept (a few hundred bytes each) and the
trajectory itself is dropped. Stored verdicts (``scores.jsonl``, written by ``rubricgym score``) are found by
trajectory id the same way.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubricgym.core.types import SOLVED_AT

try:  # optional: ~3x faster on the summaries a filter needs; the standard library reads the same JSON
    from orjson import loads
except ImportError:  # pragma: no cover (orjson is installed wherever the view extra is)
    from json import loads  # type: ignore[assignment]

CHUNK = 1 << 22
"""Bytes read at a time while scanning for line ends."""
MET_AT = 0.5
"""Without stored verdicts, a criterion's stored score at or above this counts as met (below it as unmet)."""
_ID = re.compile(rb'"trajectory_id"\s*:\s*"([^"]+)"')


@dataclass
class Summary:
    """What the episode table shows and filters on: never the trajectory's text, never ``task.hidden``."""

    store: int
    line: int
    id: str
    task_id: str
    env_id: str
    entry: str | None
    agent: str
    model: str | None
    train_step: int | None
    group_id: str | None
    outcome: str
    """``solved``, ``failed`` (ended without solving), ``truncated`` (cut at the step limit) or ``unfinished``."""
    solved: bool
    total: float | None
    env_reward: float
    steps: int
    parse_errors: int
    tool_errors: int
    judge_errors: int
    met: frozenset[str] = field(default_factory=frozenset)
    unmet: frozenset[str] = field(default_factory=frozenset)

    @property
    def errors(self) -> int:
        return self.parse_errors + self.tool_errors + self.judge_errors


def _offsets(path: Path, start: int, want: int | None = None) -> tuple[list[tuple[int, int]], int]:
    """``(offset, length)`` of each complete non-blank line from byte ``start`` (stopping after the chunk in which
    ``want`` lines were found, when given), and where the next scan starts: the beginning of the first line not
    taken (or of a line still being written). Chunks are searched in place: no line is copied."""
    out: list[tuple[int, int]] = []
    line_start = base = start
    with open(path, "rb") as f:
        f.seek(start)
        while chunk := f.read(CHUNK):
            i = chunk.find(b"\n")
            while i >= 0:
                end = base + i
                length = end - line_start
                if length > 2 or (length > 0 and chunk[max(0, i - length) : i].strip()):
                    out.append((line_start, length))
                line_start = end + 1
                i = chunk.find(b"\n", i + 1)
            base += len(chunk)
            if want is not None and len(out) >= want:
                break
    return out, line_start


def outcome_of(d: dict[str, Any]) -> tuple[str, bool]:
    """The outcome label and solve flag of a trajectory's JSON ``outcome``."""
    o = d.get("outcome") or {}
    solved = bool(o["solved"]) if o.get("solved") is not None else float(o.get("reward") or 0.0) >= SOLVED_AT
    if solved:
        return "solved", True
    if o.get("truncated"):
        return "truncated", False
    if o.get("terminated"):
        return "failed", False
    return "unfinished", False


def summarise(d: dict[str, Any], score: dict[str, Any] | None, store: int, line: int, labels: Any) -> Summary:
    """A ``Summary`` of one trajectory's JSON (and its stored score line, if any)."""
    task = d.get("task") or {}
    steps = d.get("steps") or []
    rewards = d.get("rewards") or {}
    outcome, solved = outcome_of(d)
    met: set[str] = set()
    unmet: set[str] = set()
    if score is not None:
        total = score.get("total")
        judge_errors = int(score.get("n_errors") or 0)
        for v in score.get("verdicts") or []:
            if v.get("error") or not v.get("applicable", True) or v.get("met") is None:
                continue
            (met if v["met"] else unmet).add(v["criterion_id"])
    else:
        total = rewards.get("rubric")
        judge_errors = int(rewards.get("rubric/errors") or 0)
        for k, v in rewards.items():
            if k.startswith("rubric/criterion/") and isinstance(v, int | float) and math.isfinite(v):
                (met if v >= MET_AT else unmet).add(k.removeprefix("rubric/criterion/"))
    step = (d.get("metrics") or {}).get("train_step")
    return Summary(
        store=store,
        line=line,
        id=str(d.get("id", "")),
        task_id=str(task.get("id", "")),
        env_id=str(task.get("env_id", "")),
        entry=labels.entry,
        agent=labels.agent or str(d.get("agent", "unknown")),
        model=d.get("model"),
        train_step=int(step) if isinstance(step, int | float) else None,
        group_id=d.get("group_id"),
        outcome=outcome,
        solved=solved,
        total=float(total) if isinstance(total, int | float) else None,
        env_reward=float((d.get("outcome") or {}).get("reward") or 0.0),
        steps=len(steps),
        parse_errors=sum(1 for s in steps if (s.get("action") or {}).get("parse_error")),
        tool_errors=sum(1 for s in steps if s.get("tool_error")),
        judge_errors=judge_errors,
        met=frozenset(met),
        unmet=frozenset(unmet - met),
    )


class LineFile:
    """Offsets of a JSONL file's complete lines, extended as the file grows (a live run) and started over when
    the file is replaced (``score`` rewrites its file atomically: a new inode) or shrinks."""

    def __init__(self, path: Path):
        self.path = path
        self.lines: list[tuple[int, int]] = []
        self._scanned = 0
        self._seen: tuple[int, int] | None = None
        """``(inode, size)`` when the file was last scanned to its end."""
        self._inode = -1
        self._lock = threading.Lock()

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_size

    def _check(self, st: tuple[int, int] | None) -> bool:
        """Start over if the file went, was replaced or shrank; True if it did."""
        if st is None or st[0] != self._inode or st[1] < self._scanned:
            reset = bool(self.lines) or self._scanned > 0 or self._seen is not None
            self.lines, self._scanned, self._seen = [], 0, None
            self._inode = st[0] if st else -1
            return reset
        return False

    def refresh(self) -> bool:
        """Scan to the end of the file: pick up appended lines, start over on a replaced file. True if changed."""
        with self._lock:
            st = self._stat()
            if st is not None and st == self._seen:
                return False
            changed = self._check(st)
            if st is None:
                return changed
            new, self._scanned = _offsets(self.path, self._scanned)
            self.lines.extend(new)
            self._seen = st
            return changed or bool(new)

    def ensure(self, k: int) -> bool:
        """Scan only as far as line ``k`` (the first page needs its own lines, not the whole file). True if the
        file was replaced since the last scan."""
        with self._lock:
            changed = self._check(self._stat())
            if len(self.lines) <= k and self._inode != -1:
                new, self._scanned = _offsets(self.path, self._scanned, want=k + 1 - len(self.lines))
                self.lines.extend(new)
            return changed

    def read(self, k: int, limit: int | None = None) -> bytes:
        """Line ``k`` (its first ``limit`` bytes when given)."""
        offset, length = self.lines[k]
        with open(self.path, "rb") as f:
            f.seek(offset)
            return f.read(length if limit is None else min(limit, length))

    def heads(self, limit: int) -> Iterator[bytes]:
        """The first ``limit`` bytes of every line, through one open file."""
        with open(self.path, "rb") as f:
            for offset, length in self.lines:
                f.seek(offset)
                yield f.read(min(limit, length))

    def __len__(self) -> int:
        return len(self.lines)


class StoreIndex:
    """One store's lines, its stored verdicts by trajectory id, and (once asked for) a summary per line."""

    def __init__(self, number: int, store: Any):
        self.number = number
        self.store = store
        self.file = LineFile(store.path)
        self.scores = LineFile(store.scores)
        self._score_ids: dict[str, int] | None = None
        self._summaries: list[Summary | None] = []
        self._stale = False
        self._lock = threading.Lock()

    def refresh(self) -> None:
        """New trajectory lines; stored verdicts are re-read if ``scores.jsonl`` was rewritten (its lines are
        scanned only as far as needed: ``score`` writes them in trajectory order)."""
        self.file.refresh()
        if self.scores.ensure(-1):
            self._scores_changed()

    def _scores_changed(self) -> None:
        self._score_ids = None  # mapped again when a line is not where ``score`` put it
        self._stale = True  # totals and verdicts may have changed: summaries are built again

    def __len__(self) -> int:
        return len(self.file)

    def trajectory_json(self, line: int) -> dict[str, Any]:
        """The parsed JSON of line ``line`` (a dict; an unreadable line raises ``ValueError``)."""
        data = loads(self.file.read(line))
        if not isinstance(data, dict):
            raise ValueError(f"line {line + 1} of {self.store.path} is not a trajectory object")
        return data

    def _score_line(self, trajectory_id: str, hint: int | None) -> int | None:
        """The ``scores.jsonl`` line of ``trajectory_id``: ``rubricgym score`` writes them in trajectory order, so
        line ``hint`` (the trajectory's own line) is tried first; otherwise every line's id is mapped once."""
        if hint is not None and hint >= 0:
            if self.scores.ensure(hint):
                self._scores_changed()
            if hint < len(self.scores):
                m = _ID.search(self.scores.read(hint, 200))
                if m and m.group(1).decode() == trajectory_id:
                    return hint
        if self._score_ids is None:
            if self.scores.refresh():
                self._stale = True
            ids: dict[str, int] = {}
            for k, head in enumerate(self.scores.heads(200)):
                if m := _ID.search(head):
                    ids[m.group(1).decode()] = k  # a re-score's later line wins
            self._score_ids = ids
        return self._score_ids.get(trajectory_id)

    def score_json(self, trajectory_id: str, hint: int | None = None) -> dict[str, Any] | None:
        """The stored verdicts of ``trajectory_id`` (``hint``: its line in the trajectory file), or ``None``."""
        if not self.store.scores.is_file():
            return None
        k = self._score_line(trajectory_id, hint)
        if k is None:
            return None
        try:
            data = loads(self.scores.read(k))
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def _drop_stale(self) -> None:
        if self._stale:
            self._summaries, self._stale = [], False

    def summary(self, line: int) -> Summary | None:
        """The summary of one line (read and parsed now; ``None`` for an unreadable line)."""
        with self._lock:
            self._drop_stale()
            if line < len(self._summaries):
                return self._summaries[line]
        return self._summarise(line)

    def _summarise(self, line: int) -> Summary | None:
        try:
            d = self.trajectory_json(line)
        except ValueError:
            return None
        return summarise(d, self.score_json(str(d.get("id", "")), line), self.number, line, self.store)

    def summaries(self) -> list[Summary | None]:
        """A summary per line (built for the lines not summarised yet)."""
        with self._lock:
            self._drop_stale()
            for k in range(len(self._summaries), len(self.file)):
                self._summaries.append(self._summarise(k))
            return list(self._summaries)


class RunIndex:
    """Every store of a run, addressed as ``(store, line)``."""

    def __init__(self, run: Any):
        self.run = run
        self.stores = [StoreIndex(k, s) for k, s in enumerate(run.stores)]
        self._by_id: dict[str, tuple[int, int]] = {}

    def refresh(self) -> None:
        for s in self.stores:
            s.refresh()

    def __len__(self) -> int:
        return sum(len(s) for s in self.stores)

    def first(self, start: int, count: int) -> list[Summary]:
        """Rows ``start .. start+count`` in file order, reading only those lines (the fast first page)."""
        out: list[Summary] = []
        for s in self.stores:
            if start >= len(s):
                start -= len(s)
                continue
            for line in range(start, min(len(s), start + count - len(out))):
                summary = s.summary(line)
                if summary is not None:
                    out.append(summary)
            start = 0
            if len(out) >= count:
                break
        return out

    def all(self) -> Iterator[Summary]:
        for s in self.stores:
            for summary in s.summaries():
                if summary is not None:
                    yield summary

    def locate(self, trajectory_id: str) -> tuple[int, int] | None:
        """``(store, line)`` of the trajectory with this id (builds an id map on first use)."""
        if trajectory_id not in self._by_id:
            self._by_id = {x.id: (x.store, x.line) for x in self.all()}
        return self._by_id.get(trajectory_id)
