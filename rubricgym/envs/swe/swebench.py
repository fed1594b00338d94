"""SWE-bench-format task source over local git repositories.

A record has SWE-bench's fields (``instance_id, repo, base_commit, problem_statement, patch, test_patch,
FAIL_TO_PASS, PASS_TO_PASS``; the two test lists may be JSON strings, as in the published dataset; other fields
such as ``hints_text``, ``version`` or ``environment_setup_commit`` are kept in ``details``, which only the
grader sees). ``repo`` names a repository found in ``repos`` (a mapping, or a folder holding clones as
``owner/name``, ``owner__name`` or ``name``), or is itself a local path. The snapshot is ``git archive`` of
``base_commit``, cached under the commit's tree hash (content-addressed). The repository's declared test
dependencies (read at ``environment_setup_commit`` when the record has one, as SWE-bench installs them) are
installed into the task's dependency folder (``deps``).

``load_swebench`` turns records into instances; ``import_swebench`` also grades each one in the sandbox
(``verify``) and says per record whether its gold patch resolves it.
"""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rubricgym.core.jsonl import read_text
from rubricgym.envs.swe.builtin import cache_root
from rubricgym.envs.swe.deps import DepsInstall, declared_requirements, install_deps
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


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, timeout=300)


def snapshot_commit(repo_path: Path, commit: str, cache: Path | None = None) -> Path:
    """The tree of ``commit`` of the git repository at ``repo_path``, unpacked once into the cache under the
    commit's tree hash (so the same content is one folder, wherever the clone lives)."""
    repo_path = Path(repo_path).resolve()
    res = _git(repo_path, "rev-parse", "--verify", "--quiet", f"{commit}^{{tree}}")
    if res.returncode != 0:
        raise RecordError(f"commit {commit!r} is not in the clone at {repo_path}: fetch it (git fetch --all)")
    tree = res.stdout.decode().strip()
    target = (cache or cache_root() / "swebench") / tree[:24]
    if target.is_dir():
        return target
    res = _git(repo_path, "archive", "--format=tar", commit)
    if res.returncode != 0:
        raise RecordError(f"git archive {commit} in {repo_path} failed: {res.stderr.decode(errors='replace')[-500:]}")
    tmp = target.with_name(f".{target.name}-tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(res.stdout)) as tf:
        tf.extractall(tmp, filter="data")
    try:
        tmp.rename(target)
    except OSError:  # another process unpacked it first
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def find_clone(repo: str, repos: Repos) -> Path:
    """The local clone of ``repo`` (``owner/name``): from a mapping, from a folder of clones, or ``repo`` as a path."""
    candidates: list[Path] = []
    if isinstance(repos, Mapping):
        if repo in repos:
            candidates.append(Path(repos[repo]))
    elif repos is not None:
        root = Path(repos).expanduser()
        owner, _, name = repo.rpartition("/")
        candidates += [root / repo, root / f"{owner}__{name}", root / name] if owner else [root / repo]
    candidates.append(Path(repo).expanduser())
    for c in candidates:
        if (c / ".git").exists():
            return c
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


def record_instance(
    rec: Mapping[str, Any],
    repos: Repos = None,
    cache: Path | None = None,
    *,
    with_deps: bool = True,
    wheelhouse: str | Path | None = None,
    index_url: str | None = None,
    extra_requirements: list[str] | None = None,
) -> tuple[SweInstance, DepsInstall]:
    """One record as an instance (snapshot unpacked, dependencies installed unless ``with_deps`` is false)."""
    iid = str(rec.get("instance_id", "?"))
    missing = [f for f in REQUIRED if rec.get(f) in (None, "")]
    if missing:
        raise RecordError(f"record {iid!r} lacks {', '.join(missing)} (SWE-bench fields)")
    local = find_clone(str(rec["repo"]), repos)
    snap = snapshot_commit(local, str(rec["base_commit"]), cache)
    deps = DepsInstall(None)
    if with_deps:
        env_commit = rec.get("environment_setup_commit")
        setup = snapshot_commit(local, str(env_commit), cache) if env_commit else snap
        requirements = sorted(set(declared_requirements(setup)) | set(extra_requirements or []))
        deps = install_deps(requirements, wheelhouse=wheelhouse, index_url=index_url)
    try:
        inst = SweInstance(
            **{f: rec[f] for f in FIELDS if rec.get(f) is not None},
            snapshot=str(snap),
            deps=str(deps.path) if deps.path else None,
            python_path=list(rec.get("python_path") or detect_python_path(snap)),
            source="swebench",
            details={k: v for k, v in rec.items() if k not in FIELDS and k != "python_path"},
        )
    except ValidationError as e:
        fields = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors()[:3])
        raise RecordError(f"record {iid!r}: {fields}") from None
    return inst, deps


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
            inst, deps = await asyncio.to_thread(
                record_instance,
                rec,
                repos,
                cache,
                wheelhouse=wheelhouse,
                index_url=index_url,
                extra_requirements=extra_requirements,
            )
        except (RecordError, FileNotFoundError, subprocess.TimeoutExpired) as e:
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
