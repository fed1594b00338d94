"""Check a task before anyone trains on it: the gold patch resolves FAIL_TO_PASS and PASS_TO_PASS hold, in the sandbox.

A SWE-bench record's test lists were computed in the authors' environment; the sandbox may differ (a missing
dependency skips tests, a test id may not be a pytest node id, a patch may not apply to the snapshot). So each
task is graded twice with the env's own grader: untouched (what doing nothing earns; FAIL_TO_PASS must not
already pass) and with the gold patch applied (what the oracle earns; everything must pass). Tests the sandbox
skips are reported with pytest's reason, since the record says they ran where it was made.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from rubricgym.envs.swe.grading import Grade, grade
from rubricgym.envs.swe.instance import SweInstance
from rubricgym.envs.swe.sandbox import Limits, Sandbox, SandboxBackend

GOLD_FILE = ".rubricgym_gold.patch"


@dataclass
class Verdict:
    """Whether a task is usable, and what each check found."""

    instance_id: str
    problems: list[str] = field(default_factory=list)
    """Why the task cannot be used as it is (empty when it can)."""
    notes: list[str] = field(default_factory=list)
    """Worth knowing but not disqualifying (a dependency that did not install while the tests still pass)."""
    do_nothing: float | None = None
    """The graded score of the untouched repository (0 for a good task)."""
    gold: float | None = None
    """The graded score with the gold patch applied (1 for a good task)."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Graded tests the sandbox skipped -> pytest's reason."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def line(self) -> str:
        """One line for a terminal: the verdict, the two scores and the first problem or note."""
        scores = (
            f" (do-nothing {self.do_nothing:.2f}, gold {self.gold:.2f})"
            if self.do_nothing is not None and self.gold is not None
            else ""
        )
        head = "verified" if self.ok else "rejected"
        why = "; ".join(self.problems[:2] + self.notes[:1])
        return f"{self.instance_id}: {head}{scores}" + (f": {why}" if why else "")


def _listed(tests: dict[str, str], reasons: dict[str, str], most: int = 3) -> str:
    parts = []
    for t, outcome in list(tests.items())[:most]:
        if outcome == "skipped":
            outcome = f"skipped in the sandbox: {reasons.get(t, '').strip()[-120:] or 'no reason given'}"
        elif outcome == "not run":
            outcome = "not run: no such pytest test"
        parts.append(f"{t} ({outcome})")
    more = f" and {len(tests) - most} more" if len(tests) > most else ""
    return ", ".join(parts) + more


def judge(inst: SweInstance, before: Grade, after: Grade | None, apply_error: str | None) -> Verdict:
    """The verdict from the untouched grade ``before`` and the gold grade ``after`` (pure, for tests)."""
    v = Verdict(inst.instance_id, do_nothing=before.score, gold=after.score if after else None)
    for g in (before, after):
        if g is not None:
            v.skipped.update({t: g.skip_reasons.get(t, "") for t, o in g.outcomes.items() if o == "skipped"})
    if apply_error:
        v.problems.append(f"the gold patch does not apply to the snapshot: {apply_error}")
    if before.error:
        v.problems.append(f"grading the untouched repository failed: {before.error}")
    free = [t for t, ok in before.fail_to_pass.items() if ok]
    if free:
        v.problems.append(f"{len(free)} FAIL_TO_PASS test(s) already pass without the fix: {', '.join(free[:3])}")
    if after is not None:
        if after.error:
            v.problems.append(f"grading the gold patch failed: {after.error}")
        if after.tampering:
            v.problems.append(f"the grader reads the gold patch as test tampering: {'; '.join(after.tampering[:2])}")
        for name, results in (("FAIL_TO_PASS", after.fail_to_pass), ("PASS_TO_PASS", after.pass_to_pass)):
            wrong = {t: after.unknown[t] for t in results if t in after.unknown}
            if wrong:
                shown = "; ".join(f"{t!r}: {why}" for t, why in list(wrong.items())[:3])
                more = f" and {len(wrong) - 3} more" if len(wrong) > 3 else ""
                v.problems.append(
                    f"{len(wrong)} {name} id(s) name no test of the repository: {shown}{more}; fix the id(s) in the "
                    f"record's {name} list (the other {len(results) - len(wrong)} were run and graded)"
                )
            bad = {t: after.outcomes.get(t, "not run") for t, ok in results.items() if not ok and t not in wrong}
            if bad and not after.error:
                v.problems.append(
                    f"with the gold patch {len(bad)}/{len(results)} {name} test(s) do not pass: "
                    + _listed(bad, after.skip_reasons)
                )
    if v.skipped and v.ok:
        listed = _listed(dict.fromkeys(v.skipped, "skipped"), v.skipped)
        v.notes.append(f"{len(v.skipped)} graded test(s) skip in the sandbox: {listed}")
    return v


async def apply_patch(sandbox: Sandbox, patch: str) -> str | None:
    """Apply ``patch`` in ``sandbox`` with ``git apply`` (``patch -p1`` as fallback); the error text, or None."""
    await sandbox.write_file(GOLD_FILE, patch)
    res = await sandbox.exec(
        f"git apply --whitespace=nowarn {GOLD_FILE} || patch -p1 --forward --batch < {GOLD_FILE}; "
        f"code=$?; rm -f {shlex.quote(GOLD_FILE)}; exit $code"
    )
    return None if res.exit_code == 0 else (res.stdout + res.stderr).strip()[-300:] or f"exit {res.exit_code}"


async def verify_instance(inst: SweInstance, backend: SandboxBackend, timeout: float = 300.0) -> Verdict:
    """Grade ``inst`` untouched and with its gold patch, each in a fresh sandbox (see the module docstring)."""
    deps = Path(inst.deps) if inst.deps else None
    limits = Limits(timeout_s=timeout)
    async with await backend.create(Path(inst.snapshot), limits, deps) as sb:
        before = await grade(sb, inst, timeout=timeout)
    after: Grade | None = None
    async with await backend.create(Path(inst.snapshot), limits, deps) as sb:
        error = await apply_patch(sb, inst.patch)
        if error is None:
            after = await grade(sb, inst, timeout=timeout)
    return judge(inst, before, after, error)
