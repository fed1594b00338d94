"""SWE-bench-format task source over local git repositories.

A record has SWE-bench's fields (``instance_id, repo, base_commit, problem_statement, patch, test_patch,
FAIL_TO_PASS, PASS_TO_PASS``; extra SWE-bench fields such as ``hints_text`` or ``version`` are kept in
``details``). ``repo`` names a repository that ``repos`` maps to a local clone, or is itself a local path. The
snapshot is ``git archive`` of ``base_commit``, cached per (repository, commit).
"""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rubricgym.core.jsonl import read_jsonl
from rubricgym.envs.swe.builtin import cache_root
from rubricgym.envs.swe.inject import detect_python_path
from rubricgym.envs.swe.instance import SweInstance

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


def snapshot_commit(repo_path: Path, commit: str, cache: Path | None = None) -> Path:
    """The tree of ``commit`` of the git repository at ``repo_path``, unpacked once into the cache."""
    repo_path = Path(repo_path).resolve()
    key = hashlib.sha1(f"{repo_path}|{commit}".encode()).hexdigest()[:16]
    target = (cache or cache_root() / "swebench") / key
    if target.is_dir():
        return target
    res = subprocess.run(
        ["git", "-C", str(repo_path), "archive", "--format=tar", commit], capture_output=True, timeout=300
    )
    if res.returncode != 0:
        raise ValueError(f"git archive {commit} in {repo_path} failed: {res.stderr.decode(errors='replace')[-500:]}")
    tmp = target.with_name(f".{key}-tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(res.stdout)) as tf:
        tf.extractall(tmp, filter="data")
    tmp.rename(target)
    return target


def load_swebench(
    records: Iterable[Mapping[str, Any]] | str | Path,
    repos: Mapping[str, str | Path] | None = None,
    cache: Path | None = None,
) -> list[SweInstance]:
    """``SweInstance``s from SWE-bench records (dicts or a JSONL file) over local clones."""
    if isinstance(records, str | Path):
        records = [rec for _, rec in read_jsonl(records)]
    out = []
    for rec in records:
        missing = [f for f in FIELDS if f not in rec and f not in ("test_patch", "PASS_TO_PASS")]
        if missing:
            raise ValueError(f"SWE-bench record {rec.get('instance_id', '?')!r} lacks {', '.join(missing)}")
        local = Path((repos or {}).get(rec["repo"], rec["repo"]))
        if not (local / ".git").exists():
            raise ValueError(
                f"repository {rec['repo']!r} of {rec['instance_id']!r}: no local git clone at {local} "
                "(pass repos={name: path})"
            )
        snap = snapshot_commit(local, rec["base_commit"], cache)
        out.append(
            SweInstance(
                **{f: rec[f] for f in FIELDS if f in rec},
                snapshot=str(snap),
                python_path=list(rec.get("python_path") or detect_python_path(snap)),
                source="swebench",
                details={k: v for k, v in rec.items() if k not in FIELDS and k != "python_path"},
            )
        )
    return out
