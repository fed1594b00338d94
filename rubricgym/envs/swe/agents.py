"""Scripted agents for ``swe-v0``: an oracle that applies the gold patch through the tools, a random agent, and
the outcome-consistency audit's calibration agents (``SweEnv.outcome_agents``): a partial fix, an irrelevant edit
(a comment and a changelog note) and busy activity that changes nothing.

The calibration agents read the instance (gold patch, failing tests) as the oracle does: they exist to check that
the rubric ranks outcomes (a resolved fix over a partial one over activity), never to teach a policy.
"""

from __future__ import annotations

import json
import shlex
from abc import abstractmethod
from pathlib import Path
from typing import Any

from rubricgym.core.agent import SeededAgent, TaskAgent
from rubricgym.core.types import Message, Task, ToolSpec
from rubricgym.envs.swe.instance import SweInstance
from rubricgym.envs.swe.patch import hunk_edits, is_test_path, parse_patch


def tool_call(name: str, **arguments: Any) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def _turn(messages: list[Message]) -> int:
    return sum(1 for m in messages if m.role == "assistant")


def oracle_plan(inst: SweInstance) -> list[str]:
    """Reproduce (run the failing tests), view the buggy file, apply each gold hunk, run the tests, submit."""
    plan = [tool_call("run_tests", selector=" ".join(shlex.quote(t) for t in inst.FAIL_TO_PASS))]
    snapshot = Path(inst.snapshot)
    for fp in parse_patch(inst.patch):
        if is_test_path(fp.path):
            continue
        if fp.is_deleted:
            plan.append(tool_call("bash", command=f"rm -- {shlex.quote(fp.path)}"))
            continue
        if fp.is_new:
            plan.append(tool_call("create", path=fp.path, content="".join("".join(h.new) for h in fp.hunks)))
            continue
        plan.append(tool_call("view", path=fp.path))
        original = (snapshot / fp.path).read_text(errors="replace") if (snapshot / fp.path).is_file() else ""
        edits = hunk_edits(fp)
        if all(old and original.count(old) == 1 for old, _ in edits):
            plan += [tool_call("str_replace", path=fp.path, old=old, new=new) for old, new in edits]
        else:  # a hunk whose text is not unique: apply the file's part of the patch with `patch`
            plan.append(tool_call("bash", command=_patch_command(inst.patch, fp.path)))
    plan.append(tool_call("run_tests", selector=""))
    plan.append(tool_call("submit"))
    return plan


def _patch_command(patch: str, path: str) -> str:
    marker = "RUBRICGYM_GOLD_PATCH_EOF"
    return f"patch -p1 --forward --batch {shlex.quote(path)} <<'{marker}'\n{_file_section(patch, path)}{marker}"


def _file_section(patch: str, path: str) -> str:
    out, keep = [], False
    for line in patch.splitlines(keepends=True):
        if line.startswith("diff --git "):
            keep = line.rstrip().endswith(f" b/{path}")
        if keep:
            out.append(line)
    return "".join(out)


class PlanAgent(TaskAgent):
    """Plays a fixed plan of tool calls built from the episode's instance, one per turn (the last repeats)."""

    def __init__(self, seed: int | None = None, task: Task | None = None):
        super().__init__(seed, task)
        self.plan = self.plan_of(SweInstance.from_task(task)) if task is not None else []

    @abstractmethod
    def plan_of(self, inst: SweInstance) -> list[str]:
        """The episode's tool calls, in order (the last should submit)."""

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        self.episode_task()
        return self.plan[min(_turn(messages), len(self.plan) - 1)]


class OracleAgent(PlanAgent):
    """Applies the instance's gold patch through the tools, reproducing before and testing after the edit."""

    name = "oracle"

    def plan_of(self, inst: SweInstance) -> list[str]:
        return oracle_plan(inst)


def _reproduce(inst: SweInstance) -> str:
    return tool_call("run_tests", selector=" ".join(shlex.quote(t) for t in inst.FAIL_TO_PASS))


def _library_files(inst: SweInstance) -> list[str]:
    """The existing non-test files the gold patch changes (where the bug is)."""
    return [fp.path for fp in parse_patch(inst.patch) if not (is_test_path(fp.path) or fp.is_new or fp.is_deleted)]


_CORE = "tinytext/core.py"
NEAR_MISSES: dict[str, tuple[str, str, str]] = {
    # fix some, not all, of the FAIL_TO_PASS tests (no PASS_TO_PASS broken)
    "tinytext__title-first-word": (  # capitalises a leading "a" (the example), not a leading "the"
        _CORE,
        "if i >= 0 and word.lower() in minor:",
        'if (i > 0 or word.lower() != "a") and word.lower() in minor:',
    ),
    "tinytext__slugify-last-word": (  # keeps a last word of two letters or more: "gym", not "c"
        _CORE,
        "    return sep.join(words)",
        '    if len(current) > 1:\n        words.append("".join(current))\n    return sep.join(words)',
    ),
    "tinytext__wrap-width": (  # counts the space only for widths over 6
        _CORE,
        "if line and len(line) + len(word) > width:",
        "if line and len(line) + len(word) + (1 if width > 6 else 0) > width:",
    ),
    # one failing test: an edit of the buggy line that misses the fix (nothing broken, nothing fixed)
    "tinytext__truncate-boundary": (_CORE, "if len(text) < width:", "if len(text) < width - 1:"),
    "tinytext__truncate-tiny-width": (_CORE, "return suffix", "return suffix[: width + 1]"),
    "tinytext__word-count-case": (  # word_count's loop, not wrap's
        _CORE,
        "for word in text.split():\n        word = word.strip(",
        "for word in text.strip().split():\n        word = word.strip(",
    ),
    "tinytext__word-count-punctuation": (_CORE, "word = word.strip()", 'word = word.strip(",;")'),
    "tinytext__title-rest-lowercase": (
        _CORE,
        "out.append(word[:1].upper() + word[1:])",
        "out.append(word[:1].upper() + word[1:].strip())",
    ),
    "tinytext__slugify-separator": (_CORE, 'return "-".join(words)', 'return "-".join(w for w in words)'),
    "tinytext__wrap-leading-empty-line": (
        _CORE,
        "if len(line) + 1 + len(word) > width:",
        'if len(line) + len(" ") + len(word) > width:',
    ),
}
"""The partial agent's edit of each built-in task: ``(path, old, new)`` on the buggy repository."""


def partial_edits(inst: SweInstance) -> list[tuple[str, str, str]]:
    """A partly right fix as ``(path, old, new)`` edits: the built-in task's near miss, else every hunk of the gold
    patch's library files but the last (none when it has a single hunk, which no partial fix can split)."""
    if inst.source == "builtin" and inst.instance_id in NEAR_MISSES:
        return [NEAR_MISSES[inst.instance_id]]
    snapshot = Path(inst.snapshot)
    edits = []
    for fp in parse_patch(inst.patch):
        if fp.path not in _library_files(inst):
            continue
        original = (snapshot / fp.path).read_text(errors="replace") if (snapshot / fp.path).is_file() else ""
        edits += [(fp.path, old, new) for old, new in hunk_edits(fp) if old and original.count(old) == 1]
    return edits[:-1]


class PartialFixAgent(PlanAgent):
    """A careful work-up with a partly right fix: reproduces, reads the buggy file, makes ``partial_edits``, runs the
    tests and submits (some FAIL_TO_PASS pass where the task has more than one, none broken)."""

    name = "partial_fix"

    def plan_of(self, inst: SweInstance) -> list[str]:
        edits = partial_edits(inst)
        views = dict.fromkeys(path for path, _, _ in edits) or dict.fromkeys(_library_files(inst))
        return [
            _reproduce(inst),
            *(tool_call("view", path=path) for path in views),
            *(tool_call("str_replace", path=path, old=old, new=new) for path, old, new in edits),
            tool_call("run_tests", selector=""),
            tool_call("submit"),
        ]


class IrrelevantEditAgent(PlanAgent):
    """Completes the protocol with a wrong outcome: reproduces, reads the buggy file, appends a comment to it and a
    note to ``CHANGELOG.md``, runs the tests and submits (nothing fixed)."""

    name = "irrelevant_edit"

    def plan_of(self, inst: SweInstance) -> list[str]:
        files = _library_files(inst)[:1]
        note = "# Issue noted in CHANGELOG.md."
        return [
            _reproduce(inst),
            *(tool_call("view", path=path) for path in files),
            *(tool_call("bash", command=f"printf '\\n%s\\n' {shlex.quote(note)} >> {shlex.quote(p)}") for p in files),
            tool_call("create", path="CHANGELOG.md", content=f"# Changelog\n\n- {inst.problem_statement[:120]}\n"),
            tool_call("run_tests", selector=""),
            tool_call("submit"),
        ]


class BusyAgent(PlanAgent):
    """Activity without progress: lists, reads and greps the repository, runs the tests twice, changes nothing and
    submits."""

    name = "activity"

    def plan_of(self, inst: SweInstance) -> list[str]:
        files = _library_files(inst)[:1]
        return [
            tool_call("bash", command="ls -R | head -50"),
            tool_call("view", path="."),
            *(tool_call("view", path=path) for path in files),
            _reproduce(inst),
            *(tool_call("bash", command=f"grep -n 'def ' {shlex.quote(path)}") for path in files),
            tool_call("run_tests", selector=""),
            tool_call("submit"),
        ]


_COMMANDS = [
    "ls",
    "ls -la",
    "cat README*",
    "find . -name '*.py' | head",
    "python3 -c 'print(1 + 1)'",
    "echo hello",
    "grep -rn def . | head -5",
    "git status",
    "pwd",
    "wc -l $(find . -name '*.py') | tail -1",
]
_PATHS = ["README.md", "README.rst", "setup.py", "pyproject.toml", ".", "tests", "missing.py", "src"]


class RandomAgent(SeededAgent):
    """Random actions: garbage text, harmless commands, random views, edits that rarely apply, early submits."""

    name = "random"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        r = float(self.rng.random())
        pick = lambda xs: xs[int(self.rng.integers(len(xs)))]  # noqa: E731
        if r < 0.15:
            return "".join(self.rng.choice(list('abc xyz{}[]":,0123456789'), size=int(self.rng.integers(0, 40))))
        if r < 0.4:
            return tool_call("bash", command=pick(_COMMANDS))
        if r < 0.6:
            return tool_call("view", path=pick(_PATHS), start=int(self.rng.integers(1, 20)))
        if r < 0.72:
            return tool_call(
                "str_replace",
                path=pick(_PATHS),
                old=pick(["return", "if ", "x", "def "]),
                new=pick(["return None  #", "if not ", "y", "def _"]),
            )
        if r < 0.8:
            return tool_call("create", path=f"notes_{int(self.rng.integers(100))}.txt", content="random notes\n")
        if r < 0.92:
            return tool_call("run_tests", selector="")
        return tool_call("submit")
