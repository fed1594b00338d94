"""Graded hints for a repository task whose group of attempts all failed (``SweEnv.guidance``).

Each level keeps the ones below it and adds more localisation, never any of the fix:

1. the failing test: a FAIL_TO_PASS test to run first (or, when the graders' test patch adds or changes that
   test's file, that the test may be missing from the checkout, so the agent writes its own reproduction);
2. the file to edit: the library files the gold patch touches;
3. where in that file: the line ranges of the gold patch's hunks in the buggy file.

The gold patch's and the test patch's content (``SweEnv.secrets``) never appear: a hint says where to work and
what must pass, not what to write.
"""

from __future__ import annotations

from rubricgym.envs.swe.instance import SweInstance
from rubricgym.envs.swe.patch import is_test_path, parse_patch, patch_files

LEVELS = 3


def _code(text: str) -> str:
    return f"`{text}`"


def failing_test(inst: SweInstance) -> str:
    """Level 1: the first FAIL_TO_PASS test, and whether the checkout has it."""
    if not inst.FAIL_TO_PASS:
        return "Start by running the tests with run_tests: the ones that fail show the bug."
    first, others = inst.FAIL_TO_PASS[0], len(inst.FAIL_TO_PASS) - 1
    more = f" ({others} more graded test{'s' if others > 1 else ''} fail{'' if others > 1 else 's'} the same way)"
    more = more if others else ""
    if first.split("::")[0] in patch_files(inst.test_patch):
        return (
            f"The graders check the fix with {_code(first)}{more}; they add or update that test when grading, so "
            "your checkout may not have it: reproduce what the issue describes with a small test of your own first."
        )
    return (
        f"Start by running the failing test: call run_tests with the selector {_code(first)}{more}. It fails now "
        "and must pass after your fix, with the other tests still passing."
    )


def files_to_edit(inst: SweInstance) -> list[str]:
    """The library (non-test) files the gold patch touches, in patch order."""
    return [p for p in patch_files(inst.patch) if not is_test_path(p)]


def file_to_edit(inst: SweInstance) -> str:
    """Level 2's addition: the file (or files) to edit."""
    files = files_to_edit(inst)
    if not files:
        return "The fix belongs in the library code, not in the tests."
    named = " and ".join(_code(f) for f in files[:3]) + (f" (and {len(files) - 3} more)" if len(files) > 3 else "")
    return f"The fix belongs in {named}: read that code, edit it there and leave the tests alone."


def where_in_the_file(inst: SweInstance) -> str:
    """Level 3's addition: the line ranges of the gold patch's hunks in the first file to edit (as the agent's
    checkout numbers them)."""
    files = files_to_edit(inst)
    fp = next((f for f in parse_patch(inst.patch) if files and f.path == files[0]), None)
    if fp is None or not fp.hunks or fp.is_new:
        return "Compare what the code does with what the failing test expects, and change only what differs."
    spans = [(h.old_start, h.old_start + max(len(h.old), 1) - 1) for h in fp.hunks]
    ranges = [f"{a}-{b}" if b > a else f"{a}" for a, b in spans[:4]]
    where = ", ".join(ranges[:-1]) + " and " + ranges[-1] if len(ranges) > 1 else ranges[0]
    places = "one place" if len(spans) == 1 else f"{len(spans)} places"
    return (
        f"Look at lines {where} of {_code(fp.path)}: the fix changes {places} there (compare what that code does "
        "with what the failing test expects)."
    )


def hint(inst: SweInstance, level: int) -> str | None:
    """The hint at ``level`` (1..``LEVELS``, each level keeping the ones below), ``None`` beyond."""
    if not 1 <= level <= LEVELS:
        return None
    parts = [failing_test(inst)]
    if level >= 2:
        parts.append(file_to_edit(inst))
    if level >= 3:
        parts.append(where_in_the_file(inst))
    return " ".join(parts)
