"""Run a repository's pytest suite inside a sandbox and read per-test outcomes back.

The runner (``pytest_runner``: a clean parent process that starts pytest in a child and collects each outcome
through a private pipe) prints one line, ``SENTINEL KEY JSON``, where ``KEY`` is a one-time secret the host
writes into the repository just before the run and the parent deletes before any tested code starts. Only that
line is trusted, so output the tested code forges is ignored. Nothing else is written into the repository (no
cache dir, no bytecode), and bytecode found there is deleted before the tests run.
"""

from __future__ import annotations

import difflib
import json
import secrets
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from rubricgym.envs.swe import pytest_runner
from rubricgym.envs.swe.sandbox.base import DEPS_DIR, RUNTIME_DIR, WORKDIR, ExecResult, Sandbox, SandboxError

SENTINEL = pytest_runner.SENTINEL
REPORT_TAIL = pytest_runner.REPORT_TAIL
RUNNER = Path(pytest_runner.__file__).read_text()


@dataclass
class TestRun:
    """Per-test outcomes of one pytest run (``results`` maps pytest node ids to outcomes)."""

    exit_code: int
    results: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    report: str = ""
    limit: str | None = None
    duration_s: float = 0.0
    error: str | None = None
    tampering: list[str] = field(default_factory=list)
    """What the runner saw the tested code do to pytest itself (a replaced report class, library code holding
    pytest objects); any entry makes the verdicts untrustworthy."""
    collected: list[str] = field(default_factory=list)
    """The node ids pytest collected, in a ``--collect-only`` run (empty otherwise)."""

    __test__ = False  # not a pytest test class

    def passed(self) -> set[str]:
        return {k for k, v in self.results.items() if v == "passed"}

    def failed(self) -> set[str]:
        return {k for k, v in self.results.items() if v in ("failed", "error")}

    def outcome(self, test_id: str) -> str | None:
        """``test_id``'s outcome, or that of the module or class it lives in when that was skipped whole (its
        tests then never ran); ``None`` when pytest never saw it."""
        if test_id in self.results:
            return self.results[test_id]
        parts = test_id.split("::")
        for n in range(len(parts) - 1, 0, -1):
            if self.results.get("::".join(parts[:n])) == "skipped":
                return "skipped"
        return None

    def skip_reason(self, test_id: str) -> str:
        """Why ``test_id`` (or the module holding it) was skipped, as pytest said it."""
        parts = test_id.split("::")
        for n in range(len(parts), 0, -1):
            if msg := self.messages.get("::".join(parts[:n])):
                return msg
        return ""

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for v in self.results.values():
            counts[v] = counts.get(v, 0) + 1
        return ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no tests ran"


def python_path_env(python_path: list[str]) -> dict[str, str]:
    """``PYTHONPATH``: the repository's import roots (e.g. ``src``), the test runtime, the task's dependencies."""
    roots = [WORKDIR if p in ("", ".") else f"{WORKDIR}/{p.strip('/')}" for p in python_path]
    return {"PYTHONPATH": ":".join([*roots, RUNTIME_DIR, DEPS_DIR])}


def parse_run(res: ExecResult, key: str) -> TestRun:
    """The ``TestRun`` in a runner's output: the line carrying ``key`` (``error`` set when there is none)."""
    marker = f"{SENTINEL} {key} "
    at = res.stdout.rfind(marker)
    if at == -1:
        why = res.limit or f"exit code {res.exit_code}"
        return TestRun(
            exit_code=res.exit_code,
            report=(res.stdout + res.stderr)[-REPORT_TAIL:],
            limit=res.limit,
            duration_s=res.duration_s,
            error=f"the test run produced no results ({why})",
        )
    data = json.loads(res.stdout[at + len(marker) :].partition("\n")[0])
    return TestRun(
        exit_code=int(data["exit"]),
        results=dict(data["results"]),
        messages=dict(data["messages"]),
        report=str(data.get("report", "")),
        limit=res.limit,
        duration_s=res.duration_s,
        error=data.get("error"),
        tampering=[str(t) for t in data.get("tampering", [])],
        collected=[str(t) for t in data.get("collected", [])],
    )


async def run_pytest(
    sandbox: Sandbox,
    selectors: list[str] | None = None,
    python_path: list[str] | None = None,
    timeout: float | None = None,
    watch: list[str] | None = None,
) -> TestRun:
    """Run pytest on ``selectors`` (node ids, files or directories; all tests when empty) in ``sandbox``.

    ``watch``: repository files (the agent's changes) whose modules must not hold pytest machinery at run time.
    """
    key = secrets.token_hex(16)
    key_file = f".rubricgym-key-{secrets.token_hex(6)}"
    try:
        await sandbox.write_file(key_file, key)
    except (SandboxError, ValueError) as e:
        return TestRun(exit_code=-1, error=f"could not start the test run: {e}")
    argv = ["/usr/bin/python3", "-I", "-c", RUNNER, "parent", f"{WORKDIR}/{key_file}", *(selectors or [])]
    env = {
        **python_path_env(python_path or ["."]),
        "RUBRICGYM_RUNNER": RUNNER,
        "RUBRICGYM_WATCH": json.dumps(watch or []),
    }
    res = await sandbox.exec(argv, timeout=timeout, env=env, output_bytes=16 * 1024 * 1024)
    if f"{SENTINEL} {key} " not in res.stdout:  # the parent never started: remove the key
        await sandbox.exec(["/bin/rm", "-f", "--", key_file])
    try:
        return parse_run(res, key)
    except (ValueError, KeyError, TypeError) as e:
        return TestRun(
            exit_code=res.exit_code,
            report=res.stdout[-REPORT_TAIL:],
            limit=res.limit,
            duration_s=res.duration_s,
            error=f"unreadable test results: {e}",
        )


def skip_summary(run: TestRun, tests: list[str], most: int = 3) -> str:
    """The most common skip reasons of ``tests`` in ``run`` (a missing module shows up here), with counts."""
    counts: dict[str, int] = {}
    for t in tests:
        reason = run.skip_reason(t).strip().splitlines()[-1:] or ["no reason given"]
        counts[reason[0][:160]] = counts.get(reason[0][:160], 0) + 1
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:most]
    return "; ".join(f"{n}x {why}" for why, n in top)


def _near(wanted: str, known: list[str], most: int = 3) -> str:
    close = difflib.get_close_matches(wanted, known, n=most, cutoff=0.6)
    return f" (did you mean {', '.join(close)}?)" if close else ""


async def unknown_ids(
    sandbox: Sandbox, ids: list[str], python_path: list[str] | None = None, timeout: float | None = None
) -> dict[str, str]:
    """Which of ``ids`` (pytest node ids that did not run) name no test of the repository: id -> why, with the
    nearest ids pytest does collect (``difflib``).

    One wrong id makes pytest refuse the whole run ("not found"), so the grader asks here which ones are wrong and
    runs the rest. An id whose file is missing, or whose file pytest collects without such a test, is unknown; one
    whose module fails or skips at collection is not (it errors or skips, as a test)."""
    files = list(dict.fromkeys(t.split("::", 1)[0] for t in ids))
    probe = "; ".join(f"[ -f {shlex.quote(f)} ] && printf '%s\\0' {shlex.quote(f)}" for f in files)
    res = await sandbox.exec(f"{probe}; true", timeout=timeout)
    present = [f for f in res.stdout.split("\0") if f in files]
    out: dict[str, str] = {}
    if len(present) < len(files):
        py_files = await _python_files(sandbox)
        for f in files:
            if f not in present:
                hint = "" if f.endswith(".py") else " (a pytest id reads FILE::TEST, e.g. tests/test_x.py::test_y)"
                for t in ids:
                    if t.split("::", 1)[0] == f:
                        out[t] = f"no file {f} in the repository{hint}{_near(f, py_files)}"
    if not present:
        return out
    run = await run_pytest(sandbox, [*present, "--collect-only"], python_path, timeout=timeout)
    known = set(run.collected)
    listed = sorted(known)
    for t in ids:
        f = t.split("::", 1)[0]
        if f not in present or t in known or run.outcome(t) is not None:
            continue
        parts = t.split("::")
        if any(run.results.get("::".join(parts[:n])) for n in range(1, len(parts))):  # its module errs or skips
            continue
        in_file = sum(k.split("::", 1)[0] == f for k in known)
        out[t] = f"{f} has no test {'::'.join(parts[1:])!r} ({in_file} collected there){_near(t, listed)}"
    return out


async def _python_files(sandbox: Sandbox, most: int = 5000) -> list[str]:
    """The repository's ``.py`` files (relative paths, at most ``most``), for near matches of a missing file."""
    res = await sandbox.exec(
        ["/usr/bin/find", ".", "-name", ".git", "-prune", "-o", "-name", "*.py", "-type", "f", "-print"]
    )
    return [p.removeprefix("./") for p in res.stdout.splitlines()[:most]]
