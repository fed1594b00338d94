"""A safe evaluator of arithmetic expressions (the calculator tool's engine) and the word-problem generator."""

from __future__ import annotations

import ast
import hashlib
import operator

import numpy as np

from rubricgym.core.pyast import parse_expression

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
MAX_MAGNITUDE = 1e15


class CalculatorError(ValueError):
    """An expression the calculator refuses, with a reason an agent can act on."""


def arithmetic_tree(text: str) -> ast.expr:
    """The expression ``text`` parsed, the operator signs people write (``× ÷ ^``) read as Python's; raises
    ``SyntaxError`` for anything that does not parse."""
    return parse_expression(text.replace("×", "*").replace("÷", "/").replace("^", "**"))


def evaluate(expression: str) -> float | int:
    """Evaluate ``+ - * / // % **`` over numbers and parentheses; anything else is refused with a reason."""
    if not expression.strip():
        raise CalculatorError("the expression is empty")
    if len(expression) > 200:
        raise CalculatorError("the expression is longer than 200 characters")
    try:
        tree = arithmetic_tree(expression)
    except SyntaxError:
        raise CalculatorError(
            f"{expression!r} is not an arithmetic expression (use numbers, + - * / // % ** and parentheses)"
        ) from None
    value = _eval(tree)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value


def _eval(node: ast.AST) -> float | int:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _eval(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 12 or abs(left) > 1e6):
            raise CalculatorError("exponent too large (at most 12, base at most 1e6)")
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
            raise CalculatorError("division by zero")
        result = _BINOPS[type(node.op)](left, right)
        if isinstance(result, complex) or abs(result) > MAX_MAGNITUDE:
            raise CalculatorError(f"result out of range (magnitude above {MAX_MAGNITUDE:g})")
        return result
    raise CalculatorError(f"unsupported element {ast.unparse(node)!r}: use numbers, + - * / // % ** and parentheses")


def format_number(value: float | int) -> str:
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.6e}"
    return str(value)


NOUNS = ["apples", "books", "coins", "marbles", "stamps", "tickets", "bricks", "shells", "cards", "seeds"]
NAMES = ["Ada", "Bruno", "Chiara", "Dmitri", "Eun-ji", "Farah", "Gustavo", "Hana", "Ines", "José"]


def word_problem(rng: np.random.Generator, n_ops: int) -> tuple[str, list[str], int]:
    """A problem of ``n_ops`` operations: (text, the expressions a solver evaluates in order, the answer).

    Every intermediate value is a positive integer, so the answer is exact.
    """
    name = NAMES[rng.integers(len(NAMES))]
    noun = NOUNS[rng.integers(len(NOUNS))]
    value = int(rng.integers(12, 60))
    sentences = [f"{name} has {value} {noun}."]
    steps: list[str] = []
    for _ in range(n_ops):
        kind = rng.choice(["add", "sub", "mul", "div"])
        if kind == "div":
            divisors = [d for d in range(2, 10) if value % d == 0]
            kind = "mul" if not divisors else kind
        if kind == "sub" and value < 8:
            kind = "add"
        if kind == "add":
            n = int(rng.integers(5, 90))
            sentences.append(f"{name} receives {n} more {noun}.")
            expr, value = f"{value} + {n}", value + n
        elif kind == "sub":
            n = int(rng.integers(1, value))
            sentences.append(f"{name} gives away {n} {noun}.")
            expr, value = f"{value} - {n}", value - n
        elif kind == "mul":
            n = int(rng.integers(2, 13))
            sentences.append(f"Every one of them is swapped for {n} {noun}.")
            expr, value = f"{value} * {n}", value * n
        else:
            n = int(rng.choice(divisors))
            sentences.append(f"{name} splits them evenly into {n} boxes and keeps one box.")
            expr, value = f"{value} / {n}", value // n
        steps.append(expr)
    sentences.append(f"How many {noun} does {name} have now?")
    return " ".join(sentences), steps, value


def expression_problem(rng: np.random.Generator, n_ops: int) -> tuple[str, list[str], int]:
    """The same problem as ``word_problem`` (same draws) stated as a bare expression: ``Compute (34 + 12) * 3.``

    The easy curriculum style: a small model only has to copy the expression into the calculator and the
    calculator's result into ``answer``.
    """
    _, steps, value = word_problem(rng, n_ops)
    expr = steps[0]
    for step in steps[1:]:
        expr = f"({expr}) {step.split(' ', 1)[1]}"
    return f"Compute {expr}.", steps, value


HELDOUT_SHARE = 5
"""One problem in ``HELDOUT_SHARE`` (by a stable hash of its text) belongs to the held-out splits only."""


def heldout_problem(text: str) -> bool:
    """Whether the problem ``text`` is reserved for held-out splits: training never draws it.

    A stable hash (not Python's salted ``hash``), so the partition is the same in every process and release. The
    partition is by problem, not by answer: a hash of the text is independent of the numbers' difficulty, so both
    sides keep the generator's mix of operations and answers (a partition by answer skewed held-out problems
    towards division and, at the quickstart's seed, trained a policy that stopped answering). Two different
    problems may share an answer: a number is not the task, the problem is.
    """
    return int(hashlib.sha1(f"toy-calculator|problem|{text}".encode()).hexdigest()[:8], 16) % HELDOUT_SHARE == 0
