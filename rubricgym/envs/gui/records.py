"""What a browser step records in ``Step.info`` (read by the GUI checks, see ``core.steprecord``).

Every browser tool writes one of three shapes, told apart by their keys: an ``AppStep`` (``gui-v0`` judged the
app's state: goal rows, progress, unexpected changes), a ``PageStep`` (a bring-your-own or MiniWoB++ page judged
by its own JS: its reward, whether it ended the episode, goal rows when the spec has goals) or an ``Escape`` (the
page left the task's scope; nothing is judged). Only ``BrowserEnv.public_info_keys`` reach the agent.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Tag

from rubricgym.core.steprecord import StepRecords, ToolRecord

TOOLS = (
    "click",
    "click_text",
    "fill",
    "type",
    "press",
    "select",
    "scroll",
    "hover",
    "go_back",
    "navigate",
    "answer",
    "done",
)
"""The browser tools (``BrowserEnv``'s ``@tool`` methods)."""


class GoalRow(BaseModel):
    """One goal as judged at this step (``judge.check_goals``)."""

    model_config = ConfigDict(extra="forbid")
    field: str
    op: str
    expected: Any
    actual: Any
    passed: bool


class BrowserRecord(ToolRecord):
    """Base of the browser records: the tool, whether the app's state changed, and what changed unasked."""

    tool: str
    changed: bool
    unexpected: list[str] | None = None
    """State paths that changed without the task asking (``None``: a page without a state function)."""


class Judged(BrowserRecord):
    """A step whose page the env judged."""

    progress: float
    prev_progress: float
    goals: list[GoalRow] | None = None
    """The goal rows (``None``: a page spec without goals)."""
    timeout: bool = False
    """The episode's time limit ended it at this step."""
    screenshot_jpeg_b64: str | None = None
    """The page after the step, when the env takes screenshots."""


class AppStep(Judged):
    """``gui-v0``: the bundled app's state judged against the task's goals."""

    goals: list[GoalRow]
    unexpected: list[str]


class PageStep(Judged):
    """A bring-your-own (or MiniWoB++) page judged by its spec's JS."""

    page_reward: float
    episode_over: bool
    """The page itself ended the episode."""


class Escape(BrowserRecord):
    """The page left the task's scope: the episode ended as a failure."""

    escaped: Literal[True]
    escaped_to: str


def _shape(value: Any) -> str:
    keys = value if isinstance(value, dict) else type(value).model_fields
    return "escape" if "escaped" in keys else "page" if "page_reward" in keys else "app"


BrowserStep = Annotated[
    Annotated[AppStep, Tag("app")] | Annotated[PageStep, Tag("page")] | Annotated[Escape, Tag("escape")],
    Discriminator(_shape),
]

RECORDS = StepRecords("browser env (gui-v0, web-*, miniwob-*)", dict.fromkeys(TOOLS, BrowserStep))


def recorded(tool: str, info: dict[str, Any]) -> dict[str, Any]:
    """``info`` as a browser step writes it, checked against its record (a mismatch is the env author's bug)."""
    return RECORDS.parse(tool, info).info()
