"""Run a repository's pytest suite inside a sandbox and read per-test outcomes back.

The runner script is passed to the sandbox's Python with ``-c``: it runs ``pytest.main`` with a tiny plugin
that records each test's outcome (``passed``, ``failed``, ``error``, ``skipped``) and a short failure message,
then prints one JSON line first and a tail of pytest's own report after it, so the results survive any output
cap. Nothing is written into the repository (no cache dir, no bytecode).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from rubricgym.envs.swe.sandbox.base import RUNTIME_DIR, WORKDIR, ExecResult, Sandbox

SENTINEL = "@@RUBRICGYM_PYTEST@@"
REPORT_TAIL = 12_000
RUNNER = r"""
import contextlib, io, json, sys
import pytest
results, messages = {}, {}
RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
class Recorder:
    def pytest_runtest_logreport(self, report):
        if report.when == "call":
            outcome = report.outcome
        elif report.failed:
            outcome = "error"
        elif report.skipped and report.when == "setup":
            outcome = "skipped"
        elif report.nodeid not in results and report.when == "setup":
            return
        else:
            return
        if RANK[outcome] >= RANK.get(results.get(report.nodeid), -1):
            results[report.nodeid] = outcome
            if outcome in ("failed", "error"):
                text = (getattr(report, "longreprtext", "") or "").strip().splitlines()
                messages[report.nodeid] = "\n".join(text[-6:])[-600:]
    def pytest_collectreport(self, report):
        if report.failed:
            results[report.nodeid or "<collection>"] = "error"
            text = (getattr(report, "longreprtext", "") or "").strip().splitlines()
            messages[report.nodeid or "<collection>"] = "\n".join(text[-6:])[-600:]
buf = io.StringIO()
args = ["-p", "no:cacheprovider", "-o", "addopts=", "--rootdir=/work", "-q", "-rfE", "--tb=short",
        "--color=no", "-W", "ignore::DeprecationWarning", *sys.argv[1:]]
with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
    try:
        code = int(pytest.main(args, plugins=[Recorder()]))
    except BaseException as e:
        print(f"pytest crashed: {type(e).__name__}: {e}")
        code = 3
sys.stdout.write(SENTINEL + json.dumps({"exit": code, "results": results, "messages": messages}) + "\n")
sys.stdout.write(buf.getvalue()[-TAIL:])
""".replace("SENTINEL", repr(SENTINEL)).replace("TAIL", str(REPORT_TAIL))


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

    __test__ = False  # not a pytest test class

    def passed(self) -> set[str]:
        return {k for k, v in self.results.items() if v == "passed"}

    def failed(self) -> set[str]:
        return {k for k, v in self.results.items() if v in ("failed", "error")}

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for v in self.results.values():
            counts[v] = counts.get(v, 0) + 1
        return ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no tests ran"


def python_path_env(python_path: list[str]) -> dict[str, str]:
    """``PYTHONPATH`` that puts the test runtime and the repository's import roots (e.g. ``src``) first."""
    roots = [WORKDIR if p in ("", ".") else f"{WORKDIR}/{p.strip('/')}" for p in python_path]
    return {"PYTHONPATH": ":".join([*roots, RUNTIME_DIR])}


def parse_run(res: ExecResult) -> TestRun:
    """The ``TestRun`` in a runner's output (``error`` set when the runner could not report)."""
    head, sep, rest = res.stdout.partition(SENTINEL)
    if not sep:
        why = res.limit or f"exit code {res.exit_code}"
        return TestRun(exit_code=res.exit_code, report=(res.stdout + res.stderr)[-REPORT_TAIL:], limit=res.limit,
                       duration_s=res.duration_s, error=f"the test run produced no results ({why})")
    line, _, report = rest.partition("\n")
    data = json.loads(line)
    return TestRun(exit_code=data["exit"], results=data["results"], messages=data["messages"],
                   report=head + report, limit=res.limit, duration_s=res.duration_s)


async def run_pytest(sandbox: Sandbox, selectors: list[str] | None = None, python_path: list[str] | None = None,
                     timeout: float | None = None) -> TestRun:
    """Run pytest on ``selectors`` (node ids, files or directories; all tests when empty) in ``sandbox``."""
    argv = ["/usr/bin/python3", "-c", RUNNER, *(selectors or [])]
    res = await sandbox.exec(argv, timeout=timeout, env=python_path_env(python_path or ["."]),
                             output_bytes=16 * 1024 * 1024)
    try:
        return parse_run(res)
    except (ValueError, KeyError) as e:
        return TestRun(exit_code=res.exit_code, report=res.stdout[-REPORT_TAIL:], limit=res.limit,
                       duration_s=res.duration_s, error=f"unreadable test results: {e}")
