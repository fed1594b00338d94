"""A persistent judge cache in SQLite, so re-scoring unchanged trajectories costs no endpoint calls.

The key is (judge id, model, prompt version, rubric hash, criterion id, evidence hash): change any of them —
a new judge model, an edited prompt template, a bumped rubric, different evidence — and the verdict is judged
afresh. Failed verdicts are never stored, so an outage is retried next time instead of being remembered.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from rubricgym.rewards.verdict import Verdict

_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    key TEXT PRIMARY KEY,
    judge TEXT NOT NULL, model TEXT, prompt_version TEXT NOT NULL, rubric_hash TEXT NOT NULL,
    criterion TEXT NOT NULL, evidence_hash TEXT NOT NULL,
    verdict TEXT NOT NULL, created REAL NOT NULL
)
"""


@dataclass(frozen=True)
class CacheKey:
    judge: str
    model: str | None
    prompt_version: str
    rubric_hash: str
    criterion: str
    evidence_hash: str

    @property
    def digest(self) -> str:
        parts = (
            self.judge,
            self.model or "",
            self.prompt_version,
            self.rubric_hash,
            self.criterion,
            self.evidence_hash,
        )
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def evidence_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class JudgeCache:
    """``get``/``put`` verdicts by ``CacheKey``; safe to share between tasks, threads and processes."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)
        self._db.commit()
        self.hits = 0
        self.misses = 0

    def get(self, key: CacheKey) -> Verdict | None:
        with self._lock:
            row = self._db.execute("SELECT verdict FROM verdicts WHERE key = ?", (key.digest,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return Verdict.model_validate_json(row[0]).model_copy(update={"cached": True})

    def put(self, key: CacheKey, verdict: Verdict) -> None:
        if not verdict.ok:
            return  # never remember a failure: the next run should try again
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO verdicts (key, judge, model, prompt_version, rubric_hash, criterion, "
                "evidence_hash, verdict, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key.digest,
                    key.judge,
                    key.model,
                    key.prompt_version,
                    key.rubric_hash,
                    key.criterion,
                    key.evidence_hash,
                    verdict.model_copy(update={"cached": False}).model_dump_json(),
                    time.time(),
                ),
            )
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])

    def clear(self) -> None:
        with self._lock:
            self._db.execute("DELETE FROM verdicts")
            self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()
