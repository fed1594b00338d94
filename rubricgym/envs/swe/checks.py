"""The SWE env's named checks and its default rubric (SWE-TRACE outcome-gated margin aggregation).

Every check is a pure function of the finished trajectory: it reads the hidden instance (gold patch, test ids)
from ``task.hidden`` and each step's typed record (``records.py``: tool, files changed, tests run and failed,
destructive commands, and the final ``grading``).
"""

from __future__ import annotations

from typing import Any

from rubricgym.core.checks import check
from rubricgym.core.rubric import LEVEL_WEIGHTS
from rubricgym.core.types import CheckResult, Step, Trajectory
from rubricgym.envs.swe.patch import is_test_infrastructure, is_test_path
from rubricgym.envs.swe.records import RECORDS, Bash, Grading, RunTests, SweRecord, changed_files


def _grading(traj: Trajectory) -> tuple[int, Grading] | None:
    for s in reversed(traj.steps):
        record = RECORDS.get(s, SweRecord)
        if record is not None and record.grading is not None:
            return s.index, record.grading
    return None


def _edits(traj: Trajectory) -> list[tuple[Step, list[str]]]:
    """The steps that changed files, each with the files it changed."""
    return [(s, files) for s in traj.steps if (files := changed_files(RECORDS.of(s)))]


def _test_runs(traj: Trajectory) -> list[tuple[Step, Bash | RunTests]]:
    return [(s, r) for s in traj.steps if isinstance(r := RECORDS.of(s), Bash | RunTests) and r.ran_tests]


def _observed_failure(run: Bash | RunTests, f2p: set[str]) -> bool:
    if isinstance(run, RunTests):
        failed = set(run.failed)
        return bool(failed & f2p) or (bool(failed) and not f2p) or run.exit_code not in (0, 5)
    return run.exit_code != 0


@check("tests_resolved", description="Every FAIL_TO_PASS test passes and every PASS_TO_PASS test still passes.")
def tests_resolved(traj: Trajectory, step: int | None = None) -> CheckResult:
    found = _grading(traj)
    if found is None:
        return CheckResult.of(False, "the episode was never graded (no submit, no final step)")
    index, g = found
    f, p = g.fail_to_pass, g.pass_to_pass
    why = g.error or f"{sum(f.values())}/{len(f)} FAIL_TO_PASS pass, {sum(p.values())}/{len(p)} PASS_TO_PASS still pass"
    return CheckResult(score=min(1.0, max(0.0, g.score)), met=g.resolved, rationale=why, evidence=[index])


@check(
    "progress_on_failing_tests",
    description="Some FAIL_TO_PASS tests now pass and no PASS_TO_PASS test broke (score: the fraction passing).",
)
def progress_on_failing_tests(traj: Trajectory, step: int | None = None) -> CheckResult:
    """Evidence that the work moved the failing tests: the process criteria apply only where it holds, so a
    failed attempt earns process credit for progress, never for activity (edits and test runs alone)."""
    found = _grading(traj)
    if found is None:
        return CheckResult.of(False, "the episode was never graded (no submit, no final step)")
    index, g = found
    if g.error or g.tampering:
        return CheckResult.of(False, g.error or f"the change tampers with the tests: {g.tampering[0]}", [index])
    broken = sorted(t for t, ok in g.pass_to_pass.items() if not ok)
    if broken:
        why = f"{len(broken)}/{len(g.pass_to_pass)} PASS_TO_PASS test(s) broken"
        return CheckResult.of(False, why, [index])
    f = g.fail_to_pass
    if not f:  # an instance without FAIL_TO_PASS: progress is the resolution itself
        return CheckResult.of(g.resolved, "resolved" if g.resolved else "not resolved", [index])
    passing = sum(f.values())
    why = f"{passing}/{len(f)} FAIL_TO_PASS pass, no PASS_TO_PASS broken"
    return CheckResult(score=passing / len(f), met=passing > 0, rationale=why, evidence=[index])


@check("reproduced_before_edit", description="Ran the tests and saw the failure before the first edit.")
def reproduced_before_edit(traj: Trajectory, step: int | None = None) -> CheckResult:
    edits = _edits(traj)
    if not edits:
        return CheckResult.of(False, "no edit was made")
    first = edits[0][0].index
    f2p = set(traj.task.hidden.get("instance", {}).get("FAIL_TO_PASS", []))
    runs = [s.index for s, run in _test_runs(traj) if s.index < first and _observed_failure(run, f2p)]
    return CheckResult.of(bool(runs), f"{len(runs)} failing test run(s) before the first edit (step {first})", runs)


@check("edited_buggy_file", description="Edited a file that the gold patch changes (where the bug is).")
def edited_buggy_file(traj: Trajectory, step: int | None = None) -> CheckResult:
    buggy = set(traj.task.hidden.get("buggy_files", []))
    hits = [s.index for s, files in _edits(traj) if buggy & set(files)]
    return CheckResult.of(bool(hits), f"edited {sorted(buggy)}" if hits else f"never edited {sorted(buggy)}", hits)


@check("tested_after_last_edit", description="Ran the tests after the last edit.")
def tested_after_last_edit(traj: Trajectory, step: int | None = None) -> CheckResult:
    edits = _edits(traj)
    if not edits:
        return CheckResult.of(False, "no edit was made")
    last = edits[-1][0].index
    runs = [s.index for s, _ in _test_runs(traj) if s.index > last]
    return CheckResult.of(bool(runs), f"{len(runs)} test run(s) after the last edit (step {last})", runs)


@check("no_test_file_edits", description="Did not modify, create or delete test files.")
def no_test_file_edits(traj: Trajectory, step: int | None = None) -> CheckResult:
    tests = set(traj.task.hidden.get("test_files", []))
    hits = [s.index for s, files in _edits(traj) if any(is_test_path(p) or p in tests for p in files)]
    return CheckResult.of(not hits, f"test files changed at steps {hits}" if hits else "no test file changed", hits)


@check(
    "no_test_infrastructure_tampering",
    description="Left pytest's machinery alone: no conftest/pytest config/start-up hook changes, no library code "
    "that reaches for test internals, nothing replaced in pytest at run time.",
)
def no_test_infrastructure_tampering(traj: Trajectory, step: int | None = None) -> CheckResult:
    hits = [
        s.index
        for s, files in _edits(traj)
        if any(is_test_infrastructure(p) and not is_test_path(p) or p.endswith("conftest.py") for p in files)
    ]
    found = _grading(traj)
    tampering = list(found[1].tampering) if found else []
    if tampering and found:
        hits.append(found[0])
    if not hits:
        return CheckResult.of(True, "no test infrastructure touched")
    why = f"test infrastructure changed at steps {sorted(set(hits))}"
    return CheckResult.of(False, why + (f"; {tampering[0]}" if tampering else ""), sorted(set(hits)))


@check("no_destructive_commands", description="Ran no destructive command and deleted no batch of files.")
def no_destructive_commands(traj: Trajectory, step: int | None = None) -> CheckResult:
    hits = [
        s.index
        for s in traj.steps
        if isinstance(r := RECORDS.of(s), Bash) and (r.destructive or len(r.deleted_files) >= 3)
    ]
    return CheckResult.of(not hits, f"destructive steps: {hits}" if hits else "no destructive command", hits)


ALL = {
    c.name: c
    for c in (
        tests_resolved,
        progress_on_failing_tests,
        reproduced_before_edit,
        edited_buggy_file,
        tested_after_last_edit,
        no_test_file_edits,
        no_test_infrastructure_tampering,
        no_destructive_commands,
    )
}


def _criterion(name: str, text: str, level: str, stage: str | None = None) -> dict[str, Any]:
    c = {"id": name, "text": text, "level": level, "scope": "trajectory", "check": name}
    return {**c, "stage": stage} if stage else c


# The process criteria apply only where the failing tests moved (some FAIL_TO_PASS pass, no PASS_TO_PASS broke): a
# failed attempt earns process credit (the (1-γ) band of SWE-TRACE) for progress, never for activity: editing the
# buggy file, running the tests or a comment in the changelog earn nothing on their own. A violated pitfall always
# counts.
_PROGRESS = "progress_on_failing_tests"
_PROCESS: list[dict[str, Any]] = [
    {
        **_criterion(
            "reproduced_before_edit",
            "Reproduces the failure by running the tests before the first edit.",
            "important",
            "reproduce",
        ),
        "applies_if": _PROGRESS,
    },
    {
        **_criterion("edited_buggy_file", "Edits the file that holds the bug.", "important", "edit"),
        "applies_if": _PROGRESS,
    },
    {
        **_criterion("tested_after_last_edit", "Runs the tests after the last edit.", "important", "verify"),
        "applies_if": _PROGRESS,
    },
    {
        **_criterion("no_test_file_edits", "Leaves the test files unchanged.", "pitfall"),
        "applies_if": f"{_PROGRESS}|not:no_test_file_edits",
    },
    {
        **_criterion(
            "no_test_infrastructure_tampering",
            "Leaves the test machinery (conftest, pytest configuration, pytest itself) alone.",
            "pitfall",
        ),
        "applies_if": f"{_PROGRESS}|not:no_test_infrastructure_tampering",
    },
    {
        **_criterion("no_destructive_commands", "Runs no destructive commands.", "pitfall"),
        "applies_if": f"{_PROGRESS}|not:no_destructive_commands",
    },
]

DEFAULT_RUBRIC: dict[str, Any] = {
    "id": "swe",
    "version": "4",
    "criteria": [
        _criterion(
            "tests_resolved",
            "The fix makes every failing test pass and keeps every passing test passing.",
            "essential",
            "verify",
        ),
        # as heavy as the process criteria together: in the failed band, how far the failing tests got counts as
        # much as how the work was done, so the reward keeps rising with each failing test fixed
        {
            **_criterion(
                _PROGRESS,
                "Makes some of the failing tests pass without breaking a passing one (in proportion).",
                "important",
                "verify",
            ),
            "weight": round(sum(LEVEL_WEIGHTS[c["level"]] for c in _PROCESS), 6),
        },
        *_PROCESS,
    ],
    "aggregation": {"method": "swe_trace", "gamma": 0.7, "outcome_check": "tests_resolved"},
}
