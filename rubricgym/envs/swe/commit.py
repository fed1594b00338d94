"""A SWE-bench record from a bug-fix commit of a local git clone (``rubricgym swe record``).

The fix is ``COMMIT`` against its first parent, or the span ``A..B``. Its diff is split by path into the gold
``patch`` (library code) and the ``test_patch`` (files under a ``tests``/``test``/``testing`` folder, ``test_*.py``,
``*_test.py``, ``conftest.py``). The repository's tests then run twice in the sandbox ``swe import`` uses, on the
base commit with the test patch applied, and again with the gold patch as well: ``FAIL_TO_PASS`` are the tests that
pass only after the fix, ``PASS_TO_PASS`` those that pass both times. The problem statement is the commit message
(every commit's, for a span) or a file the user wrote.

As in ``clones``, git runs on an object view of the clone (``object_view``): the clone's configuration, hooks and
filters are never read, and nothing of the repository runs on the host. Branch and tag names are resolved by reading
the clone's ref files, not by running git in it.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from rubricgym.envs.swe.clones import COMMIT_RE, RecordError, git, object_view, snapshot_commit
from rubricgym.envs.swe.deps import DepsInstall, declared_requirements, direct_reference, install_deps_async
from rubricgym.envs.swe.inject import detect_python_path
from rubricgym.envs.swe.sandbox import Limits, SandboxBackend, get_backend
from rubricgym.envs.swe.testrun import TestRun, run_pytest
from rubricgym.envs.swe.verify import apply_patch

TEST_DIRS = frozenset({"tests", "test", "testing"})
REV_RE = re.compile(r"(?P<name>[A-Za-z0-9._/-]+?)(?P<suffix>(?:[~^][0-9]*)*)")
"""A revision as users type it: a commit hash or a ref name, then ``~N`` / ``^N`` steps (``HEAD~2``, ``v1.0^``)."""


def is_test_path(path: str) -> bool:
    """Whether ``path`` belongs to the test patch: under a ``tests``/``test``/``testing`` folder, or a file
    named ``test_*.py``, ``*_test.py`` or ``conftest.py``."""
    p = PurePosixPath(path)
    return (
        any(part in TEST_DIRS for part in p.parts[:-1])
        or (p.name.startswith("test_") and p.suffix == ".py")
        or p.name.endswith("_test.py")
        or p.name == "conftest.py"
    )


@dataclass
class CommitRecord:
    """A recorded fix: the SWE-bench ``record`` and the two test runs it was derived from."""

    record: dict[str, Any]
    before: TestRun
    after: TestRun
    deps: DepsInstall
    notes: list[str] = field(default_factory=list)


def _git_dir(clone: Path) -> Path:
    dot = clone / ".git"
    if dot.is_file():
        text = dot.read_text(errors="replace").strip()
        return (clone / text.removeprefix("gitdir:").strip()).resolve()
    return dot.resolve()


def read_ref(clone: Path, name: str) -> str | None:
    """The commit hash ``name`` (``HEAD``, a branch, a tag, ``refs/...``) points to in the clone at ``clone``, read
    from its ref files (loose refs, then ``packed-refs``; a worktree's ``commondir`` followed), or ``None``."""
    git_dir = _git_dir(clone)
    common = git_dir / "commondir"
    dirs = [git_dir] + ([(git_dir / common.read_text().strip()).resolve()] if common.is_file() else [])
    for _ in range(10):  # symbolic refs (HEAD -> refs/heads/main), a few levels at most
        candidates = (
            [name]
            if name.startswith("refs/") or name == "HEAD"
            else [
                f"refs/heads/{name}",
                f"refs/tags/{name}",
                f"refs/remotes/{name}",
                f"refs/remotes/{name}/HEAD",
            ]
        )
        target: str | None = None
        for d in dirs:
            for c in candidates:
                f = d / c
                if ".." not in PurePosixPath(c).parts and f.is_file():
                    target = f.read_text(errors="replace").strip()
                    break
            if target is None and (d / "packed-refs").is_file():
                for line in (d / "packed-refs").read_text(errors="replace").splitlines():
                    sha, _, ref = line.partition(" ")
                    if ref.strip() in candidates and COMMIT_RE.fullmatch(sha):
                        target = sha
                        break
            if target is not None:
                break
        if target is None:
            return None
        if not target.startswith("ref:"):
            return target if COMMIT_RE.fullmatch(target) else None
        name = target.removeprefix("ref:").strip()
    return None


def resolve(view: Path, clone: Path, rev: str) -> str:
    """The full commit hash of ``rev`` (a hash or a ref name, with ``~N``/``^N`` steps) in the clone."""
    m = REV_RE.fullmatch(rev.strip())
    if not m:
        raise RecordError(f"{rev!r} is not a revision: give a commit hash, a branch or tag name, or HEAD (e.g. HEAD~1)")
    name, suffix = m["name"], m["suffix"]
    sha = read_ref(clone, name)
    if sha is None and COMMIT_RE.fullmatch(name):
        sha = name
    if sha is None:
        raise RecordError(f"{name!r} is neither a commit hash nor a branch or tag of the clone at {clone}")
    res = git(view, "rev-parse", "--verify", "--quiet", f"{sha}{suffix}^{{commit}}")
    if res.returncode != 0:
        raise RecordError(
            f"{rev!r} names no commit of the clone at {clone} (a root commit has no parent: use --fix A..B)"
        )
    return res.stdout.decode().strip()


def _text(view: Path, *args: str) -> str:
    res = git(view, *args)
    if res.returncode != 0:
        raise RecordError(f"git {' '.join(args[:2])} failed: {res.stderr.decode(errors='replace')[-300:]}")
    return res.stdout.decode("utf-8", "surrogateescape")


def diff(view: Path, base: str, fix: str, paths: list[str]) -> str:
    """The diff of ``paths`` from ``base`` to ``fix`` (binary-safe, no external diff or text conversion)."""
    if not paths:
        return ""
    return _text(
        view,
        "--literal-pathspecs",
        "diff",
        "--binary",
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
        "--full-index",
        base,
        fix,
        "--",
        *paths,
    )


def outcomes(run: TestRun) -> dict[str, str]:
    """Test-level outcomes of a run (collection entries, which carry no ``::``, left out)."""
    return {t: o for t, o in run.results.items() if "::" in t}


async def _run_tests(
    backend: SandboxBackend,
    snapshot: Path,
    deps: DepsInstall,
    patches: list[str],
    selectors: list[str],
    python_path: list[str],
    timeout: float,
) -> TestRun:
    async with await backend.create(snapshot, Limits(timeout_s=timeout), deps.path) as sb:
        for patch in patches:
            if patch and (error := await apply_patch(sb, patch)):
                raise RecordError(f"the commit's diff does not apply to its base commit: {error}")
        run = await run_pytest(sb, selectors, python_path, timeout=timeout)
    if not outcomes(run):
        why = run.error or f"pytest exit code {run.exit_code}"
        tail = "\n".join(run.report.strip().splitlines()[-8:])
        raise RecordError(
            f"no test ran ({why}; {run.summary()}): pytest said\n{tail}\n(check the --tests selectors, or that the "
            "project's tests run with pytest)"
        )
    return run


async def record_commit(
    clone: str | Path,
    commit: str | None = None,
    *,
    fix_range: str | None = None,
    problem: str | None = None,
    instance_id: str | None = None,
    repo: str | None = None,
    tests: list[str] | None = None,
    backend: SandboxBackend | None = None,
    wheelhouse: str | Path | None = None,
    index_url: str | None = None,
    extra_requirements: list[str] | None = None,
    timeout: float = 300.0,
    on_stage: Callable[[str], None] | None = None,
) -> CommitRecord:
    """The SWE-bench record of the fix ``commit`` (against its first parent) or ``fix_range`` (``A..B``) of the
    git clone at ``clone`` (see the module docstring).

    ``problem``: the problem statement (default: the commit message(s)); ``repo``: the record's ``repo`` (default:
    the clone folder's name, which ``swe import --repos PARENT`` finds); ``tests``: pytest selectors to run (default:
    the whole suite). Raises ``RecordError`` saying what to change when the commit makes no usable record."""
    say = on_stage or (lambda _: None)
    if (commit is None) == (fix_range is None):
        raise RecordError("give either COMMIT (a bug-fix commit) or --fix A..B (the span from the buggy commit A to B)")
    clone = Path(clone).expanduser().resolve()
    if not (clone / ".git").exists():
        raise RecordError(f"{clone} is not a git clone (no .git in it): give the folder you cloned the project into")
    backend = backend or get_backend("bwrap")
    with tempfile.TemporaryDirectory(prefix="rubricgym-record-") as work:
        view = object_view(clone, [clone], Path(work))
        if fix_range is not None:
            a, sep, b = fix_range.partition("..")
            if not sep or not a or not b or b.startswith("."):
                raise RecordError(f"--fix {fix_range!r} is not a span A..B (e.g. --fix v1.2..fix-branch)")
            base, fix = resolve(view, clone, a), resolve(view, clone, b)
            messages = _text(view, "log", "--format=%B", f"{base}..{fix}")
        else:
            fix = resolve(view, clone, str(commit))
            base = resolve(view, clone, f"{fix}^")
            messages = _text(view, "log", "-1", "--format=%B", fix)
        if base == fix:
            raise RecordError(f"the span {fix_range!r} is empty: A must be the buggy commit and B the fixed one")
        changed = [
            p for p in _text(view, "--literal-pathspecs", "diff", "--name-only", "-z", base, fix).split("\0") if p
        ]
        code = [p for p in changed if not is_test_path(p)]
        test = [p for p in changed if is_test_path(p)]
        if not code:
            raise RecordError(
                f"{fix[:12]} changes only tests ({', '.join(test[:3]) or 'nothing'}): a record needs a fix of library "
                "code; give the commit that fixes the bug, or --fix A..B spanning the fix and its tests"
            )
        patch, test_patch = diff(view, base, fix, code), diff(view, base, fix, test)
        created = _text(view, "log", "-1", "--format=%cI", fix).strip()
    statement = (problem if problem is not None else messages).strip()
    if not statement:
        raise RecordError("the commit message is empty: write the problem statement in a file and pass --problem FILE")
    say(f"unpacking {base[:12]}")
    snapshot = snapshot_commit(clone, base, roots=[clone])
    requirements = sorted(set(declared_requirements(snapshot)) | set(extra_requirements or []))
    refused = [why for r in requirements if (why := direct_reference(r))]
    if refused:
        raise RecordError(f"the repository declares {refused[0]}; refused: install it by name with --with NAME")
    say(f"installing {len(requirements)} test dependencies" if requirements else "no test dependencies declared")
    deps = await install_deps_async(requirements, backend=backend, wheelhouse=wheelhouse, index_url=index_url)
    python_path = detect_python_path(snapshot)
    selectors = list(tests or [])
    say("running the tests before the fix")
    before = await _run_tests(backend, snapshot, deps, [test_patch], selectors, python_path, timeout)
    say("running the tests after the fix")
    after = await _run_tests(backend, snapshot, deps, [test_patch, patch], selectors, python_path, timeout)
    was, now = outcomes(before), outcomes(after)
    f2p = sorted(t for t, o in now.items() if o == "passed" and was.get(t) != "passed")
    p2p = sorted(t for t, o in now.items() if o == "passed" and was.get(t) == "passed")
    if not f2p:
        raise RecordError(
            f"no test fails before {fix[:12]} and passes after it (before: {before.summary()}; after: "
            f"{after.summary()}): the commit's tests do not catch the bug. Add a test that fails on the bug to the "
            "fix, or give --fix A..B spanning the fix and its test"
        )
    notes = []
    broken = sorted(t for t, o in now.items() if o != "passed" and was.get(t) == "passed")
    if broken:
        notes.append(f"{len(broken)} test(s) pass before the fix and not after, left out: {', '.join(broken[:3])}")
    if deps.failed:
        notes.append(f"could not install {', '.join(sorted(deps.failed))}")
    name = repo or clone.name
    record = {
        "instance_id": instance_id or f"{name.replace('/', '__')}-{fix[:12]}",
        "repo": name,
        "base_commit": base,
        "problem_statement": statement + "\n",
        "patch": patch,
        "test_patch": test_patch,
        "FAIL_TO_PASS": f2p,
        "PASS_TO_PASS": p2p,
        "created_at": created,
        "hints_text": "",
        "fix_commit": fix,
    }
    return CommitRecord(record, before, after, deps, notes)
