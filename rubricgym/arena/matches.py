"""Judged matches between agents and the verdict cache that makes them incremental and resumable.

A *match* between agents A and B compares their trajectories on every task of the suite (same tasks, same
seeds) with the entry's ``PairwiseJudge`` (both presentation orders); each task is one *game*. Every verdict is
appended to ``OUT/verdicts.jsonl`` (flushed and fsynced) keyed by entry, task, both trajectory ids and the
judge's id, so re-running an arena re-judges nothing, a killed arena resumes, and adding an agent judges only
the new pairs. A judge error is kept as an *unjudged* game, reported and retried on the next run, never scored.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubricgym.arena.ratings import Game
from rubricgym.core.types import Trajectory
from rubricgym.rewards.pairwise import PairwiseJudge, PairwiseResult

VERDICTS = "verdicts.jsonl"


def verdict_key(entry: str, task_id: str, a: Trajectory, b: Trajectory, judge: str) -> str:
    """Order-free key of one game: swapping a and b gives the same key."""
    lo, hi = sorted((a.id, b.id))
    return hashlib.sha256("\x1f".join((entry, task_id, lo, hi, judge)).encode()).hexdigest()[:32]


class VerdictCache:
    """``verdicts.jsonl``: one judged (or failed) game per line; the newest line per key wins."""

    def __init__(self, path: Path):
        self.path = path
        self.records: dict[str, dict[str, Any]] = {}
        if path.exists():
            for raw in path.read_text(encoding="utf-8").splitlines():
                try:
                    rec = json.loads(raw)
                except ValueError:
                    continue  # a line torn by a kill: that game is simply judged again
                self.records[rec["key"]] = rec

    def get(self, key: str) -> dict[str, Any] | None:
        rec = self.records.get(key)
        return rec if rec is not None and rec["result"].get("error") is None else None

    def put(self, rec: dict[str, Any]) -> None:
        self.records[rec["key"]] = rec
        line = (json.dumps(rec) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # a line torn by a kill stays its own (skipped) line
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)


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
        key = verdict_key(entry, task_id, a, b, judge.id)
        rec = self.cache.get(key)
        if rec is None:
            async with self.sem:
                result = await judge.compare(a, b)
            rec = {
                "key": key,
                "entry": entry,
                "task_id": task_id,
                "a": self.agents[i],
                "b": self.agents[j],
                "a_traj": a.id,
                "b_traj": b.id,
                "judge": judge.id,
                "result": result.model_dump(mode="json"),
            }
            self.cache.put(rec)
            self.log.judged_now += 1
        else:
            self.log.cached += 1
        result = PairwiseResult.model_validate(rec["result"])
        swapped = rec["a_traj"] != a.id
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
                "result": rec["result"],
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
