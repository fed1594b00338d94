"""Judged matches between agents and the verdict cache that makes them incremental and resumable.

A *match* between agents A and B compares their trajectories on every task of the suite (same tasks, same
seeds) with the entry's ``PairwiseJudge`` (both presentation orders); each task is one *game*. Every verdict is
appended to ``OUT/verdicts.jsonl`` (flushed and fsynced) keyed by entry, task, both trajectory ids and the
judge's id, so re-running an arena re-judges nothing, a killed arena resumes, and adding an agent judges only
the new pairs. A cached verdict is used only if it is bound to the same content (both trajectories, the rubric,
the judge) and its digest matches: a stale or edited line is judged again. A judge error is kept as an
*unjudged* game, reported and retried on the next run, never scored.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from rubricgym.arena.ratings import Game
from rubricgym.core.safeio import UnsafePathError, append_lines, parse_line
from rubricgym.core.store import trajectory_line
from rubricgym.core.types import Trajectory
from rubricgym.rewards.pairwise import PairwiseJudge, PairwiseResult

VERDICTS = "verdicts.jsonl"


def verdict_key(entry: str, task_id: str, a: Trajectory, b: Trajectory, judge: str) -> str:
    """Order-free key of one game: swapping a and b gives the same key."""
    lo, hi = sorted((a.id, b.id))
    return hashlib.sha256("\x1f".join((entry, task_id, lo, hi, judge)).encode()).hexdigest()[:32]


def judge_fingerprint(judge: PairwiseJudge) -> str:
    """What can change a pairwise verdict besides the trajectories: judge id, mode, settings and rubric hash."""
    parts = [judge.id, judge.mode, *judge.path_dims, "|", *judge.answer_dims, f"{judge.path_weight!r}"]
    parts += [f"{judge.tie_margin!r}", judge.prm.rubric.hash if judge.prm is not None else "-"]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def verdict_binding(a: Trajectory, b: Trajectory, judge: PairwiseJudge) -> str:
    """Order-free hash of what a verdict judged: both trajectories' content and the judge's fingerprint."""
    lo, hi = sorted(hashlib.sha256(trajectory_line(t)).hexdigest() for t in (a, b))
    return hashlib.sha256("\x1f".join((lo, hi, judge_fingerprint(judge))).encode()).hexdigest()[:32]


class VerdictRecord(BaseModel):
    """One line of ``verdicts.jsonl``: a judged game, bound to what it judged, with a digest of itself."""

    model_config = ConfigDict(extra="forbid")

    key: str
    entry: str
    task_id: str
    a: str
    b: str
    a_traj: str
    b_traj: str
    judge: str
    binding: str
    """``verdict_binding``: a verdict whose trajectories, rubric or judge changed since is judged again."""
    result: PairwiseResult
    digest: str = ""
    """sha256 of the rest of the record: an edited line (a flipped winner) is judged again, not believed."""

    def content_digest(self) -> str:
        body = self.model_dump(mode="json", exclude={"digest"})
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class VerdictCache:
    """``verdicts.jsonl``: one judged (or failed) game per line; the newest valid line per key wins.

    Every line is checked: one that is not UTF-8 JSON of a ``VerdictRecord`` (a torn write, an old format, a
    hand edit) or whose digest does not match is skipped and listed in ``skipped`` (its game is judged again).
    The file is appended without following a symbolic link.
    """

    def __init__(self, path: Path):
        self.path = path
        self.records: dict[str, VerdictRecord] = {}
        self.skipped: list[str] = []
        """``"line N: why"`` for every line not used."""
        if path.is_symlink():
            raise UnsafePathError(f"{path} is a symbolic link: rubricgym never reads or writes a run file through one")
        if path.exists():
            with open(path, "rb") as f:
                for n, raw in enumerate(f, 1):
                    if raw.strip():
                        self._load(n, raw)

    def _load(self, n: int, raw: bytes) -> None:
        value, why = parse_line(raw)
        if why is None:
            try:
                rec = VerdictRecord.model_validate(value)
            except ValidationError as e:
                err = e.errors()[0]
                why = f"not a verdict record ({'.'.join(map(str, err['loc'])) or 'line'}: {err['msg']})"
            else:
                if rec.digest != rec.content_digest():
                    why = "edited since it was written (digest mismatch)"
                else:
                    self.records[rec.key] = rec
        if why is not None:
            self.skipped.append(f"line {n}: {why}")

    def get(self, key: str, binding: str) -> VerdictRecord | None:
        """The cached verdict of ``key`` if it judged exactly ``binding`` and did not fail."""
        rec = self.records.get(key)
        if rec is None or rec.binding != binding or rec.result.error is not None:
            return None
        return rec

    def put(self, rec: VerdictRecord) -> None:
        rec = rec.model_copy(update={"digest": rec.content_digest()})
        self.records[rec.key] = rec
        append_lines(self.path, (rec.model_dump_json() + "\n").encode("utf-8"))


@dataclass
class MatchLog:
    """Everything the matches produced: games for the ratings, unjudged games, bias and cost counters."""

    games: list[Game] = field(default_factory=list)
    game_entries: list[str] = field(default_factory=list)
    unjudged: list[dict[str, Any]] = field(default_factory=list)
    position_bias: list[float] = field(default_factory=list)
    judged_now: int = 0
    cached: int = 0
    matches: list[tuple[int, int]] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(default_factory=list)
    counted: set[str] = field(default_factory=set)
    """Keys already in ``games`` (a rematch, e.g. a grand final, re-uses its verdicts but is not counted twice)."""


class MatchRunner:
    """``compare(i, j)`` for the shared topologies: agent i vs agent j over every task of the suite."""

    def __init__(
        self,
        agents: list[str],
        trajectories: dict[str, dict[str, dict[str, Trajectory]]],
        judges: dict[str, PairwiseJudge],
        cache: VerdictCache,
        concurrency: int = 8,
    ):
        self.agents = agents
        self.trajectories = trajectories
        """agent -> entry -> task id -> trajectory"""
        self.judges = judges
        self.cache = cache
        self.sem = asyncio.Semaphore(concurrency)
        self.log = MatchLog()

    async def _game(self, entry: str, task_id: str, i: int, j: int) -> tuple[float, float] | None:
        a = self.trajectories[self.agents[i]][entry][task_id]
        b = self.trajectories[self.agents[j]][entry][task_id]
        judge = self.judges[entry]
        if hasattr(judge, "for_task"):  # the rubric that task is scored with (rewards.path.choose_rubric)
            judge = judge.for_task(a.task)
        key = verdict_key(entry, task_id, a, b, judge.id)
        binding = verdict_binding(a, b, judge)
        rec = self.cache.get(key, binding)
        if rec is None:
            async with self.sem:
                result = await judge.compare(a, b)
            rec = VerdictRecord(
                key=key,
                entry=entry,
                task_id=task_id,
                a=self.agents[i],
                b=self.agents[j],
                a_traj=a.id,
                b_traj=b.id,
                judge=judge.id,
                binding=binding,
                result=result,
            )
            self.cache.put(rec)
            self.log.judged_now += 1
        else:
            self.log.cached += 1
        result = rec.result
        swapped = rec.a_traj != a.id
        if not result.ok or result.winner is None:
            self.log.unjudged.append(
                {
                    "entry": entry,
                    "task_id": task_id,
                    "a": self.agents[i],
                    "b": self.agents[j],
                    "error": result.error or "no winner",
                }
            )
            return None
        s = result.outcome_for("b" if swapped else "a")
        assert s is not None
        if key in self.log.counted:
            return (s, 1.0 - s)
        self.log.counted.add(key)
        self.log.games.append(Game(i, j, s, f"{entry}/{task_id}"))
        self.log.game_entries.append(entry)
        if result.position_bias is not None:
            self.log.position_bias.append(result.position_bias)
        self.log.examples.append(
            {
                "entry": entry,
                "task_id": task_id,
                "a": self.agents[i],
                "b": self.agents[j],
                "s": s,
                "result": rec.result.model_dump(mode="json"),
                "swapped": swapped,
            }
        )
        return (s, 1.0 - s)

    async def compare(self, i: int, j: int) -> tuple[float, float] | None:
        """Points of i and j summed over the tasks both played; ``None`` when no game could be judged."""
        self.log.matches.append((i, j))
        games = [
            (entry, tid)
            for entry, tasks in self.trajectories[self.agents[i]].items()
            for tid in tasks
            if tid in self.trajectories[self.agents[j]].get(entry, {})
        ]
        results = await asyncio.gather(*(self._game(entry, tid, i, j) for entry, tid in games))
        judged = [r for r in results if r is not None]
        if not judged:
            return None
        return sum(r[0] for r in judged), sum(r[1] for r in judged)
