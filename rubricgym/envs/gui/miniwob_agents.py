"""Scripted oracles for MiniWoB++ pages whose instruction and ARIA snapshot say how to solve them.

Each reads the instruction (the ``Task:`` line of the first observation) with its page's pattern, plans its steps
(a tool with an element named by role, accessible name and position, or a visible text) and plays them through
the same tools an LLM gets, finding each element's ref in the current snapshot; where the task's data is on the
page, not in the instruction (a table, an equation, autocomplete suggestions), a ``read`` step takes it from the
snapshot the agent sees, as an LLM would, never from the page's script. A page it cannot read (another instruction
wording, an element missing) gets ``done()``: a failure, never a guess.
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
"""``{"tool": ..., "role": ..., "name": ..., "nth": ...}`` (the element is looked up), the tool's own arguments, or
``{"read": fn}``: ``fn(snapshot)`` returns the call ``(tool, arguments)`` from what the page shows now, or ``None``."""


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
        if "read" in step:
            call = step["read"](page)
            return tool_call(call[0], **call[1]) if call is not None else tool_call("done")
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


class EnterDate(MiniWobOracle):
    """The field is a date input: it takes the date as ``YYYY-MM-DD`` (the page reads it back in that form)."""

    pattern = re.compile(r"Enter (\d\d)/(\d\d)/(\d{4}) as the date and hit submit\.")

    def plan(self, found: re.Match[str]) -> list[Step]:
        return [_fill(f"{found[3]}-{found[1]}-{found[2]}"), SUBMIT]


SUGGESTION = re.compile(r"- listitem \[ref=e\d+\][^\n]*:\n\s+- generic \[ref=(e\d+)\]: (.+)")
"""An autocomplete suggestion in the snapshot: the ref and text of its entry."""


class UseAutocomplete(MiniWobOracle):
    """Types the prefix, then clicks the suggestion the page lists that ends as asked (the first one when the
    instruction names no ending) and submits: it picks from what the page shows, never from the page's answer."""

    pattern = re.compile(r'Enter an item that starts with "(.+?)"(?: and ends with "(.+?)")?\.')

    def plan(self, found: re.Match[str]) -> list[Step]:
        ending = found[2] or ""

        def pick(page: str) -> tuple[str, dict[str, Any]] | None:
            hits = [ref for ref, text in SUGGESTION.findall(page) if text.strip().endswith(ending)]
            return ("click", {"ref": hits[0]}) if hits else None

        return [_fill(found[1]), {"read": pick}, SUBMIT]


class EnterTime(MiniWobOracle):
    """The field is a time input: it takes the time as 24-hour ``HH:MM``."""

    pattern = re.compile(r"Enter (\d{1,2}):(\d\d) (AM|PM) as the time and press submit\.")

    def plan(self, found: re.Match[str]) -> list[Step]:
        hour = int(found[1]) % 12 + (12 if found[3] == "PM" else 0)
        return [_fill(f"{hour:02d}:{found[2]}"), SUBMIT]


class ChooseList(MiniWobOracle):
    pattern = re.compile(r"Select (.+) from the list and click Submit\.")

    def plan(self, found: re.Match[str]) -> list[Step]:
        def choose(page: str) -> tuple[str, dict[str, Any]] | None:
            ref = element_ref(page, "combobox")
            return ("select", {"ref": ref, "option": found[1]}) if ref else None

        return [{"read": choose}, SUBMIT]


PROBLEM = re.compile(r"- generic \[ref=e\d+\]: (-?\d+) ([-+x*]) (-?\d+) =")
"""The arithmetic problem as the snapshot shows it."""


class SimpleArithmetic(MiniWobOracle):
    """Reads the problem the page shows and types its result."""

    pattern = re.compile(r"Solve the math problem and type your answer into the textbox\. Press submit when done\.")

    def plan(self, found: re.Match[str]) -> list[Step]:
        def solve(page: str) -> tuple[str, dict[str, Any]] | None:
            problem, ref = PROBLEM.search(page), element_ref(page, "textbox")
            if problem is None or ref is None:
                return None
            a, op, b = int(problem[1]), problem[2], int(problem[3])
            result = a + b if op == "+" else a - b if op == "-" else a * b
            return ("fill", {"ref": ref, "text": str(result)})

        return [{"read": solve}, SUBMIT]


NUMBER_ROW = re.compile(
    r'button "Odd" \[ref=(e\d+)\][^\n]*\n\s+- generic \[ref=e\d+\]: "?(-?\d+)"?\n\s+- button "Even" \[ref=(e\d+)\]'
)
"""One number of ``odd-or-even``: its Odd button, the number, its Even button."""


class OddOrEven(MiniWobOracle):
    """Marks each number the page shows by its parity (the buttons of the first snapshot), then submits."""

    pattern = re.compile(r"Mark the numbers below as odd or even and press submit when done\.")

    def plan(self, found: re.Match[str]) -> list[Step]:
        return [{"read": self.mark}]

    def mark(self, page: str) -> tuple[str, dict[str, Any]] | None:
        refs = [odd if int(number) % 2 else even for odd, number, even in NUMBER_ROW.findall(page)]
        if not refs:
            return None
        self.steps = [*({"tool": "click", "ref": ref} for ref in refs[1:]), SUBMIT]
        return ("click", {"ref": refs[0]})


PARAGRAPH = re.compile(r"- paragraph \[ref=e\d+\]: (.+)")


class FindWord(MiniWobOracle):
    """Counts the words of the paragraph the page shows and types the asked one without its punctuation."""

    pattern = re.compile(
        r'Find the (\d+)(?:st|nd|rd|th) word in the paragraph, type that into the textbox and press "Submit"\.'
    )

    def plan(self, found: re.Match[str]) -> list[Step]:
        def word(page: str) -> tuple[str, dict[str, Any]] | None:
            text, ref = PARAGRAPH.search(page), element_ref(page, "textbox")
            words = text[1].split() if text else []
            if ref is None or len(words) < int(found[1]):
                return None
            return ("fill", {"ref": ref, "text": re.sub(r"[^A-Za-z0-9]", "", words[int(found[1]) - 1])})

        return [{"read": word}, SUBMIT]


def _table(page: str) -> dict[str, str]:
    """The label -> value rows of the table the snapshot shows."""
    return dict(re.findall(r'- cell "(.*?)" \[ref=e\d+\]\n\s+- cell "(.*?)" \[ref=e\d+\]', page))


class ReadTable(MiniWobOracle):
    pattern = re.compile(r"Enter the value of (.+) into the text field and press Submit\.")

    def plan(self, found: re.Match[str]) -> list[Step]:
        def value(page: str) -> tuple[str, dict[str, Any]] | None:
            text, ref = _table(page).get(found[1]), element_ref(page, "textbox")
            return ("fill", {"ref": ref, "text": text}) if text is not None and ref else None

        return [{"read": value}, SUBMIT]


FORM_FIELD = re.compile(r'- generic \[ref=e\d+\]: "?(.+?):"?\n\s+- textbox \[ref=(e\d+)\]')
"""A labelled field of ``read-table-2``'s form: its label and the ref of its text box."""


class ReadTable2(MiniWobOracle):
    """Fills each labelled field of the form with that label's value in the table (from the first snapshot)."""

    pattern = re.compile(r"Enter the value that corresponds with each label into the form and submit when done\.")

    def plan(self, found: re.Match[str]) -> list[Step]:
        return [{"read": self.fill_all}]

    def fill_all(self, page: str) -> tuple[str, dict[str, Any]] | None:
        table = _table(page)
        fills = [(ref, table[label]) for label, ref in FORM_FIELD.findall(page) if label in table]
        if not fills:
            return None
        self.steps = [*({"tool": "fill", "ref": ref, "text": text} for ref, text in fills[1:]), SUBMIT]
        return ("fill", {"ref": fills[0][0], "text": fills[0][1]})


EQUATION = re.compile(r"- generic \[ref=e\d+\]: (x|-?\d+) ([-+]) (x|-?\d+) = (-?\d+)")


class SimpleAlgebra(MiniWobOracle):
    """Solves the linear equation the page shows (``x + a = b``, ``a - x = b``, ...) for x."""

    pattern = re.compile(r"Solve for x and type your answer into the textbox\. Press Submit when done\.")

    def plan(self, found: re.Match[str]) -> list[Step]:
        def solve(page: str) -> tuple[str, dict[str, Any]] | None:
            eq, ref = EQUATION.search(page), element_ref(page, "textbox")
            if eq is None or ref is None:
                return None
            left, op, right, total = eq[1], eq[2], eq[3], int(eq[4])
            if op == "+":
                x = total - int(right if left == "x" else left)
            elif left == "x":  # x - a = b
                x = total + int(right)
            else:  # a - x = b
                x = int(left) - total
            return ("fill", {"ref": ref, "text": str(x)})

        return [{"read": solve}, SUBMIT]


CHARACTER = re.compile(r'^\s+- generic \[ref=e\d+\]: "?([A-Za-z0-9])"?$', re.M)
"""One character of ``text-transform``'s distorted text, a cell of its own in the snapshot."""


class TextTransform(MiniWobOracle):
    """Types the characters the page shows one per cell, in order."""

    pattern = re.compile(r"Type the text below into the text field and press Submit\.")

    def plan(self, found: re.Match[str]) -> list[Step]:
        def text(page: str) -> tuple[str, dict[str, Any]] | None:
            chars, ref = CHARACTER.findall(page), element_ref(page, "textbox")
            return ("fill", {"ref": ref, "text": "".join(chars)}) if chars and ref else None

        return [{"read": text}, SUBMIT]
