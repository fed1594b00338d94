"""The calculator ``teacher``: works a problem from its text with the calculator and answers what it computed.

Unlike the ``oracle`` (``agents.py``), which replays the task's hidden solution, the teacher reads only the chat:
it parses the problem from the prompt (a word problem's sentences, or a bare expression), types one operation per
turn into the calculator, always starting from the calculator's last result as the policy must, and answers with
the last number the calculator returned. Its path varies with its seed (the operand order of a sum or product, the
spacing of the expression, whether a division is written ``/`` or ``//``) so a clone learns the protocol, not one
string. Its episodes are warm-start data (issue #38); it never receives the task.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

import numpy as np

from rubricgym.core.agent import SeededAgent, tool_call
from rubricgym.core.parsing import parse_tool_call
from rubricgym.core.types import Message, Task, ToolSpec
from rubricgym.envs.toy.arith import arithmetic_tree

DEFAULT_MAX_STEPS = 8
"""``toy-calculator-v0``'s turn budget (``CalculatorEnv.default_max_steps``); the prompt does not state it."""
_START = re.compile(r"\b([A-Z][\w-]*) has (\d+) (\w+)\.")
_OPS = (
    (re.compile(r"receives (\d+) more"), "+"),
    (re.compile(r"gives away (\d+)"), "-"),
    (re.compile(r"swapped for (\d+)"), "*"),
    (re.compile(r"splits them evenly into (\d+)"), "/"),
)
_COMPUTE = re.compile(r"Compute (.+?)\.(?:\s|$)")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?(?:e[-+]?\d+)?$")
_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}
COMMUTATIVE = frozenset({"+", "*"})


class ProblemError(ValueError):
    """A prompt the teacher cannot read as a calculator problem (the message quotes it)."""


@dataclass(frozen=True)
class Operation:
    """One operation of the solution: ``left op right``, where an operand is a number from the prompt or ``None``
    for the previous operation's result (what the calculator returned)."""

    op: str
    left: float | None
    right: float | None


def read_problem(prompt: str) -> list[Operation]:
    """The operations the prompt asks for, in the order they must be computed (innermost first)."""
    if m := _COMPUTE.search(prompt):
        try:
            tree = arithmetic_tree(m.group(1))
        except SyntaxError:
            raise ProblemError(f"cannot read the expression in {prompt!r}") from None
        ops: list[Operation] = []
        _postorder(tree, ops, prompt)
        return ops
    start = _START.search(prompt)
    if start is None:
        raise ProblemError(f"cannot find the starting amount ('NAME has N THINGS.') in {prompt!r}")
    out: list[Operation] = []
    first: float | None = float(start.group(2))
    for sentence in re.split(r"(?<=\.)\s+", prompt[start.end() :]):
        for pattern, op in _OPS:
            if m := pattern.search(sentence):
                out.append(Operation(op, first, float(m.group(1))))
                first = None
                break
    if not out:
        raise ProblemError(f"found no operation (receives, gives away, swapped for, splits) in {prompt!r}")
    return out


def _postorder(node: ast.expr, out: list[Operation], prompt: str) -> float | None:
    """Append the operations of ``node`` to ``out`` (children first); its value if a plain number, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        value = _postorder(node.operand, out, prompt)
        return None if value is None else -value
    if isinstance(node, ast.BinOp) and type(node.op) in _SYMBOL:
        left = _postorder(node.left, out, prompt)
        right = _postorder(node.right, out, prompt)
        if left is None and right is None:
            raise ProblemError(f"the expression in {prompt!r} nests on both sides; the teacher works one chain")
        out.append(Operation(_SYMBOL[type(node.op)], left, right))
        return None
    raise ProblemError(f"unsupported element {ast.unparse(node)!r} in {prompt!r}")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


class Teacher(SeededAgent):
    """An honest calculator teacher (see the module docstring). ``max_steps``: the env's turn budget, so that a
    problem of more operations than turns is computed two operations a call."""

    name = "teacher"

    def __init__(self, seed: int | None = None, max_steps: int = DEFAULT_MAX_STEPS):
        super().__init__(seed)
        self.max_steps = max_steps

    def episode(self, task: Task, seed: int | None) -> Teacher:
        """A fresh teacher for one episode; ``task`` is dropped unread (its ``hidden`` is the answer)."""
        return Teacher(seed if seed is not None else self.seed, self.max_steps)

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        prompt = next((m.content or "" for m in messages if m.role == "user"), "")
        ops = read_problem(prompt)
        results = self._results(messages)
        calls = self._chunks(ops)
        k = len(results)
        if k >= len(calls):
            return tool_call("answer", value=_as_value(results[-1]))
        previous = results[-1] if results else None
        return tool_call("calculator", expression=self._expression(calls[k], previous, k))

    def _results(self, messages: list[Message]) -> list[float]:
        """The numbers the calculator returned, in order (a refused expression returns none)."""
        out: list[float] = []
        for i, msg in enumerate(messages):
            if msg.role != "assistant":
                continue
            call = parse_tool_call(msg.content or "")
            if isinstance(call, str) or call.name != "calculator":
                continue
            reply = next((m.content or "" for m in messages[i + 1 :] if m.role in ("user", "tool")), "").strip()
            if _NUMBER.match(reply):
                out.append(float(reply))
        return out

    def _chunks(self, ops: list[Operation]) -> list[list[Operation]]:
        """The operations grouped into calls: one a call, or two where the turns (less the answer) are too few."""
        calls = max(1, self.max_steps - 1)
        if len(ops) <= calls:
            return [[op] for op in ops]
        size = -(-len(ops) // calls)
        return [ops[i : i + size] for i in range(0, len(ops), size)]

    def _expression(self, chunk: list[Operation], previous: float | None, k: int) -> str:
        """The calculator input for ``chunk``, starting from the calculator's ``previous`` result."""
        rng = np.random.default_rng([self.seed or 0, k])
        spaced = bool(np.random.default_rng(self.seed or 0).random() < 0.7)
        expr: str | None = None
        for op in chunk:
            left = _number(op.left) if op.left is not None else (expr if expr is not None else _value(previous))
            right = _number(op.right) if op.right is not None else (expr if expr is not None else _value(previous))
            symbol = op.op
            if symbol == "/" and rng.random() < 0.3 and len(chunk) == 1:
                symbol = "//"  # exact divisions: the same value, another habit
            if expr is not None and (op.left is None or op.right is None):
                left, right = (f"({left})", right) if op.left is None else (left, f"({right})")
            if symbol in COMMUTATIVE and rng.random() < 0.5:
                left, right = right, left
            expr = f"{left} {symbol} {right}" if spaced else f"{left}{symbol}{right}"
        assert expr is not None
        return expr


def _value(previous: float | None) -> str:
    if previous is None:
        raise ProblemError("an operation needs the previous result, but the calculator has returned none yet")
    return _number(previous)


def _as_value(x: float) -> int | float:
    return int(x) if float(x).is_integer() else x
