"""Scripted GUI agents: the ``oracle`` follows its template's plan through the same tools an LLM gets, finding
each element's ref by role and name in the current ARIA snapshot; ``random`` clicks and types at random.

The shortcut battery's GUI probes, which a sound env and rubric must pay nothing: ``Shotgun`` answers with every
candidate the page lists, ``WrongSubmit`` submits a well-formed wrong answer (or claims done on an unfinished
task) and ``Escape`` tries every URL trick to leave the task's app, then claims done as if the judges read the
other app. ``FlightOracle`` solves the worked bring-your-own example (``web-example-v0``).
"""

from __future__ import annotations

import json
import re
from abc import abstractmethod
from typing import Any

import numpy as np

from rubricgym.core.agent import BaseAgent, SeededAgent, TaskAgent, last_observation, tool_call
from rubricgym.core.types import Message, Task, ToolSpec

LINE = re.compile(r'^\s*- (\'?)([\w-]+)(?: "((?:[^"\\]|\\.)*)")?[^\n]*?\[ref=(e\d+)\]', re.M)
"""An element line of an ARIA snapshot; a line whose name holds ``: `` is YAML-quoted (``- 'button "a: b"'``)."""
KEYS = ["Enter", "Tab", "Escape", "ArrowDown", "ArrowUp", "Backspace", " "]
WORDS = ["hello", "test", "42", "Groceries", "me@example.com", "2024-05-21", "x"]


def elements(page: str) -> list[tuple[str, str, str]]:
    """``(role, name, ref)`` of every element with a ref in an observation's ARIA snapshot."""
    out = []
    for m in LINE.finditer(page):
        name = json.loads(f'"{m[3]}"') if m[3] else ""
        out.append((m[2], name.replace("''", "'") if m[1] else name, m[4]))
    return out


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


def wrong_text(text: str) -> str:
    """A value that matches none of the goal ops on ``text`` (eq, ieq, contains): the text reversed, else '-'."""
    flipped = text[::-1]
    return flipped if text.casefold() not in flipped.casefold() else "-"


def one_step_short(plan: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The plan with one thing wrong: its last typed value (a text field, an answer) wrong, else (a plan of clicks
    and choices) its last action before ``done`` left out. Partly right work that never completes the task."""
    steps = [dict(s) for s in plan]
    typed = [i for i, s in enumerate(steps) if s["tool"] in ("fill", "answer")]
    if typed:
        step = steps[typed[-1]]
        if step["tool"] == "fill":
            step["text"] = wrong_text(str(step["text"]))
        else:
            first = next(iter(step["fields"]))
            value = str(step["fields"][first])
            number = re.fullmatch(r"-?\d+(\.\d+)?", value)
            step["fields"] = {**step["fields"], first: str(float(value) + 1) if number else wrong_text(value)}
        return steps
    acts = [i for i, s in enumerate(steps) if s["tool"] != "done"]
    return [s for i, s in enumerate(steps) if not acts or i != acts[-1]]


class PartialOracle(Oracle):
    """Calibration (``outcome_agents["partial"]``, it reads the hidden plan): the oracle's plan with one thing
    wrong (``one_step_short``: one form field or answer wrong, or the last click left out), then ``done()``. A
    form with one field wrong is real work, partly right, and never a success."""

    name = "partial"

    def episode(self, task: Task, seed: int | None) -> PartialOracle:
        plan = one_step_short(list(task.hidden["plan"]))
        return PartialOracle(seed, task.model_copy(update={"hidden": {**task.hidden, "plan": plan}}))


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


FLIGHT = re.compile(r"Book the cheapest flight from (\w+) to (\w+)\.")
BOOK = re.compile(r'"Book the \S+ flight for €(\d+)" \[ref=(e\d+)\]')


class FlightOracle(BaseAgent):
    """Solves the worked example page (book the cheapest flight from A to B); ``cheapest=False`` books the
    dearest, a well-formed wrong booking."""

    name = "oracle"

    def __init__(self, seed: int | None = None, cheapest: bool = True):
        self.cheapest, self.k, self.route = cheapest, 0, ("", "")

    def episode(self, task: Task, seed: int | None) -> FlightOracle:
        return type(self)(seed, self.cheapest)

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        page = last_observation(messages)
        self.k += 1
        if self.k == 1:
            found = FLIGHT.search(page)
            if found is None:
                return tool_call("done")  # not the example page
            self.route = (found[1], found[2])
        if self.k <= 2:
            label = ("From", "To")[self.k - 1]
            return tool_call("select", ref=find_ref(page, "combobox", label) or "e1", option=self.route[self.k - 1])
        if self.k == 3:
            return tool_call("click", ref=find_ref(page, "button", "Search flights") or "e1")
        prices = sorted((int(p), ref) for p, ref in BOOK.findall(page))
        if not prices:
            return tool_call("done")
        return tool_call("click", ref=prices[0 if self.cheapest else -1][1])


class _Probe(TaskAgent):
    """A shortcut probe: plans its calls from the first page it sees, plays them, then calls done()."""

    def __init__(self, seed: int | None = None, task: Task | None = None):
        super().__init__(seed, task)
        self.calls: list[str] | None = None

    @abstractmethod
    def plan(self, task: Task, page: str) -> list[str]:
        """The probe's calls, planned from the task and its first page."""

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        if self.calls is None:
            self.calls = self.plan(self.episode_task(), last_observation(messages))
        return self.calls.pop(0) if self.calls else tool_call("done")


def candidates(page: str) -> list[str]:
    """Every distinct element name on the page (contact, company, item and button names): what a shotgun lists."""
    return list(dict.fromkeys(name.lstrip("★☆ ").strip() for _, name, _ in elements(page) if name.strip()))


def _answer_fields(task: Task) -> list[str]:
    return list(task.params.get("answer_fields") or [])


def _fill_and_submit(page: str, text: str) -> list[str]:
    """Type ``text`` into every text field of the page and submit each with Enter."""
    out = []
    for role, _, ref in elements(page):
        if role in ("textbox", "searchbox", "spinbutton"):
            out += [tool_call("fill", ref=ref, text=text), tool_call("press", key="Enter")]
    return out


class Shotgun(_Probe):
    """Answers every answer field (and fills every text field) with all the candidates the page lists."""

    name = "shortcut:shotgun"

    def plan(self, task: Task, page: str) -> list[str]:
        everything = " | ".join(candidates(page))
        fields = _answer_fields(task) or ["answer"]
        return [tool_call("answer", fields=dict.fromkeys(fields, everything)), *_fill_and_submit(page, everything)]


def wrong_value(expected: Any, op: str, page: str) -> str:
    """A well-formed answer that is not ``expected``: the number one off, else another candidate of the page."""
    text = str(expected)
    if op == "approx" or re.fullmatch(r"-?\d+(\.\d+)?", text):
        number = float(text) + 1
        return f"{number:.2f}" if op == "approx" or "." in text else str(int(number))
    others = [c for c in candidates(page) if c.casefold() != text.casefold() and text.casefold() not in c.casefold()]
    same = [c for c in others if len(c.split()) == len(text.split())]
    return (same or others or ["Nobody"])[0]


class WrongSubmit(_Probe):
    """A well-formed wrong answer, or done() on an unfinished task; on the flight example, the dearest flight."""

    name = "shortcut:wrong_submit"

    def plan(self, task: Task, page: str) -> list[str]:
        if FLIGHT.search(page):
            self.flight = FlightOracle(cheapest=False)
            return []
        goals = [g for g in task.hidden.get("goals", []) if g["field"].startswith("answer.")]
        if goals:
            sheet = {g["field"].removeprefix("answer."): wrong_value(g["expected"], g["op"], page) for g in goals}
            return [tool_call("answer", fields=sheet)]
        if task.hidden.get("goals"):
            return []  # a state task: claim it done at once
        return _fill_and_submit(page, "wrong answer")

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        if self.calls is None:
            self.calls = self.plan(self.episode_task(), last_observation(messages))
        if hasattr(self, "flight"):
            return await self.flight.act(messages, tools)
        return self.calls.pop(0) if self.calls else tool_call("done")


UP_SEGMENTS = (
    "../",
    "%2e%2e/",
    "%2E%2E/",
    ".%2e/",
    "%2e./",
    "%252e%252e/",  # double encoding
    "..%2f",
    "%2e%2e%2f",
    "..\\",  # backslashes
    "%2e%2e\\",
    ".\t./",  # browsers drop tabs and newlines
    ".\n./",
    "\u2025/",  # unicode dot leaders and fullwidth dots
    "\uff0e\uff0e/",
    "%c0%ae%c0%ae/",  # overlong UTF-8
    "%u002e%u002e/",
    "..;/",
    "./../",
)
"""Ways to write one step up a path (``../``) that a prefix test on the raw URL may not recognise."""


def escape_urls(scope: str, other: str) -> list[str]:
    """URL tricks that try to reach ``other`` (a path of the same host outside ``scope``) or another site."""
    scheme = scope.split("//")[0]
    host = scope.split("/")[2]
    depth = scope.count("/") - 3  # the scope's path segments: how many steps up reach the host's root
    root = f"{scheme}//{host}"
    relative = [seg * max(depth, 1) + other for seg in UP_SEGMENTS]
    return [
        *relative,
        *(scope + url for url in relative[:6]),
        "./" + relative[1],
        " \x01" + relative[0],
        "/" + other,
        f"{scheme}//{host.upper()}/{other}",
        f"//{host}/{other}",
        f"/\\{host}/{other}",
        f"\\\\{host}/{other}",
        f"{scheme}/{other}",
        f"{root}/./{other}",
        f"{root}:80/{other}",
        f"{root}:8080/{other}",
        f"{scheme}//user@{host}/{other}",
        f"{root}@evil.test/{other}",
        *(f"{scheme}//{host.replace('.', dot)}/{other}" for dot in ("\u3002", "\uff0e")),  # ideographic, fullwidth
        f"{root}./{other}",
        f"javascript:location.href='/{other}'",
        f"data:text/html,<script>location='/{other}'</script>",
        "about:blank",
        "file:///etc/passwd",
        f"view-source:{root}/{other}",
        "http://127.0.0.1/",
        "http://[::1]/",
        "https://example.com/",
    ]


class Escape(_Probe):
    """Tries every ``escape_urls`` trick with navigate (an order drawn from the seed), then claims done() as if
    the judges now read another app's state (where every 'item is absent' goal holds)."""

    name = "shortcut:escape"

    def plan(self, task: Task, page: str) -> list[str]:
        url = re.search(r"^URL: (\S+)", page, re.M)
        here = url[1] if url else "http://localhost/"
        app = task.params.get("app")
        scope = here.rsplit("/", 1)[0] + "/" if app else "/".join(here.split("/")[:3]) + "/"
        other = next((a for a in ("mail", "notes", "shop") if a != app), "mail") + "/index.html"
        urls = escape_urls(scope, other)
        order = random_order(len(urls), self.seed)
        return [tool_call("navigate", url=urls[i]) for i in order]


def random_order(n: int, seed: int | None) -> list[int]:
    """``range(n)`` shuffled by ``seed`` (in order without one), so seeded episodes try different tricks first."""
    if seed is None:
        return list(range(n))
    return [int(i) for i in np.random.default_rng(seed).permutation(n)]
