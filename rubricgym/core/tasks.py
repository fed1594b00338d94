"""Task sets: tasks from a seeded generator or a file (JSONL, Parquet, a Hugging Face dataset saved to disk).

Order is deterministic: generated sets are a function of (seed, split, n); file sets keep file order. A bad
record raises ``TaskFileError`` naming the file, the line (or row) and the field.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rubricgym.core.jsonl import read_jsonl
from rubricgym.core.registry import make
from rubricgym.core.types import Task


class TaskFileError(ValueError):
    """A task file could not be read; the message names the file, line/row and field."""


def _describe(e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(record)"
        parts.append(f"field '{loc}': {err['msg']}")
    return "; ".join(parts)


def _task_from(record: Any, where: str, env_id: str | None, split: str | None) -> Task:
    if not isinstance(record, dict):
        raise TaskFileError(
            f"{where}: expected a JSON object with at least 'id' and 'prompt', got {type(record).__name__}"
        )
    record = dict(record)
    if env_id is not None:
        record.setdefault("env_id", env_id)
    if split is not None:
        record.setdefault("split", split)
    try:
        return Task.model_validate(record)
    except ValidationError as e:
        raise TaskFileError(f"{where}: {_describe(e)}") from None


def distinct_tasks(tasks: Iterable[Task], source: str) -> list[Task]:
    """``tasks`` with exact repeats dropped; raises ``TaskFileError`` when one id names two different tasks."""
    seen: dict[str, Task] = {}
    for t in tasks:
        if t.id in seen and seen[t.id] != t:
            raise TaskFileError(
                f"{source}: two different tasks share the id {t.id!r}; derive the id from everything that makes a "
                "task differ (e.g. a hash of its prompt and parameters)"
            )
        seen.setdefault(t.id, t)
    return list(seen.values())


class TaskSet(Sequence[Task]):
    """An ordered, indexable collection of tasks with split selection."""

    def __init__(self, tasks: Iterable[Task], source: str = "memory"):
        self.tasks: list[Task] = list(tasks)
        self.source = source
        seen: set[str] = set()
        for t in self.tasks:
            if t.id in seen:
                raise TaskFileError(f"{source}: duplicate task id {t.id!r}; task ids must be unique")
            seen.add(t.id)

    def __len__(self) -> int:
        return len(self.tasks)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return TaskSet(self.tasks[i], self.source)
        return self.tasks[i]

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __repr__(self) -> str:
        return f"TaskSet({len(self)} tasks from {self.source}, splits={self.splits()})"

    def splits(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tasks:
            out[t.split] = out.get(t.split, 0) + 1
        return out

    def split(self, name: str) -> TaskSet:
        """The tasks of split ``name`` (same order); an unknown split lists the ones present."""
        picked = [t for t in self.tasks if t.split == name]
        if not picked and self.tasks:
            raise KeyError(f"no tasks in split {name!r}; splits present: {sorted(self.splits())}")
        return TaskSet(picked, f"{self.source}[{name}]")

    def filter(self, predicate: Callable[[Task], bool]) -> TaskSet:
        return TaskSet([t for t in self.tasks if predicate(t)], self.source)

    # ---- constructors ---------------------------------------------------------------------------------------

    @classmethod
    def generate(cls, env_id: str, n: int, seed: int = 0, split: str = "train", **env_kwargs: Any) -> TaskSet:
        """``n`` tasks from env ``env_id``'s seeded generator; an env drawing from a fixed pool may give fewer
        (a task drawn again is kept once). Two different tasks under one id are an error of the env."""
        env = make(env_id, **env_kwargs)
        source = f"{env_id}(seed={seed}, split={split})"
        return cls(distinct_tasks(env.task_set(n, seed=seed, split=split), source), source=source)

    @classmethod
    def from_file(cls, path: str | Path, env_id: str | None = None, split: str | None = None) -> TaskSet:
        """Load ``.jsonl``, ``.parquet`` or a ``datasets`` directory saved with ``save_to_disk``."""
        p = Path(path)
        if not p.exists():
            raise TaskFileError(f"{p}: no such file or directory")
        if p.is_dir():
            out = cls.from_hf_disk(p, env_id, split)
        elif p.suffix == ".parquet":
            out = cls.from_parquet(p, env_id, split)
        elif p.suffix in (".jsonl", ".json", ".ndjson"):
            out = cls.from_jsonl(p, env_id, split)
        else:
            raise TaskFileError(
                f"{p}: unknown task file type {p.suffix!r}; use .jsonl, .parquet or a datasets directory"
            )
        if not len(out):
            raise TaskFileError(f"{p}: the file holds no tasks; write one JSON task per line")
        return out

    @classmethod
    def from_jsonl(cls, path: str | Path, env_id: str | None = None, split: str | None = None) -> TaskSet:
        tasks = [_task_from(rec, f"{path}:{n}", env_id, split) for n, rec in read_jsonl(path, TaskFileError)]
        return cls(tasks, source=str(path))

    @classmethod
    def from_records(
        cls, records: Iterable[dict[str, Any]], source: str, env_id: str | None = None, split: str | None = None
    ) -> TaskSet:
        return cls(
            [_task_from(_decode_json_columns(r), f"{source} row {i}", env_id, split) for i, r in enumerate(records)],
            source=source,
        )

    @classmethod
    def from_parquet(cls, path: str | Path, env_id: str | None = None, split: str | None = None) -> TaskSet:
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as e:
            raise TaskFileError(f"{path}: cannot read as Parquet ({e})") from None
        return cls.from_records(table.to_pylist(), str(path), env_id, split)

    @classmethod
    def from_hf_disk(cls, path: str | Path, env_id: str | None = None, split: str | None = None) -> TaskSet:
        """A dataset saved with ``datasets``' ``save_to_disk`` (a ``Dataset`` or a ``DatasetDict`` of splits)."""
        try:
            import datasets  # lazy: only this export/import path needs it (keeps CLI start-up light)
        except ImportError:
            raise TaskFileError(f"{path}: loading a Hugging Face dataset needs `pip install datasets`") from None
        ds = datasets.load_from_disk(str(path))
        if isinstance(ds, datasets.DatasetDict):
            tasks: list[Task] = []
            for name in ds:
                if split is None or name == split:
                    tasks += cls.from_records(ds[name], f"{path}[{name}]", env_id, split or name).tasks
            return cls(tasks, source=str(path))
        return cls.from_records(ds, str(path), env_id, split)

    def to_jsonl(self, path: str | Path) -> None:
        with open(path, "w", encoding="utf-8") as f:
            for t in self.tasks:
                f.write(t.model_dump_json() + "\n")

    def to_parquet(self, path: str | Path) -> None:
        import pyarrow as pa  # lazy: only this export/import path needs it (keeps CLI start-up light)
        import pyarrow.parquet as pq

        rows = [_encode_json_columns(t.model_dump()) for t in self.tasks]
        pq.write_table(pa.Table.from_pylist(rows), path)


_JSON_COLUMNS = ("params", "hidden", "rubric")


def _encode_json_columns(row: dict[str, Any]) -> dict[str, Any]:
    """Nested dicts of varying shape become JSON strings so a Parquet schema stays stable across rows."""
    return {k: json.dumps(v) if k in _JSON_COLUMNS and v is not None else v for k, v in row.items()}


def _decode_json_columns(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for k in _JSON_COLUMNS:
        if isinstance(out.get(k), str):
            with contextlib.suppress(json.JSONDecodeError):  # left as a string: validation then names the field
                out[k] = json.loads(out[k])
    return out
