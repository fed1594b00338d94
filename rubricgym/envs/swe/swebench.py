"""SWE-bench-format task source over local git repositories.

A record has SWE-bench's fields (``instance_id, repo, base_commit, problem_statement, patch, test_patch,
FAIL_TO_PASS, PASS_TO_PASS``; the two test lists may be JSON strings, as in the published dataset; other fields
such as ``hints_text``, ``version`` or ``environment_setup_commit`` are kept in ``details``, which only the
grader sees). ``repo`` names a repository found in ``repos`` (a mapping, or a folder holding clones as
``owner/name``, ``owner__name`` or ``name``), or is itself a path inside the current directory; whatever
resolves outside those roots (links included) is refused. The snapshot is ``git archive`` of ``base_commit``,
cached under the commit's tree hash (content-addressed).

Nothing of a repository runs on the host: git reads the clone's objects through a fresh repository of ours
(``object_view``), so the clone's configuration, hooks and filters are never read, and a tree holding a link out
of the repository is refused. The repository's declared test dependencies (read at ``environment_setup_commit``
when the record has one, as SWE-bench installs them) are installed and built inside the sandbox into the task's
dependency folder (``deps``); one declared by URL or path refuses the record.

``load_swebench`` turns records into instances; ``import_swebench`` also grades each one in the sandbox
(``verify``) and says per record whether its gold patch resolves it; a bad record never stops the others.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from pydantic import ValidationError

from rubricgym.core.jsonl import read_text
from rubricgym.envs.swe.builtin import cache_root
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
Repos = Mapping[str, str | Path] | str | Path | None


class RecordError(ValueError):
    """A record cannot become a task (a field missing, no clone of its repository, an unknown commit)."""


GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_NO_REPLACE_OBJECTS": "1",
}
"""git sees neither the machine's nor the user's configuration (``/etc/gitconfig``, ``~/.gitconfig``)."""
GIT_OVERRIDES = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.attributesFile=/dev/null",
    "protocol.allow=never",
    "protocol.file.allow=never",
)
"""``-c`` settings every git command runs with: no hooks, no fsmonitor, no attributes of ours, no transport."""
COMMIT_RE = re.compile(r"[0-9a-fA-F]{4,64}")


def _git(git_dir: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """git on our own object view (``object_view``), never inside a clone: a clone's ``.git/config`` (filters,
    ``core.fsmonitor``, hooks, aliases) is never read, so nothing it names can run."""
    overrides = [x for o in GIT_OVERRIDES for x in ("-c", o)]
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **GIT_ENV}
    return subprocess.run(
        ["git", *overrides, f"--git-dir={git_dir}", *args], capture_output=True, timeout=300, env=env, cwd=git_dir
    )


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


def objects_dir(clone: Path, roots: list[Path]) -> Path:
    """The object store of the clone at ``clone`` (its ``.git`` folder, or the one a ``.git`` file or a worktree's
    ``commondir`` names), resolved; refused unless it and every store its ``info/alternates`` adds lie inside
    ``roots``."""
    dot = clone / ".git"
    if dot.is_file():
        text = dot.read_text(errors="replace").strip()
        if not text.startswith("gitdir:"):
            raise RecordError(f"{dot} is neither a folder nor a 'gitdir:' file: re-clone the repository")
        git_dir = (clone / text.removeprefix("gitdir:").strip()).resolve()
    else:
        git_dir = dot.resolve()
    common = git_dir / "commondir"
    if common.is_file():
        git_dir = (git_dir / common.read_text(errors="replace").strip()).resolve()
    store = (git_dir / "objects").resolve()
    todo, seen = [store], set()
    while todo:
        d = todo.pop()
        if d in seen:
            continue
        seen.add(d)
        if not _inside(d, roots):
            raise RecordError(
                f"the clone at {clone} keeps its objects in {d}, outside {', '.join(map(str, roots))}: refused "
                "(a record's repository must lie inside the clones folder you gave; re-clone it there)"
            )
        alternates = d / "info" / "alternates"
        if alternates.is_file():
            for line in alternates.read_text(errors="replace").splitlines():
                if line.strip() and not line.startswith("#"):
                    todo.append((d / line.strip()).resolve())
    if not store.is_dir():
        raise RecordError(f"{clone} has no git object store ({store}): re-clone the repository")
    return store


def object_view(clone: Path, roots: list[Path], work: Path) -> Path:
    """A fresh bare repository under ``work`` whose only link to the clone is ``objects/info/alternates``:
    git reads the clone's objects and nothing else of it (config, hooks, attributes, refs)."""
    store = objects_dir(clone, roots)
    view = work / "view.git"
    res = subprocess.run(
        ["git", "init", "-q", "--bare", str(view)],
        capture_output=True,
        timeout=60,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **GIT_ENV},
        cwd=work,
    )
    if res.returncode != 0:
        raise RecordError(f"git init failed: {res.stderr.decode(errors='replace')[-300:]}")
    for hook in (view / "hooks").glob("*"):
        hook.unlink()
    (view / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (view / "objects" / "info" / "alternates").write_text(f"{store}\n")
    return view


def snapshot_commit(repo_path: Path, commit: str, cache: Path | None = None, roots: list[Path] | None = None) -> Path:
    """The tree of ``commit`` (a commit hash) of the git clone at ``repo_path``, unpacked once into the cache under
    the commit's tree hash (so the same content is one folder, wherever the clone lives).

    git runs on an object view (``object_view``), never inside the clone, so no configuration, hook or filter
    of the clone runs; the object store must lie inside ``roots`` (default: the clone itself). A tree holding a
    link that leads outside it, an absolute path or a device is refused (``RecordError``)."""
    repo_path = Path(repo_path).resolve()
    if not COMMIT_RE.fullmatch(commit):
        raise RecordError(
            f"base commit {commit!r} is not a commit hash: SWE-bench records carry the commit's hex SHA (names "
            "of branches and tags are not resolved, a clone's refs are never read)"
        )
    with tempfile.TemporaryDirectory(prefix="rubricgym-git-") as work:
        view = object_view(repo_path, roots or [repo_path], Path(work))
        res = _git(view, "rev-parse", "--verify", "--quiet", f"{commit}^{{tree}}")
        if res.returncode != 0:
            raise RecordError(f"commit {commit!r} is not in the clone at {repo_path}: fetch it (git fetch --all)")
        tree = res.stdout.decode().strip()
        target = (cache or cache_root() / "swebench") / tree[:24]
        if target.is_dir():
            return target
        res = _git(view, "archive", "--format=tar", commit)
    if res.returncode != 0:
        raise RecordError(f"git archive {commit} in {repo_path} failed: {res.stderr.decode(errors='replace')[-500:]}")
    tmp = target.with_name(f".{target.name}-tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(res.stdout)) as tf:
            tf.extractall(tmp, filter="data")
    except tarfile.FilterError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        member = getattr(e, "tarinfo", None)
        what = f"{member.name} -> {member.linkname}" if member is not None and member.linkname else str(e)
        raise RecordError(
            f"commit {commit} of {repo_path} holds {what}, which leads outside the repository or is no plain "
            f"file ({e}): such a snapshot is refused (a sandbox copy could reach the host through it)"
        ) from None
    except (tarfile.TarError, OSError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RecordError(f"commit {commit} of {repo_path} could not be unpacked: {e}") from None
    try:
        tmp.rename(target)
    except OSError:  # another process unpacked it first
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _name_parts(repo: str) -> list[str]:
    parts = repo.split("/")
    if repo.startswith(("/", "~")) or any(p in ("", ".", "..") or "\0" in p for p in parts) or len(parts) > 2:
        raise RecordError(
            f"repo {repo!r} is not a repository name (OWNER/NAME or NAME): it could name a folder outside the "
            "clones folder, which is refused"
        )
    return parts


def find_clone(repo: str, repos: Repos) -> tuple[Path, list[Path]]:
    """The local clone of ``repo`` (``owner/name``) and the roots it must stay in: from a mapping (its value is
    the root), from a folder of clones (``owner/name``, ``owner__name`` or ``name`` inside it), or, without
    ``repos``, ``repo`` as a path inside the current directory. Whatever resolves (links included) outside the
    root is refused."""
    candidates: list[Path] = []
    if isinstance(repos, Mapping):
        if repo not in repos:
            raise RecordError(f"no clone of {repo!r} in the repository mapping: add {repo!r}: PATH to it")
        root = Path(repos[repo]).expanduser().resolve()
        candidates.append(root)
    elif repos is not None:
        root = Path(repos).expanduser().resolve()
        parts = _name_parts(repo)
        if len(parts) == 2:
            candidates += [root / repo, root / f"{parts[0]}__{parts[1]}", root / parts[1]]
        else:
            candidates.append(root / repo)
    else:
        root = Path.cwd().resolve()
        raw = Path(repo).expanduser()
        candidates.append(raw if raw.is_absolute() else root / raw)
    for c in dict.fromkeys(candidates):
        if not (c / ".git").exists():
            continue
        real = c.resolve()
        if not _inside(real, [root]):
            raise RecordError(
                f"repo {repo!r} resolves to {real}, outside {root}: refused (only clones inside "
                f"{'--repos' if repos is not None else 'the current directory; pass --repos DIR'} are read)"
            )
        return real, [root]
    tried = ", ".join(str(c) for c in dict.fromkeys(candidates))
    raise RecordError(
        f"no local git clone of {repo!r} (looked at {tried}): clone it into the --repos folder "
        f"(git clone https://github.com/{repo} DIR/{repo.rpartition('/')[2]})"
    )


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
