"""``toy-calculator-v0``: multi-step arithmetic word problems solved with a calculator tool.

Stages: ``compute`` (calculator calls) and ``answer`` (the final answer). The env's terminal reward is 1 for a
correct answer; the default rubric is gated on it (SWE-TRACE margin: every correct answer outranks every wrong
one) and ranks attempts within an outcome by their progress (operations computed, answer taken from that work,
clean calls once the work got somewhere).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from rubricgym.core.env import RubricEnv, ToolError, ToolOutput
from rubricgym.core.tools import tool
from rubricgym.core.types import Task, ToolCall
from rubricgym.envs.toy import checks
from rubricgym.envs.toy.arith import (
    CalculatorError,
    evaluate,
    expression_problem,
    format_number,
    heldout_problem,
    word_problem,
)
from rubricgym.envs.toy.guidance import LEVELS as GUIDANCE_LEVELS
from rubricgym.envs.toy.guidance import hint
from rubricgym.envs.toy.records import RECORDS, Answer, Calculation


def parse_number(value: Any) -> float:
    """The number in an answer value (a JSON number or a numeric string such as '1,024')."""
    if isinstance(value, bool):
        raise ToolError("the answer must be a number, not true/false")
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).replace(",", "").strip())
    except ValueError:
        raise ToolError(f"the answer {value!r} is not a number; call answer with a number, e.g. 42") from None


MAX_REDRAWS = 200
"""Draws a task may take to land on its split's side of the answer partition (see ``sample_task``)."""


class CalculatorEnv(RubricEnv):
    """Arithmetic problems of ``min_ops``..``max_ops`` operations (default 2-4) with a calculator tool.

    ``style="word"`` (default) states them as word problems; ``style="expression"`` as a bare expression
    (``Compute (34 + 12) * 3.``), the easy curriculum style a 135M model can already solve now and then.
    ``guidance`` gives two levels of hints for a failing group: the first operation, then the whole plan.

    Splits: ``train`` and the held-out splits (``test`` and any other name) draw from one problem space,
    partitioned by problem: one problem in five (a stable hash of its text, ``arith.heldout_problem``) is held out,
    so no held-out problem is ever a training one (``tests/envs/test_split_overlap.py``); answers may repeat.
    """

    env_id = "toy-calculator-v0"
    stages = ("compute", "answer")
    default_max_steps = 8
    max_observation_chars = 2000
    check_set = checks.ALL
    step_records = RECORDS
    rubric_file = Path(__file__).with_name("rubric.yaml")
    public_info_keys = frozenset({"value"})
    """The number a calculator call computed (or the answer given); whether an answer is right stays private."""
    discoverable = {"answer": frozenset({"calculator"})}
    """The calculator computes the answer from the expressions the agent types: that is the task."""
    guidance_levels = GUIDANCE_LEVELS
    scripted_agents = {
        "oracle": "rubricgym.envs.toy.agents:CalculatorOracle",
        "random": "rubricgym.envs.toy.agents:RandomAgent",
        "guess": "rubricgym.envs.toy.agents:GuessingAgent",
        "teacher": "rubricgym.envs.toy.teacher:Teacher",
    }
    outcome_agents = {
        "partial": "rubricgym.envs.toy.agents:NearMissAgent",
        "failed": "rubricgym.envs.toy.agents:WrongAnswerAgent",
    }

    def __init__(
        self,
        min_ops: int | None = None,
        max_ops: int = 4,
        max_steps: int | None = None,
        render_mode: str | None = None,
        style: str = "word",
    ):
        min_ops = min(2, max_ops) if min_ops is None else min_ops
        if not 1 <= min_ops <= max_ops <= 8:
            raise ValueError(f"need 1 <= min_ops <= max_ops <= 8, got min_ops={min_ops}, max_ops={max_ops}")
        if style not in ("word", "expression"):
            raise ValueError(f"style must be 'word' or 'expression', got {style!r}")
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        self.min_ops, self.max_ops, self.style = min_ops, max_ops, style
        self._correct = False

    def sample_task(self, rng: np.random.Generator, split: str = "train") -> Task:
        """A problem of ``split``: ``train`` draws only training problems, every other split only held-out ones.

        A draw that belongs to the other side is redrawn from the same ``rng`` (deterministic per seed; a training
        draw keeps its first draw four times in five, a held-out one takes five draws on average).
        """
        heldout = split != "train"
        generate = word_problem if self.style == "word" else expression_problem
        for _ in range(MAX_REDRAWS):
            n_ops = int(rng.integers(self.min_ops, self.max_ops + 1))
            text, steps, answer = generate(rng, n_ops)
            if heldout_problem(text) == heldout:
                break
        else:  # (4/5) ** MAX_REDRAWS: never in practice, but a silent fallback would leak an answer across splits
            raise RuntimeError(f"no {split} problem after {MAX_REDRAWS} draws")
        task_id = "calc-" + hashlib.sha1(f"{split}|{text}".encode()).hexdigest()[:10]
        how = "Use the calculator for every operation" if self.style == "word" else "Use the calculator"
        return Task(
            id=task_id,
            env_id=self.env_id,
            split=split,
            prompt=f"{text} {how}, then call answer.",
            params={"n_ops": n_ops, "style": self.style},
            hidden={"answer": answer, "steps": steps},
        )

    def begin(self, task: Task) -> None:
        hidden = task.hidden
        answer, steps = hidden.get("answer"), hidden.get("steps")
        if isinstance(answer, bool) or not isinstance(answer, (int, float)) or not isinstance(steps, list):
            raise ValueError(
                f"task {task.id!r}: a {self.env_id} task needs hidden.answer (a number) and hidden.steps (the list "
                f"of intermediate expressions); its hidden has {sorted(task.hidden) or 'no keys'}"
            )
        self._correct = False

    @tool(examples={"expression": "17 * 23 - 4"})
    def calculator(self, expression: str) -> ToolOutput:
        """Evaluate an arithmetic expression (numbers, + - * / // % ** and parentheses).

        Args:
            expression: e.g. '17 * 23 - 4'
        """
        try:
            value = evaluate(expression)
        except CalculatorError as e:
            raise ToolError(str(e)) from None
        return ToolOutput(text=format_number(value), info=Calculation(value=value).info())

    @tool(examples={"value": 387})
    def answer(self, value: float | str) -> ToolOutput:
        """Give the final numeric answer; this ends the episode.

        Args:
            value: the final number
        """
        number = parse_number(value)
        expected = self._task.hidden["answer"] if self._task else None
        correct = expected is not None and abs(number - float(expected)) < 1e-6
        self._correct = correct
        return ToolOutput(
            text="Answer recorded.",
            done=True,
            answer=format_number(int(number) if number.is_integer() else number),
            reward=1.0 if correct else 0.0,
            info=Answer(value=number, correct=correct).info(),
            solved=correct,
        )

    def stage_of(self, call: ToolCall | None) -> str:
        if call is None:
            return self._stage or "compute"
        return "answer" if call.name == "answer" else "compute"

    @classmethod
    def secrets(cls, task: Task) -> list[tuple[str, Any]]:
        """The answer (the intermediate expressions restate the prompt's numbers)."""
        return [("answer", task.hidden["answer"])] if "answer" in task.hidden else []

    def guidance(self, task: Task, level: int) -> str | None:
        """Level 1: the first operation and its two numbers ("Start with ... the sum of 34 and 12"); level 2: that,
        then every later operation in order, each applied to "that result", and to answer with the last result.

        Only numbers the prompt states appear, never an intermediate value (a later step's left operand) nor the
        answer (``secrets``); an operand equal to the answer is said in words. Deterministic in the task.
        """
        steps, answer = task.hidden.get("steps"), task.hidden.get("answer")
        if not steps or isinstance(answer, bool) or not isinstance(answer, int | float):
            return None
        return hint(steps, answer, level)

    def summary(self) -> dict[str, Any]:
        steps = self.steps
        return {
            "calculator_calls": sum(1 for s in steps if s.action.tool_call and s.action.tool_call.name == "calculator"),
            "invalid_steps": sum(1 for s in steps if s.action.parse_error or s.tool_error),
            "correct": self._correct,
        }
