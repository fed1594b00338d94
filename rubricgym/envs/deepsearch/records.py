"""What the deep search tools record in ``Step.info`` (read by the checks and CaRR, see ``core.steprecord``).

Every record lists ``seen``: exactly the page content the call showed the agent, which CaRR matches statements
against; search adds its query and results, open and find the page they read, answer the env's scoring of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from rubricgym.core.steprecord import StepRecords, ToolRecord
from rubricgym.core.types import Step


class Seen(BaseModel):
    """Content of a page the agent was shown (plain text, without highlight marks)."""

    model_config = ConfigDict(extra="forbid")
    url: str
    text: str


class Result(BaseModel):
    """One search result."""

    model_config = ConfigDict(extra="forbid")
    doc: str
    url: str
    title: str
    score: float


class Observed(ToolRecord):
    """Base of every deep search record: which tool, and what the call showed."""

    tool: str
    seen: list[Seen]


class Plan(Observed):
    tool: Literal["plan"]


class Search(Observed):
    tool: Literal["search"]
    query: str
    """The query with its whitespace collapsed."""
    k: int
    results: list[Result]


class Open(Observed):
    tool: Literal["open"]
    url: str


class Find(Observed):
    tool: Literal["find"]
    url: str
    pattern: str


class Answer(Observed):
    """The final answer as the env scored it (``carr.score``)."""

    tool: Literal["answer"]
    answer: str
    correct: bool
    outcome: float
    rubric: float
    c_grpo: float
    cited: list[str]


RECORDS = StepRecords("deepsearch-v0", {"plan": Plan, "search": Search, "open": Open, "find": Find, "answer": Answer})


def observed(steps: Iterable[Step | Observed]) -> list[Observed]:
    """The records of ``steps`` that have one (a step given as its record stays as it is)."""
    out = []
    for s in steps:
        record = s if isinstance(s, Observed) else RECORDS.get(s, Observed)
        if record is not None:
            out.append(record)
    return out
