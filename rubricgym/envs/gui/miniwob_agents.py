"""Scripted oracles for MiniWoB++ pages whose instruction and ARIA snapshot say how to solve them.

Each reads the instruction (the ``Task:`` line of the first observation) with its page's pattern, plans its steps
(a tool with an element named by role, accessible name and position, or a visible text) and plays them through
the same tools an LLM gets, finding each element's ref in the current snapshot. A page it cannot read (another
instruction wording) gets ``done()``: a failure, never a guess.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from typing import Any, ClassVar

from rubricgym.core.agent import BaseAgent, last_observation, tool_call
from rubricgym.core.types import Message, Task, ToolSpec
from rubricgym.envs.gui.agents import elements

TASK = re.compile(r"^Task: (.*)$", re.M)
Step = dict[str, Any]
"""``{"tool": ..., "role": ..., "name": ..., "nth": ...}`` (the element is looked up) or the tool's own arguments."""


def element_ref(page: str, role: str, name: str | None = None, nth: int = 0) -> str | None:
    """The ref of the ``nth`` element with ``role`` (and accessible ``name``, when given) in a snapshot."""
    hits = [ref for r, n, ref in elements(page) if r == role and (name is None or n == name)]
    return hits[nth] if len(hits) > nth else None


class MiniWobOracle(BaseAgent):
    """Plans from the instruction with ``pattern`` and plays the plan; ``done()`` once it is played out."""

    name = "oracle"
    pattern: ClassVar[re.Pattern[str]] = re.compile(".*")

    def __init__(self, seed: int | None = None):
        self.steps: list[Step] | None = None

    def episode(self, task: Task, seed: int | None) -> MiniWobOracle:
        return type(self)(seed)

    @abstractmethod
    def plan(self, found: re.Match[str]) -> list[Step]:
        """The steps that do the task the instruction (matched by ``pattern``) asks for."""

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        page = last_observation(messages)
        if self.steps is None:
            task = TASK.search(page)
            found = self.pattern.fullmatch(task[1].strip()) if task else None
            self.steps = self.plan(found) if found else []
        if not self.steps:
            return tool_call("done")
        step = dict(self.steps.pop(0))
        tool = step.pop("tool")
        if "role" in step:
            ref = element_ref(page, step.pop("role"), step.pop("name", None), step.pop("nth", 0))
            if ref is None:
                return tool_call("done")
            step["ref"] = ref
        return tool_call(tool, **step)


def _click(role: str, name: str | None = None, nth: int = 0) -> Step:
    return {"tool": "click", "role": role, "name": name, "nth": nth}


def _fill(text: str, nth: int = 0) -> Step:
    return {"tool": "fill", "role": "textbox", "nth": nth, "text": text}


SUBMIT = _click("button", "Submit")


class ClickButton(MiniWobOracle):
    pattern = re.compile(r'Click on the "(.+)" button\.')

    def plan(self, found: re.Match[str]) -> list[Step]:
        return [_click("button", found[1])]


class ClickLink(MiniWobOracle):
    """The link is a span inside a paragraph, with no ref: clicked by its visible text."""

    pattern = re.compile(r'Click on the link "(.+)"\.')

    def plan(self, found: re.Match[str]) -> list[Step]:
        return [{"tool": "click_text", "text": found[1]}]


class EnterText(MiniWobOracle):
    pattern = re.compile(r'Enter "(.*)" into the text field and press Submit\.')

    def plan(self, found: re.Match[str]) -> list[Step]:
        return [_fill(found[1]), SUBMIT]


class EnterText2(MiniWobOracle):
    pattern = re.compile(r'Type "(.*)" in all (upper|lower) case letters in the text input and press Submit\.')

    def plan(self, found: re.Match[str]) -> list[Step]:
        text = found[1].upper() if found[2] == "upper" else found[1].lower()
        return [_fill(text), SUBMIT]


class EnterPassword(MiniWobOracle):
    pattern = re.compile(r'Enter the password "(.*)" into both text fields and press submit\.')

    def plan(self, found: re.Match[str]) -> list[Step]:
        return [_fill(found[1]), _fill(found[1], 1), SUBMIT]


class LoginUser(MiniWobOracle):
    pattern = re.compile(r'Enter the username "(.*)" and the password "(.*)" into the text fields and press login\.')

    def plan(self, found: re.Match[str]) -> list[Step]:
        return [_fill(found[1]), _fill(found[2], 1), _click("button", "Login")]


class ClickCheckboxes(MiniWobOracle):
    pattern = re.compile(r"Select (.*) and click Submit\.")

    def plan(self, found: re.Match[str]) -> list[Step]:
        names = [] if found[1] == "nothing" else [n.strip() for n in found[1].split(",")]
        return [*(_click("checkbox", n) for n in names), SUBMIT]


class ClickOption(MiniWobOracle):
    pattern = re.compile(r"Select (.*) and click Submit\.")

    def plan(self, found: re.Match[str]) -> list[Step]:
        return [_click("radio", found[1]), SUBMIT]


class FocusText(MiniWobOracle):
    pattern = re.compile(r"Focus into the textbox\.")

    def plan(self, found: re.Match[str]) -> list[Step]:
        return [_click("textbox")]


class FocusText2(MiniWobOracle):
    pattern = re.compile(r"Focus into the (\d+)(?:st|nd|rd|th) input textbox\.")

    def plan(self, found: re.Match[str]) -> list[Step]:
        return [_click("textbox", nth=int(found[1]) - 1)]


class ClickTab(MiniWobOracle):
    pattern = re.compile(r"Click on Tab #(\d+)\.")

    def plan(self, found: re.Match[str]) -> list[Step]:
        return [_click("link", f"Tab #{found[1]}")]


class ClickDialog(MiniWobOracle):
    pattern = re.compile(r'Close the dialog box by clicking the "x"\.')

    def plan(self, found: re.Match[str]) -> list[Step]:
        return [_click("button", "Close")]


class ClickDialog2(MiniWobOracle):
    pattern = re.compile(r'Click the button in the dialog box labeled "(.+)"\.')

    def plan(self, found: re.Match[str]) -> list[Step]:
        return [_click("button", "Close" if found[1] == "x" else found[1])]


class ClickButtonSequence(MiniWobOracle):
    pattern = re.compile(r"Click button ONE, then click button TWO\.")

    def plan(self, found: re.Match[str]) -> list[Step]:
        return [_click("button", "ONE"), _click("button", "TWO")]


class ClickTest(MiniWobOracle):
    pattern = re.compile(r"Click the button\.")

    def plan(self, found: re.Match[str]) -> list[Step]:
        return [_click("button", "Click Me!")]


class ClickTest2(MiniWobOracle):
    pattern = re.compile(r"Click button (ONE|TWO)\.")

    def plan(self, found: re.Match[str]) -> list[Step]:
        return [_click("button", found[1])]


class ClickCheckboxesOneMissing(ClickCheckboxes):
    """Calibration (``outcome_agents["partial"]``): ticks every box the instruction names but the last, then
    submits. Partly right work: the page pays it a fraction (``(n - 2) / n`` of ``n`` boxes), never its success."""

    name = "partial"

    def plan(self, found: re.Match[str]) -> list[Step]:
        ticks = super().plan(found)[:-1]
        return [*ticks[:-1], SUBMIT]
