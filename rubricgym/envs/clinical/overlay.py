"""Knowledge-base overlays: extra exams and conditions merged over the bundled catalogue without copying it.

An overlay is a folder in the knowledge-base layout (``exams.yaml`` and/or ``conditions/*.yaml``), a YAML/JSON file
``{exams: [...], conditions: [...]}``, or the ``{"kb_overlay": {...}}`` line of a cases file (what
``rubricgym clinical import`` writes for tests the catalogue lacks). Records follow ``schema.py``; an id the
bundled knowledge base has is replaced, and every clash is reported in ``KnowledgeBase.notes``.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rubricgym.envs.clinical.matching import fold
from rubricgym.envs.clinical.schema import (
    Condition,
    Exam,
    KnowledgeBase,
    KnowledgeBaseError,
    _cross_check,
    _read_yaml,
    _records,
    load_kb,
)


def read_overlay(source: str | Path) -> tuple[list[Exam], list[Condition], Path]:
    """The exams and conditions of an overlay: a folder in the knowledge-base layout (``exams.yaml`` and/or
    ``conditions/*.yaml``), a YAML/JSON file ``{exams: [...], conditions: [...]}``, or a cases JSONL file whose
    line ``{"kb_overlay": {...}}`` holds them."""
    path = Path(source).expanduser().resolve()
    exams: list[Exam] = []
    conditions: list[Condition] = []
    if path.is_dir():
        if (path / "exams.yaml").is_file():
            exams = _records(path / "exams.yaml", Exam, "exams")
        for f in sorted((path / "conditions").glob("*.y*ml")) if (path / "conditions").is_dir() else []:
            conditions += _records(f, Condition, "conditions")
        return exams, conditions, path
    if not path.is_file():
        raise KnowledgeBaseError(f"{path}: no such knowledge-base overlay (a folder, a YAML/JSON file or a cases file)")
    data = _overlay_line(path) if path.suffix == ".jsonl" else _read_yaml(path)  # YAML reads JSON too
    if not isinstance(data, dict):
        raise KnowledgeBaseError(f"{path}: an overlay is a mapping {{exams: [...], conditions: [...]}}")
    unknown = sorted(set(data) - {"exams", "conditions"})
    if unknown:
        raise KnowledgeBaseError(f"{path}: unknown overlay key(s) {unknown}; use 'exams' and 'conditions'")
    for key, model, out in (("exams", Exam, exams), ("conditions", Condition, conditions)):
        for i, rec in enumerate(data.get(key) or []):
            try:
                out.append(model.model_validate(rec))  # type: ignore[arg-type]
            except ValidationError as e:
                err = e.errors()[0]
                field = ".".join(str(p) for p in err["loc"]) or "(record)"
                name = rec.get("id", f"#{i}") if isinstance(rec, dict) else f"#{i}"
                raise KnowledgeBaseError(
                    f"{path}: overlay {key[:-1]} {name!r}, field {field!r}: {err['msg']}"
                ) from None
    return exams, conditions, path


def _overlay_line(path: Path) -> Any:
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if '"kb_overlay"' in line:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise KnowledgeBaseError(f"{path}:{n}: the kb_overlay line is not valid JSON: {e}") from None
            if isinstance(rec, dict) and "kb_overlay" in rec:
                return rec["kb_overlay"]
    return {}


def merge_kb(base: KnowledgeBase, exams: list[Exam], conditions: list[Condition], source: Path) -> KnowledgeBase:
    """``base`` with an overlay's exams and conditions added (an id the base has is replaced by the overlay's);
    every clash is listed in the result's ``notes``: a replaced id, or a name or alias the base already uses."""
    notes = _clashes("exam", base.exams, exams, source) + _clashes("condition", base.conditions, conditions, source)
    all_exams = list({**base.exams, **{e.id: e for e in exams}}.values())
    all_conditions = list({**base.conditions, **{c.id: c for c in conditions}}.values())
    where: dict[str, Path] = {"exams": source, **{c: base.folder for c in base.conditions}}
    where.update({c.id: source for c in conditions})
    _cross_check(all_conditions, all_exams, where)
    kb = KnowledgeBase(all_conditions, all_exams, base.folder)
    kb.notes = notes
    return kb


def _clashes(kind: str, bundled: dict[str, Any], added: list[Any], source: Path) -> list[str]:
    """What adding ``added`` over ``bundled`` (exams or conditions) changes: replaced ids, names used twice."""
    names = {fold(n): r.id for r in bundled.values() for n in (r.name, *r.aliases)}
    notes = []
    for r in added:
        if r.id in bundled:
            notes.append(f"{source}: {kind} {r.id!r} replaces the bundled {kind} of that id")
        for n in (r.name, *r.aliases):
            other = names.get(fold(n))
            if other is not None and other != r.id:
                notes.append(f"{source}: {kind} {r.id!r}: name {n!r} is already the bundled {kind} {other!r}'s")
    return notes


def kb_with_overlay(folder: str | Path | None, overlay: str | Path | None) -> KnowledgeBase:
    """``load_kb(folder)`` with ``overlay`` merged over it (cached per folder, overlay and overlay version)."""
    base = load_kb(folder)
    if not overlay:
        return base
    path = Path(overlay).expanduser().resolve()
    stamp = path.stat().st_mtime_ns if path.exists() else 0
    return _merged(base, path, stamp)


@functools.lru_cache(maxsize=16)
def _merged(base: KnowledgeBase, path: Path, stamp: int) -> KnowledgeBase:
    exams, conditions, source = read_overlay(path)
    return merge_kb(base, exams, conditions, source)
