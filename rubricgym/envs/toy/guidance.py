"""Graded hints for a calculator problem whose group of attempts all failed (``CalculatorEnv.guidance``).

Level 1 names the first operation and its two numbers; level 2 adds the whole plan, one operation per calculator
call, each later step applied to "that result". Only numbers the prompt states appear (the starting count and
each operation's operand), never an intermediate value or the answer: a later step's left operand is an
intermediate value (``60 / 4`` after ``15 * 4`` says the answer of a 2-step problem ``15 * 4 / 4``), so a step is
written by its operation and operand alone. An operand that happens to equal the answer is written in words, and
no two numbers are ever adjacent words (the leak scanner reads "12 3" as "123" too).
"""

from __future__ import annotations

from collections.abc import Sequence

LEVELS = 2
_FIRST = {
    "+": "the sum: add {a} and {b}",
    "-": "the difference: subtract {b} from {a}",
    "*": "the product: multiply {a} by {b}",
    "/": "the quotient: divide {a} by {b}",
}
"""How the first operation is said (both numbers are stated in the prompt)."""
_LATER = {
    "+": "add {n} to that result",
    "-": "subtract {n} from that result",
    "*": "multiply that result by {n}",
    "/": "divide that result by {n}",
}
"""How a later operation is said: its left operand is the previous result, never written out."""


def _number(n: str, answer: int | float, what: str) -> str:
    """``n`` as shown in the hint, or ``what`` in words when it equals the answer."""
    return what if float(n) == float(answer) else n


def _first(steps: Sequence[str], answer: int | float) -> str:
    left, op, right = steps[0].split()
    a = _number(left, answer, "the first number stated")
    return _FIRST[op].format(a=a, b=_number(right, answer, "the second number stated"))


def first_operation(steps: Sequence[str], answer: int | float) -> str:
    """Level 1: the first operation, by name, with its two numbers."""
    return (
        f"Start with the first operation the problem describes, {_first(steps, answer)}. Use the calculator for "
        "it, then do the later operations the same way, one calculator call each."
    )


def plan(steps: Sequence[str], answer: int | float) -> str:
    """Level 2: every operation in order, each later one applied to the previous result, then the answer."""
    parts = [_first(steps, answer).split(": ", 1)[1]]
    for step in steps[1:]:
        _, op, right = step.split()
        parts.append(_LATER[op].format(n=_number(right, answer, "the number the problem states for it")))
    count = "one operation" if len(steps) == 1 else f"{len(steps)} operations"
    return (
        f"The plan, one calculator call per operation: first {'; then '.join(parts)}. That is {count} in all; "
        "then call answer with the last calculator result, exactly as the calculator gave it."
    )


def hint(steps: Sequence[str], answer: int | float, level: int) -> str | None:
    """The hint at ``level`` (1..``LEVELS``), ``None`` beyond."""
    if level == 1:
        return first_operation(steps, answer)
    if level == 2:
        return plan(steps, answer)
    return None
