"""Grade a finished episode: run FAIL_TO_PASS and PASS_TO_PASS on the agent's final repository.

Before the tests run, test files and test infrastructure the agent changed (``conftest.py``, pytest/tox
configuration, ``sitecustomize.py``, ``*.pth``, modules named like pytest's own) are restored from the snapshot
and those it created are removed, then the instance's ``test_patch`` is applied, as SWE-bench does. The tests run
in a child of a clean runner process that reports through a private channel (``pytest_runner``). Library code
that reaches for test machinery (imports pytest internals, rewrites reports, exits at import) and pytest
machinery found replaced at run time are tampering: the grade is then 0 whatever the tests say. The score is
``frac(FAIL_TO_PASS passing) * frac(PASS_TO_PASS passing)``: 1 when resolved, 0 for an untouched repository,
partial credit in between.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from rubricgym.envs.swe.instance import SweInstance
from rubricgym.envs.swe.patch import is_test_infrastructure, patch_files, tampering_lines
from rubricgym.envs.swe.records import Grading
from rubricgym.envs.swe.sandbox.base import Sandbox, SandboxPathError
from rubricgym.envs.swe.sandbox.treediff import walk
from rubricgym.envs.swe.testrun import TestRun, run_pytest, unknown_ids

PATCH_FILE = ".rubricgym_test.patch"


@dataclass
class Grade:
    fail_to_pass: dict[str, bool] = field(default_factory=dict)
    pass_to_pass: dict[str, bool] = field(default_factory=dict)
    model_patch: str = ""
    restored_tests: list[str] = field(default_factory=list)
    tampering: list[str] = field(default_factory=list)
    error: str | None = None
    outcomes: dict[str, str] = field(default_factory=dict)
    """Each graded test's outcome (``passed``, ``failed``, ``error``, ``skipped``, ``not run``); not recorded."""
    skip_reasons: dict[str, str] = field(default_factory=dict)
    """Why each skipped graded test was skipped, as pytest said it (a missing module shows up here)."""
    unknown: dict[str, str] = field(default_factory=dict)
    """Graded ids that name no test of the repository -> why, with near matches (they count as not passing;
    the other tests are run and graded as usual)."""

    @property
    def f2p_fraction(self) -> float:
        return sum(self.fail_to_pass.values()) / len(self.fail_to_pass) if self.fail_to_pass else 1.0

    @property
    def p2p_fraction(self) -> float:
        return sum(self.pass_to_pass.values()) / len(self.pass_to_pass) if self.pass_to_pass else 1.0

    @property
    def resolved(self) -> bool:
        return (
            self.error is None
            and not self.tampering
            and all(self.fail_to_pass.values())
            and all(self.pass_to_pass.values())
        )

    @property
    def score(self) -> float:
        return 0.0 if self.error or self.tampering else self.f2p_fraction * self.p2p_fraction

    def to_record(self) -> Grading:
        """The grading as the episode's last step records it."""
        return Grading(
            resolved=self.resolved,
            score=self.score,
            fail_to_pass=self.fail_to_pass,
            pass_to_pass=self.pass_to_pass,
            model_patch=self.model_patch,
            restored_tests=self.restored_tests,
            tampering=self.tampering,
            error=self.error,
        )

    def describe(self) -> str:
        if self.error:
            return f"Grading failed: {self.error}"
        if self.tampering:
            return (
                "Resolved: no. Graded 0: the change tampers with the test machinery ("
                + "; ".join(self.tampering[:3])
                + ")."
            )
        f, p = self.fail_to_pass, self.pass_to_pass
        return (
            f"Resolved: {'yes' if self.resolved else 'no'}. Failing tests now passing: "
            f"{sum(f.values())}/{len(f)}; previously passing tests still passing: {sum(p.values())}/{len(p)}."
        )


def _plugin_code(snapshot: Path, finding: str) -> bool:
    """A pytest finding in a file that already used pytest (the repository is a pytest plugin): not tampering."""
    path, _, why = finding.partition(": ")
    if "pytest" not in why:
        return False
    original = snapshot / path
    try:
        return original.is_file() and "pytest" in original.read_text(errors="replace")
    except OSError:
        return False


async def grade(sandbox: Sandbox, inst: SweInstance, timeout: float = 300.0) -> Grade:
    """Restore tests and test infrastructure, apply the test patch, run the instance's tests; the sandbox is
    changed for good."""
    out = Grade(model_patch=await sandbox.diff())
    snapshot = Path(inst.snapshot)
    out.tampering = [t for t in tampering_lines(out.model_patch, inst.test_files) if not _plugin_code(snapshot, t)]
    touched = set(patch_files(out.model_patch))
    if "# diff truncated at" in out.model_patch[-20000:]:  # names past the cap: check every infrastructure file
        touched |= set(await sandbox.fingerprint()) | set(walk(str(snapshot)))
    created: list[str] = []
    for path in sorted(touched):
        if not is_test_infrastructure(path) and path not in inst.test_files:
            continue
        original = snapshot / path
        if original.is_file() and not original.is_symlink():
            try:
                await sandbox.write_file(path, original.read_bytes())
            except SandboxPathError:  # replaced by a folder or a link: remove it, then restore
                await sandbox.exec(["/bin/rm", "-rf", "--", path])
                try:
                    await sandbox.write_file(path, original.read_bytes())
                except SandboxPathError as e:
                    out.error = f"could not restore {path}: {e}"
                    return out
            out.restored_tests.append(path)
        elif not original.exists():
            created.append(path)
    if created:
        await sandbox.exec(["/bin/rm", "-rf", "--", *created])
        out.restored_tests += created
    if inst.test_patch:
        await sandbox.write_file(PATCH_FILE, inst.test_patch)
        res = await sandbox.exec(
            f"git apply --whitespace=nowarn {PATCH_FILE} || patch -p1 --forward --batch < "
            f"{PATCH_FILE}; code=$?; rm -f {shlex.quote(PATCH_FILE)}; exit $code"
        )
        if res.exit_code != 0:
            out.error = f"the test patch did not apply: {(res.stdout + res.stderr)[-400:]}"
            return out
    ids = list(dict.fromkeys(inst.FAIL_TO_PASS + inst.PASS_TO_PASS))
    watch = [p for p in patch_files(out.model_patch) if p.endswith(".py") and not is_test_infrastructure(p)]
    run = await run_pytest(sandbox, ids, inst.python_path, timeout=timeout, watch=watch[:200])
    unrun = [t for t in ids if run.outcome(t) is None]
    if unrun and not run.limit:  # one wrong id makes pytest run nothing: name it, run the others
        out.unknown = await unknown_ids(sandbox, unrun, inst.python_path, timeout=timeout)
        rest = [t for t in unrun if t not in out.unknown]
        if out.unknown and rest:
            run = _merged(run, await run_pytest(sandbox, rest, inst.python_path, timeout=timeout, watch=watch[:200]))
    out.tampering += [t for t in run.tampering if not _plugin_code(snapshot, t)]
    if run.error and not run.results and len(out.unknown) < len(ids):
        out.error = run.error
    passed = run.passed()
    out.outcomes = {t: "unknown" if t in out.unknown else run.outcome(t) or "not run" for t in ids}
    out.skip_reasons = {t: run.skip_reason(t) for t, o in out.outcomes.items() if o == "skipped"}
    out.fail_to_pass = {t: t in passed for t in inst.FAIL_TO_PASS}
    out.pass_to_pass = {t: t in passed for t in inst.PASS_TO_PASS}
    return out


def _merged(first: TestRun, second: TestRun) -> TestRun:
    """``second``'s outcomes over ``first``'s (a rerun of the ids ``first`` never ran)."""
    first.results.update(second.results)
    first.messages.update(second.messages)
    first.tampering += second.tampering
    first.error = second.error
    first.limit = second.limit
    first.report = second.report
    return first
