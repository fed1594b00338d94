"""Scripted GUI agents: the ``oracle`` follows its template's plan through the same tools an LLM gets, finding
each element's ref by role and name in the current ARIA snapshot; ``random`` clicks and types at random.
"""

from __future__ import annotations

import json
import re

from rubricgym.core.agent import BaseAgent, SeededAgent, last_observation, tool_call
from rubricgym.core.types import Message, Task, ToolSpec

LINE = re.compile(r'^\s*- ([\w-]+)(?: "((?:[^"\\]|\\.)*)")?[^\n]*?\[ref=(e\d+)\]', re.M)
KEYS = ["Enter", "Tab", "Escape", "ArrowDown", "ArrowUp", "Backspace", " "]
WORDS = ["hello", "test", "42", "Groceries", "me@example.com", "2024-05-21", "x"]


def elements(page: str) -> list[tuple[str, str, str]]:
    """``(role, name, ref)`` of every element with a ref in an observation's ARIA snapshot."""
    return [(m[1], json.loads(f'"{m[2]}"') if m[2] else "", m[3]) for m in LINE.finditer(page)]


def find_ref(page: str, role: str, name: str) -> str | None:
    """The ref of the element with ``role`` and accessible ``name`` (``~text``: name contains text)."""
    found = [(n, ref) for r, n, ref in elements(page) if r == role]
    if name.startswith("~"):
        part = name[1:].casefold()
        hits = [ref for n, ref in found if part in n.casefold()]
    else:
        hits = [ref for n, ref in found if n == name]
    return hits[0] if hits else None


class Oracle(BaseAgent):
    """Solves any bundled-app task by replaying its template's plan."""

    name = "oracle"

    def __init__(self, seed: int | None = None, task: Task | None = None):
        self.task, self.k = task, 0

    def episode(self, task: Task, seed: int | None) -> Oracle:
        return Oracle(seed, task)

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        if self.task is None:
            raise RuntimeError("the oracle needs the task: use agent.episode(task, seed) (rollout does this)")
        plan = self.task.hidden["plan"]
        step = plan[min(self.k, len(plan) - 1)]
        self.k += 1
        args = {k: v for k, v in step.items() if k not in ("tool", "role", "name")}
        if "role" in step:
            ref = find_ref(last_observation(messages), step["role"], step["name"])
            if ref is None:
                return f"(oracle: no {step['role']} named {step['name']!r} on the page)"
            args["ref"] = ref
        return tool_call(step["tool"], **args)


class RandomClicker(SeededAgent):
    """Random actions on the elements of the current page; calls done() now and then."""

    name = "random"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        refs = [ref for _, _, ref in elements(last_observation(messages))] or ["e1"]
        r = self.rng.random()
        ref = str(self.rng.choice(refs))
        if r < 0.6:
            return tool_call("click", ref=ref)
        if r < 0.75:
            return tool_call("fill", ref=ref, text=str(self.rng.choice(WORDS)))
        if r < 0.83:
            return tool_call("press", key=str(self.rng.choice(KEYS)))
        if r < 0.88:
            return tool_call("scroll", direction=str(self.rng.choice(["up", "down"])))
        if r < 0.92:
            return tool_call("go_back")
        if r < 0.95:
            return tool_call("answer", fields={"value": str(self.rng.choice(WORDS))})
        return tool_call("done")
