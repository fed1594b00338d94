"""Which run directories a path holds, and what kind each is.

A *run* is a directory written by one command: ``run``/``score`` (``trajectories.jsonl``, maybe ``scores.jsonl``),
``train`` (``metrics.jsonl`` beside its kept rollouts), ``eval`` (``report.json`` and ``<entry>/trajectories.jsonl``)
or ``arena`` (``arena.json``, ``verdicts.jsonl`` and ``trajectories/<agent>/<entry>/trajectories.jsonl``). A folder
that is none of them is searched (a few levels deep) for runs. Nothing here reads a trajectory: each run lists its
*stores* (trajectory files), which ``index.StoreIndex`` reads lazily.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TRAJECTORIES = "trajectories.jsonl"
SCORES = "scores.jsonl"
METRICS = "metrics.jsonl"
ARENA_JSON = "arena.json"
EVAL_JSON = "report.json"
MAX_DEPTH = 4
"""How deep a folder of runs is searched."""


class ViewerError(RuntimeError):
    """The path cannot be viewed (missing, or holds no run): the message says what to pass instead."""


@dataclass
class Store:
    """One trajectory file of a run, with what its place says about its episodes (arena: agent and entry)."""

    path: Path
    agent: str | None = None
    entry: str | None = None

    @property
    def scores(self) -> Path:
        return self.path.parent / SCORES


@dataclass
class Run:
    """A run directory: its kind, a URL-safe id, and its trajectory stores."""

    dir: Path
    kind: str
    """``arena``, ``eval``, ``train``, ``score`` (a run with stored verdicts) or ``run``."""
    rid: str
    stores: list[Store] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.dir.name

    def meta(self) -> dict[str, Any]:
        """``run.json`` (empty when absent or unreadable)."""
        return _read_json(self.dir / "run.json")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def kind_of(path: Path) -> str | None:
    """The kind of run ``path`` is, or ``None`` when it is no run directory."""
    if (path / ARENA_JSON).is_file():
        return "arena"
    if (path / EVAL_JSON).is_file() and any(path.glob(f"*/{TRAJECTORIES}")):
        return "eval"
    if (path / METRICS).is_file():
        return "train"
    if (path / TRAJECTORIES).is_file():
        return "score" if (path / SCORES).is_file() else "run"
    return None


def _stores(path: Path, kind: str) -> list[Store]:
    if kind == "arena":
        return [
            Store(p, agent=p.parent.parent.name, entry=p.parent.name)
            for p in sorted((path / "trajectories").glob(f"*/*/{TRAJECTORIES}"))
        ]
    if kind == "eval":
        return [Store(p, entry=p.parent.name) for p in sorted(path.glob(f"*/{TRAJECTORIES}"))]
    return [Store(path / TRAJECTORIES)]


def slug(rel: str) -> str:
    """A URL- and file-name-safe id for a run at ``rel`` (relative to the viewed path)."""
    if rel in ("", "."):
        return "run"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", rel.replace("/", "__")).strip("-") or "run"


def discover(path: str | Path) -> list[Run]:
    """The runs at ``path``: itself when it is a run directory, else every run in it (``MAX_DEPTH`` levels)."""
    root = Path(path)
    if not root.exists():
        raise ViewerError(
            f"{root} does not exist: pass a run directory (written by rubricgym run/score/train/eval/arena)"
        )
    if not root.is_dir():
        raise ViewerError(f"{root} is a file: pass the run directory that holds it ({root.parent})")
    found: list[tuple[Path, str]] = []

    def walk(d: Path, depth: int) -> None:
        kind = kind_of(d)
        if kind is not None:
            found.append((d, kind))
            return  # a run's own sub-folders (an eval's entries, checkpoints) are part of it
        if depth >= MAX_DEPTH:
            return
        try:
            children = sorted(c for c in d.iterdir() if c.is_dir() and not c.name.startswith("."))
        except OSError:
            return
        for c in children:
            walk(c, depth + 1)

    walk(root, 0)
    if not found:
        raise ViewerError(
            f"{root} holds no run directory (no trajectories.jsonl, metrics.jsonl, report.json or arena.json within "
            f"{MAX_DEPTH} levels): pass the --out of rubricgym run, train, eval or arena"
        )
    runs, seen = [], set()
    for d, kind in found:
        rid = slug(str(d.relative_to(root)))
        while rid in seen:
            rid += "_"
        seen.add(rid)
        runs.append(Run(dir=d, kind=kind, rid=rid, stores=_stores(d, kind)))
    return runs
