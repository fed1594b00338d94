"""SWE-bench-format task source over local git repositories.

A record has SWE-bench's fields (``instance_id, repo, base_commit, problem_statement, patch, test_patch,
FAIL_TO_PASS, PASS_TO_PASS``; the two test lists may be JSON strings, as in the published dataset; other fields
such as ``hints_text``, ``version`` or ``environment_setup_commit`` are kept in ``details``, which only the
grader sees). ``repo`` names a repository found in ``repos`` (a mapping, or a folder holding clones as
``owner/name``, ``owner__name`` or ``name``), or is itself a path inside the current directory; whatever
resolves outside those roots (links included) is refused. The snapshot is ``git archive`` of ``base_commit``,
cached under the commit's tree hash (content-addressed).

Nothing of a repository runs on the host: git reads the clone's objects through a fresh repository of ours
(``clones``), so the clone's configuration, hooks and filters are never read, and a tree holding a link out
of the repository is refused. The repository's declared test dependencies (read at ``environment_setup_commit``
when the record has one, as SWE-bench installs them) are installed and built inside the sandbox into the task's
dependency folder (``deps``); one declared by URL or path refuses the record.

``load_swebench`` turns records into instances; ``import_swebench`` also grades each one in the sandbox
(``verify``) and says per record whether its gold patch resolves it; a bad record never stops the others.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from pydantic import ValidationError

from rubricgym.core.jsonl import read_text
from rubricgym.envs.swe.clones import RecordError, Repos, find_clone, snapshot_commit
from rubricgym.envs.swe.deps import (
    DepsInstall,
    declared_requirements,
    direct_reference,
    install_deps,
    install_deps_async,
)
from rubricgym.envs.swe.inject import detect_python_path
from rubricgym.envs.swe.instance import SweInstance
from rubricgym.envs.swe.sandbox import SandboxBackend, SandboxError, get_backend
from rubricgym.envs.swe.verify import Verdict, verify_instance

FIELDS = (
    "instance_id",
    "repo",
    "base_commit",
    "problem_statement",
    "patch",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
)
REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "patch", "FAIL_TO_PASS")


def _records(records: Iterable[Mapping[str, Any]] | str | Path) -> list[Mapping[str, Any]]:
    if not isinstance(records, str | Path):
        return list(records)
    out: list[Mapping[str, Any]] = []
    for n, line in enumerate(read_text(records, RecordError).lstrip("\ufeff").splitlines(), 1):
        if line.strip():
            try:
                rec = json.loads(line)
            except ValueError as e:
                raise RecordError(f"{records}:{n}: not a JSON object ({e})") from None
            if not isinstance(rec, dict):
                raise RecordError(f"{records}:{n}: expected a JSON object, got {type(rec).__name__}")
            out.append(rec)
    return out


@dataclass
class Prepared:
    """A record checked and its snapshots unpacked, before its dependencies are installed."""

    record: Mapping[str, Any]
    snapshot: Path
    requirements: list[str]


def prepare_record(
    rec: Mapping[str, Any],
    repos: Repos = None,
    cache: Path | None = None,
    *,
    extra_requirements: list[str] | None = None,
) -> Prepared:
    """Check ``rec``'s fields, find its clone (inside the roots, see ``find_clone``), unpack its base commit and
    read what its tests need (at ``environment_setup_commit`` when it has one) plus ``extra_requirements``.

    A repository that declares a dependency by URL or path (``name @ file://...``) is refused: installing it
    would run build code from wherever the record points; ``--with NAME`` (``extra_requirements``) replaces it."""
    iid = str(rec.get("instance_id", "?"))
    missing = [f for f in REQUIRED if rec.get(f) in (None, "")]
    if missing:
        raise RecordError(f"record {iid!r} lacks {', '.join(missing)} (SWE-bench fields)")
    local, roots = find_clone(str(rec["repo"]), repos)
    snap = snapshot_commit(local, str(rec["base_commit"]), cache, roots)
    env_commit = rec.get("environment_setup_commit")
    setup = snapshot_commit(local, str(env_commit), cache, roots) if env_commit else snap
    extra = list(extra_requirements or [])
    given = {canonicalize_name(Requirement(r).name) for r in extra if direct_reference(r) is None}
    declared = [r for r in declared_requirements(setup) if canonicalize_name(Requirement(r).name) not in given]
    refused = [why for r in declared if (why := direct_reference(r))]
    if refused:
        raise RecordError(
            f"record {iid!r}: its repository declares {refused[0]}; refused. Install that package from "
            "--wheelhouse by name instead: --with NAME replaces the declaration"
        )
    return Prepared(rec, snap, sorted(set(declared) | set(extra)))


def make_instance(prepared: Prepared, deps: DepsInstall) -> SweInstance:
    """The instance of a prepared record over its installed dependencies."""
    rec, snap = prepared.record, prepared.snapshot
    try:
        return SweInstance(
            **{f: rec[f] for f in FIELDS if rec.get(f) is not None},
            snapshot=str(snap),
            deps=str(deps.path) if deps.path else None,
            python_path=list(rec.get("python_path") or detect_python_path(snap)),
            source="swebench",
            details={k: v for k, v in rec.items() if k not in FIELDS and k != "python_path"},
        )
    except ValidationError as e:
        fields = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors()[:3])
        raise RecordError(f"record {rec.get('instance_id', '?')!r}: {fields}") from None


def record_instance(
    rec: Mapping[str, Any],
    repos: Repos = None,
    cache: Path | None = None,
    *,
    with_deps: bool = True,
    wheelhouse: str | Path | None = None,
    index_url: str | None = None,
    extra_requirements: list[str] | None = None,
    backend: SandboxBackend | None = None,
) -> tuple[SweInstance, DepsInstall]:
    """One record as an instance (snapshot unpacked, dependencies installed in the sandbox unless ``with_deps``
    is false). Synchronous: call it where no event loop runs (``import_swebench`` is the async route)."""
    prepared = prepare_record(rec, repos, cache, extra_requirements=extra_requirements)
    deps = DepsInstall(None)
    if with_deps:
        deps = install_deps(prepared.requirements, backend=backend, wheelhouse=wheelhouse, index_url=index_url)
    return make_instance(prepared, deps), deps


def load_swebench(
    records: Iterable[Mapping[str, Any]] | str | Path,
    repos: Repos = None,
    cache: Path | None = None,
    *,
    with_deps: bool = True,
    wheelhouse: str | Path | None = None,
    index_url: str | None = None,
) -> list[SweInstance]:
    """``SweInstance``s from SWE-bench records (dicts or a JSONL file) over local clones, unchecked (see
    ``import_swebench`` for the checked route). Raises ``RecordError`` on the first record that cannot load."""
    return [
        record_instance(r, repos, cache, with_deps=with_deps, wheelhouse=wheelhouse, index_url=index_url)[0]
        for r in _records(records)
    ]


@dataclass
class Imported:
    """One record's fate: its instance (``None`` when it could not load) and its verdict."""

    instance: SweInstance | None
    verdict: Verdict


async def import_swebench(
    records: Iterable[Mapping[str, Any]] | str | Path,
    repos: Repos = None,
    *,
    cache: Path | None = None,
    wheelhouse: str | Path | None = None,
    index_url: str | None = None,
    extra_requirements: list[str] | None = None,
    backend: SandboxBackend | None = None,
    timeout: float = 300.0,
    on_record: Callable[[int, int, Imported], None] | None = None,
) -> list[Imported]:
    """Load every record (see ``record_instance``) and grade it in the sandbox untouched and with its gold
    patch (``verify.verify_instance``); a record that cannot load gets a verdict saying why instead of
    stopping the import. ``on_record(i, total, imported)`` follows progress."""
    backend = backend or get_backend("bwrap")
    recs = _records(records)
    out: list[Imported] = []
    for i, rec in enumerate(recs):
        iid = str(rec.get("instance_id", f"record {i + 1}"))
        try:
            prepared = await asyncio.to_thread(prepare_record, rec, repos, cache, extra_requirements=extra_requirements)
            deps = await install_deps_async(
                prepared.requirements, backend=backend, wheelhouse=wheelhouse, index_url=index_url
            )
            inst = make_instance(prepared, deps)
        except (RecordError, OSError, subprocess.TimeoutExpired, SandboxError) as e:
            item = Imported(None, Verdict(iid, problems=[str(e)]))
        else:
            try:
                verdict = await verify_instance(inst, backend, timeout=timeout)
            except SandboxError as e:
                verdict = Verdict(iid, problems=[f"the sandbox failed: {e}"])
            if deps.failed:
                verdict.notes.append(f"could not install {', '.join(sorted(deps.failed))}")
            item = Imported(inst, verdict)
        out.append(item)
        if on_record is not None:
            on_record(i + 1, len(recs), item)
    return out
