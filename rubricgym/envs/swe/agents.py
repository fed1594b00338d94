"""Scripted agents for ``swe-v0``: an oracle that applies the gold patch through the tools, and a random agent."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from rubricgym.core.agent import BaseAgent, SeededAgent
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


class OracleAgent(BaseAgent):
    """Applies the instance's gold patch through the tools, reproducing before and testing after the edit."""

    name = "oracle"

    def __init__(self, seed: int | None = None, task: Task | None = None):
        self.plan = oracle_plan(SweInstance.from_task(task)) if task is not None else []

    def episode(self, task: Task, seed: int | None) -> OracleAgent:
        return OracleAgent(seed, task)

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        if not self.plan:
            raise RuntimeError("the oracle needs the task: use agent.episode(task, seed) (rollout does this)")
        k = _turn(messages)
        return self.plan[min(k, len(self.plan) - 1)]


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
