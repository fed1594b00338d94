"""Portable tasks files: SWE instances whose repository snapshots and dependency folders travel with the file.

``save_instances`` writes one JSON instance per line. Each snapshot and dependency folder is copied into
``<stem>.data/`` beside the file, under a name that is a hash of its content, so identical trees are stored once
and a rebuilt cache never changes what a file means (a folder already inside the data folder stays where it
is). ``load_instances`` resolves the relative paths against the file's folder, so a tasks file copied with its
``<stem>.data/`` folder to another directory or machine runs there with an empty cache.
Files with absolute paths (written before this format) still load where those paths exist.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rubricgym.core.jsonl import read_text
from rubricgym.envs.swe.instance import SweInstance
from rubricgym.envs.swe.sandbox.treediff import walk

SWEBENCH_ONLY = ("base_commit", "repo")


def tree_digest(root: Path) -> str:
    """A hash of the tree at ``root``: each entry's path, kind, executable bit and content (links: target)."""
    h = hashlib.sha256()
    for rel in sorted(walk(str(root))):
        full = root / rel
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        if full.is_symlink():
            h.update(b"L" + os.readlink(full).encode("utf-8", "surrogateescape"))
        elif full.is_file():
            h.update(b"X" if os.access(full, os.X_OK) else b"F")
            with open(full, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        else:
            h.update(b"D")
        h.update(b"\0")
    return h.hexdigest()[:24]


def _store(path: str, out_dir: Path, data: Path, kind: str) -> str:
    """``path`` relative to ``out_dir``, copied into ``data/kind/<content hash>`` unless it lies in ``data``."""
    src = Path(path).resolve()
    if not src.is_dir():
        raise FileNotFoundError(f"{kind[:-1]} folder {src} does not exist: rebuild the task before saving it")
    if src.is_relative_to(data):
        return src.relative_to(out_dir).as_posix()
    target = data / kind / tree_digest(src)
    if not target.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
        shutil.copytree(src, tmp / "t", symlinks=True)
        with contextlib.suppress(OSError):  # made meanwhile by another writer
            (tmp / "t").rename(target)
        shutil.rmtree(tmp, ignore_errors=True)
    return target.relative_to(out_dir).as_posix()


def data_dir(out: Path) -> Path:
    """The folder that holds the snapshots and dependencies of the tasks file ``out``: ``<stem>.data``."""
    return out.parent / f"{out.stem}.data"


def save_instances(instances: Iterable[SweInstance], out: str | Path, data: Path | None = None) -> Path:
    """Write ``instances`` to the JSONL file ``out`` with paths relative to it (see the module docstring);
    ``data`` (inside ``out``'s folder; default ``<stem>.data``) is where their folders are kept."""
    out = Path(out).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    out_dir = out.parent.resolve()
    data = Path(data).resolve() if data is not None else data_dir(out_dir / out.name)
    if not data.is_relative_to(out_dir):
        raise ValueError(f"the data folder {data} must lie inside the tasks file's folder {out_dir}")
    lines = []
    for inst in instances:
        update: dict[str, Any] = {"snapshot": _store(inst.snapshot, out_dir, data, "snapshots")}
        if inst.deps:
            update["deps"] = _store(inst.deps, out_dir, data, "deps")
        lines.append(inst.model_copy(update=update).model_dump_json() + "\n")
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text("".join(lines), encoding="utf-8")
    tmp.replace(out)
    return out


def raw_record_hint(record: Any, where: str, source: str | Path = "RECORDS.jsonl") -> str | None:
    """What to do with ``record`` if it is a SWE-bench record rather than a task (no snapshot to run), else None."""
    if not isinstance(record, dict) or "snapshot" in record or "instance_id" not in record:
        return None
    if not all(k in record for k in SWEBENCH_ONLY):
        return None
    return (
        f"{where}: {record['instance_id']!r} is a SWE-bench record, not a task: it names a repository and a "
        f"commit but no snapshot to run. Import the records first (this checks each one's gold patch in the "
        f"sandbox): `rubricgym swe import {source} --repos DIR_WITH_CLONES --out tasks.jsonl`, then run "
        f"with `--env-arg instances=tasks.jsonl` (Python: rubricgym.envs.swe.swebench.import_swebench)"
    )


def task_file_hint(path: str | Path) -> str | None:
    """Why the JSONL file ``path`` is no task file, if its first record is a SWE-bench record or a swe-v0
    instance (both go to ``swe-v0`` another way), else None."""
    try:
        with open(path, encoding="utf-8") as f:
            first = next((line for line in f if line.strip()), "")
        record = json.loads(first)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if hint := raw_record_hint(record, f"{path}:1", path):
        return hint
    if isinstance(record, dict) and "snapshot" in record and "instance_id" in record:
        return (
            f"{path} holds swe-v0 instances, not tasks: pass it as `--env-arg instances={path}` (with --tasks N) "
            f"instead of --task-file"
        )
    return None


def _resolve(value: str, base: Path, what: str, where: str) -> str:
    p = Path(value)
    full = p if p.is_absolute() else base / p
    if not full.is_dir():
        hint = (
            f"copy the tasks file together with its folder {p.parts[0]}/ (it holds the snapshots and dependencies)"
            if not p.is_absolute()
            else "this file names a cache folder of another machine or a cleared cache: rebuild the tasks, or "
            "re-save them with rubricgym.envs.swe.taskfile.save_instances where they exist"
        )
        raise ValueError(f"{where}: the {what} folder {full} does not exist: {hint}")
    return str(full)


def load_instances(path: str | Path) -> list[SweInstance]:
    """``SweInstance``s from a JSONL tasks file, their relative paths resolved against the file's folder."""
    return [inst for inst, _ in load_instances_at(path)]


def load_instances_at(path: str | Path) -> list[tuple[SweInstance, str]]:
    """Each instance of the tasks file at ``path`` with where it is (``FILE:LINE``), for messages to its owner."""
    path = Path(path).expanduser()
    try:
        text = read_text(path)  # bytes that are not UTF-8: a ValueError naming the file, line and column
    except OSError as e:
        raise ValueError(f"cannot read the tasks file {path}: {e.strerror or e}") from None
    base = path.parent.resolve()
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            record = json.loads(line)
        except ValueError as e:
            raise ValueError(f"{where}: not a JSON object ({e})") from None
        if hint := raw_record_hint(record, where, path):
            raise ValueError(hint)
        try:
            inst = SweInstance.model_validate(record)
        except ValidationError as e:
            fields = "; ".join(f"{'.'.join(map(str, x['loc'])) or '(record)'}: {x['msg']}" for x in e.errors()[:5])
            raise ValueError(f"{where}: not a swe-v0 instance ({fields})") from None
        update = {"snapshot": _resolve(inst.snapshot, base, "snapshot", where)}
        if inst.deps:
            update["deps"] = _resolve(inst.deps, base, "dependency", where)
        out.append((inst.model_copy(update=update), where))
    return out
