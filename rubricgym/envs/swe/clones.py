"""Local git clones read without running anything of theirs: find a repository's clone inside the roots given
(``find_clone``), read its objects through a fresh repository of ours (``object_view``), and unpack a commit's tree
(``snapshot_commit``). Both record sources of the SWE env, SWE-bench records (``swebench``) and bug-fix commits
(``commit``), read their repositories this way.

git never runs inside a clone: it reads the clone's objects through ``objects/info/alternates`` of a bare
repository made for the call, so the clone's configuration, hooks, filters and refs are never read, and neither
the machine's nor the user's git configuration is. A clone whose object store (or an alternate of it) lies outside
the roots, and a tree holding a link out of the repository, an absolute path or a device, are refused.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path

from rubricgym.envs.swe.builtin import cache_root

Repos = Mapping[str, str | Path] | str | Path | None
"""Where records' repositories are: a mapping of ``owner/name`` to a clone, a folder of clones, or ``None`` (the
record's ``repo`` is a path inside the current directory)."""


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


def git(git_dir: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
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
        res = git(view, "rev-parse", "--verify", "--quiet", f"{commit}^{{tree}}")
        if res.returncode != 0:
            raise RecordError(f"commit {commit!r} is not in the clone at {repo_path}: fetch it (git fetch --all)")
        tree = res.stdout.decode().strip()
        target = (cache or cache_root() / "swebench") / tree[:24]
        if target.is_dir():
            return target
        res = git(view, "archive", "--format=tar", commit)
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
