"""Bug-injection task source: AST mutants of a real Python project that its own test suite catches.

From a project directory (a local path or an unpacked PyPI sdist, see ``pypi.fetch_sdist``) the builder runs the
test suite once in a sandbox, then tries mutations of the library code (never the tests), one at a time: a
mutant is kept only if the original passes and the mutant fails at least one originally passing test (and not
more than half of them: a mutant that breaks everything is an import error, not a bug to localise). Each kept
mutant becomes a ``SweInstance`` with FAIL_TO_PASS, PASS_TO_PASS, the gold patch and an issue text written from
the failing tests. Built tasks are cached as JSONL next to their snapshots.

``project`` is a directory, an sdist archive, or a requirement such as ``"six==1.17.0"`` (fetched from PyPI, or
from wherever pip is configured to look, e.g. ``PIP_FIND_LINKS``). Each mutant's test run is bounded by
``timeout_factor`` times the original suite's measured time (at least ``MIN_MUTANT_TIMEOUT_S``), so a hanging
mutant is cut short; ``on_progress`` receives a ``BuildProgress`` after the baseline run and after every mutant.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rubricgym.envs.swe.builtin import cache_root
from rubricgym.envs.swe.deps import declared_requirements, install_deps
from rubricgym.envs.swe.instance import SweInstance
from rubricgym.envs.swe.mutate import Mutation, apply_mutation, find_mutations
from rubricgym.envs.swe.patch import is_test_path
from rubricgym.envs.swe.pypi import fetch_sdist, unpack_sdist
from rubricgym.envs.swe.sandbox import Limits, SandboxBackend, get_backend
from rubricgym.envs.swe.sandbox.treediff import file_diff, walk
from rubricgym.envs.swe.taskfile import load_instances, save_instances
from rubricgym.envs.swe.testrun import TestRun, run_pytest, skip_summary

SKIP_FILES = {"setup.py", "conftest.py", "noxfile.py", "fabfile.py"}
SKIP_DIRS = {"docs", "doc", "examples", "benchmarks", "build", "dist"}
TIMEOUT_FACTOR = 5.0
MIN_MUTANT_TIMEOUT_S = 10.0
_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?\s*((==|>=|<=|~=|!=|<|>)\s*[\w.*+!-]+\s*,?\s*)*$")


class BuildError(RuntimeError):
    """The project cannot be turned into tasks (its tests do not run, no mutant is caught...)."""


@dataclass(frozen=True)
class BuildProgress:
    """Where a build stands: mutants tried (of at most ``max_tries``), kept (of ``n`` wanted), time so far."""

    tried: int
    kept: int
    n: int
    max_tries: int
    elapsed_s: float
    baseline_s: float
    mutant_timeout_s: float
    last: str = ""


def mutant_timeout(baseline_s: float, factor: float = TIMEOUT_FACTOR) -> float:
    """The time limit of one mutant's test run: ``factor`` x the original suite's time, at least a few seconds."""
    return max(MIN_MUTANT_TIMEOUT_S, factor * baseline_s)


def resolve_project(project: str | Path) -> tuple[Path, str]:
    """``(directory, name)`` of a local directory, an sdist archive, or a requirement fetched with pip."""
    p = Path(project).expanduser()
    if p.is_dir():
        return p.resolve(), p.resolve().name
    if p.is_file():
        return unpack_sdist(p), re.split(r"-\d", p.name, maxsplit=1)[0]
    text = str(project).strip()
    if not _REQUIREMENT.match(text):
        raise BuildError(
            f"{project!r} is neither a project directory, an sdist archive nor a requirement; pass a "
            f"path or a requirement such as 'inflection==0.5.1'"
        )
    return fetch_sdist(text), re.split(r"[\[<>=!~ ]", text, maxsplit=1)[0]


def detect_python_path(root: Path) -> list[str]:
    """``["src"]`` for a src layout, else ``["."]``."""
    src = root / "src"
    return ["src"] if src.is_dir() and any(src.glob("*/__init__.py")) or any(src.glob("*.py")) else ["."]


def source_files(root: Path, python_path: list[str]) -> list[str]:
    """Library files that may be mutated: ``.py`` under the import roots, tests and tooling excluded."""
    out = []
    for rel in sorted(walk(str(root))):
        parts = rel.split("/")
        if not rel.endswith(".py") or parts[-1] in SKIP_FILES or is_test_path(rel) or SKIP_DIRS & set(parts[:-1]):
            continue
        if python_path != ["."] and not any(rel.startswith(p.rstrip("/") + "/") for p in python_path):
            continue
        if any(p.startswith(".") or p.endswith(".egg-info") for p in parts[:-1]):
            continue
        out.append(rel)
    return out


def issue_text(name: str, run: TestRun, failing: list[str]) -> str:
    """An issue written from the failing tests: which tests fail and how (no hint of where the bug is)."""
    lines = [f"Some tests of `{name}` fail after a recent change to the library code.", "", "Failing tests:"]
    for t in failing[:5]:
        lines.append(f"- `{t}`")
    if len(failing) > 5:
        lines.append(f"- ... and {len(failing) - 5} more")
    msg = next((run.messages[t] for t in failing if run.messages.get(t)), "")
    if msg:
        lines += ["", "Error output of the first one:", "```", msg.strip()[-600:], "```"]
    lines += ["", "Fix the library so that these tests pass again without breaking the others."]
    return "\n".join(lines)


def _order(mutations: list[Mutation], rng: np.random.Generator) -> list[Mutation]:
    """Mutations interleaved by kind (so a cap on tries still sees every operator), shuffled within kinds."""
    by_kind: dict[str, list[Mutation]] = {}
    for m in mutations:
        by_kind.setdefault(m.kind, []).append(m)
    queues = []
    for kind in sorted(by_kind):
        items = by_kind[kind]
        queues.append([items[i] for i in rng.permutation(len(items))])
    queues = [queues[i] for i in rng.permutation(len(queues))]
    out = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


async def build_tasks(
    project: str | Path,
    name: str | None = None,
    *,
    n: int = 3,
    seed: int = 0,
    max_tries: int = 30,
    backend: SandboxBackend | None = None,
    python_path: list[str] | None = None,
    cache: Path | None = None,
    timeout: float = 120.0,
    timeout_factor: float = TIMEOUT_FACTOR,
    on_progress: Callable[[BuildProgress], None] | None = None,
    wheelhouse: str | Path | None = None,
    index_url: str | None = None,
    extra_requirements: list[str] | None = None,
) -> list[SweInstance]:
    """Up to ``n`` bug-injection tasks from ``project`` (a directory, an sdist or a requirement; cached).

    The project's declared test dependencies (``deps.declared_requirements``) and ``extra_requirements`` are
    installed from ``wheelhouse`` or ``index_url`` (else pip's own configuration) into the tasks' read-only
    dependency folder before the suite runs."""
    root, default_name = await asyncio.to_thread(resolve_project, project)
    name = name or default_name
    python_path = python_path or detect_python_path(root)
    fp = hashlib.sha1(json.dumps(sorted((k, v.st_size) for k, v in walk(str(root)).items())).encode())
    key = f"{name}-{fp.hexdigest()[:10]}"
    base = (cache or cache_root() / "inject") / key
    deps_key = hashlib.sha1(json.dumps([str(wheelhouse or ""), index_url, extra_requirements]).encode())
    index = base / f"tasks-seed{seed}-n{n}-{deps_key.hexdigest()[:8]}.jsonl"
    if index.is_file():
        try:
            return load_instances(index)
        except ValueError:  # a folder it names is gone: build again
            pass
    original = base / "original"
    if not original.is_dir():
        base.mkdir(parents=True, exist_ok=True)
        tmp = base / ".original-tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(root, tmp, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".git"))
        tmp.rename(original)
    requirements = declared_requirements(original) + list(extra_requirements or [])
    deps = await asyncio.to_thread(
        install_deps, requirements, wheelhouse=wheelhouse, index_url=index_url, root=base / "deps"
    )
    backend = backend or get_backend("bwrap")
    sandbox = await backend.create(original, Limits(timeout_s=timeout), deps.path)
    kept: list[SweInstance] = []
    t0 = time.perf_counter()
    tries = 0
    failed_runs: list[str] = []
    try:
        baseline = await run_pytest(sandbox, [], python_path, timeout=timeout)
        passing = baseline.passed()
        if not passing:
            raise BuildError(
                f"{name}: no test passes on the original project ({baseline.error or baseline.summary()})"
                f"\n{baseline.report[-1500:]}"
            )
        limit = mutant_timeout(baseline.duration_s, timeout_factor)

        def report(last: str) -> None:
            if on_progress is not None:
                on_progress(
                    BuildProgress(
                        tries, len(kept), n, max_tries, time.perf_counter() - t0, baseline.duration_s, limit, last
                    )
                )

        skipped = sorted(t for t, o in baseline.results.items() if o == "skipped")
        missing = sorted(deps.failed)
        report(
            f"baseline: {len(passing)} passing tests in {baseline.duration_s:.1f} s"
            + (f", {len(skipped)} skipped in the sandbox ({skip_summary(baseline, skipped)})" if skipped else "")
            + (f"; could not install {', '.join(missing)}" if missing else "")
        )
        rng = np.random.default_rng(seed)
        candidates = [
            m
            for f in source_files(original, python_path)
            for m in find_mutations(f, (original / f).read_text(errors="replace"))
        ]
        for m in _order(candidates, rng):
            if len(kept) >= n or tries >= max_tries:
                break
            text = (original / m.path).read_text()
            try:
                mutant = apply_mutation(text, m)
            except SyntaxError:
                continue
            tries += 1
            await sandbox.write_file(m.path, mutant)
            run = await run_pytest(sandbox, [], python_path, timeout=limit)
            await sandbox.write_file(m.path, text)
            if run.error or run.limit:
                failed_runs.append(run.limit or run.error or "no result")
                report(f"{m.path}:{m.line} {m.kind}: {run.limit or 'no result'}")
                continue
            now_passing = run.passed()
            f2p = sorted(passing - now_passing)
            p2p = sorted(passing & now_passing)
            if not f2p or len(f2p) > len(passing) / 2:
                report(f"{m.path}:{m.line} {m.kind}: " + ("not caught" if not f2p else "breaks too much"))
                continue
            digest = hashlib.sha1(f"{m.path}:{m.start}:{m.end}:{m.replacement}".encode()).hexdigest()[:8]
            iid = f"{name}__{m.kind}-{digest}"
            snap = base / iid
            if not snap.is_dir():
                tmp = base / f".{iid}-tmp"
                shutil.rmtree(tmp, ignore_errors=True)
                shutil.copytree(original, tmp, symlinks=True)
                (tmp / m.path).write_text(mutant)
                tmp.rename(snap)
            kept.append(
                SweInstance(
                    instance_id=iid,
                    repo=name,
                    base_commit=key,
                    problem_statement=issue_text(name, run, f2p),
                    patch=file_diff(m.path, mutant.encode(), text.encode()),
                    FAIL_TO_PASS=f2p,
                    PASS_TO_PASS=p2p,
                    snapshot=str(snap),
                    deps=str(deps.path) if deps.path else None,
                    python_path=python_path,
                    source="inject",
                    details={"kind": m.kind, "file": m.path, "line": m.line, "mutation": m.description},
                )
            )
            report(f"{m.path}:{m.line} {m.kind}: kept ({len(f2p)} failing)")
    finally:
        await sandbox.destroy()
    if not kept:
        why = (
            f"; {len(failed_runs)} test run(s) gave no result (e.g. {failed_runs[0][:300]}): a timeout means the "
            f"suite's time varies, so raise --timeout-factor"
            if failed_runs
            else ""
        )
        raise BuildError(f"{name}: none of {tries} mutants was caught by the test suite{why}")
    save_instances(kept, index, data=base)  # snapshots and deps already live beside the index
    return kept
