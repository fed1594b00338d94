"""What the calculator env's tools record in ``Step.info`` (read by its checks, see ``core.steprecord``)."""

from __future__ import annotations

from rubricgym.core.steprecord import StepRecords, ToolRecord


class Calculation(ToolRecord):
    """A calculator call that evaluated."""

    value: int | float
    """The result (an int stays an int: the agent sees it in the step's details)."""


class Answer(ToolRecord):
    """The final answer."""

    value: float
    correct: bool
    """Whether it equals the task's answer (private: never in the agent's details)."""


RECORDS = StepRecords("toy-calculator-v0", {"calculator": Calculation, "answer": Answer})
