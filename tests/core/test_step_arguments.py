"""A step checks a call's arguments as ``call_error`` does: the step's own check of the usual call (every argument
given, each of a type its schema takes as it is) stands in for ``call_error`` only where it would say the same."""

from __future__ import annotations

import json
from typing import Any

import pytest

import rubricgym
from rubricgym.core.parsing import call_error
from rubricgym.core.types import ToolSpec

SCHEMAS: dict[str, dict[str, Any]] = {
    "typed": {
        "properties": {"i": {"type": "integer"}, "n": {"type": "number"}, "s": {"type": "string"}},
        "required": ["i", "n", "s"],
        "additionalProperties": False,
    },
    "kinds": {
        "properties": {
            "b": {"type": "boolean"},
            "a": {"type": "array"},
            "o": {"type": "object"},
            "maybe": {"type": ["string", "null"]},
            "odd": {"type": "decimal"},  # a kind JSON Schema does not have: left to the tool
        },
        "required": ["b"],
        "additionalProperties": False,
    },
    "untyped": {"properties": {"x": {}, "y": {"type": "string"}}, "required": ["x"], "additionalProperties": False},
    "undeclared": {"properties": {"x": {"type": "string"}}, "required": ["x", "y"], "additionalProperties": False},
    "open": {"properties": {"x": {"type": "string"}}, "required": ["x"]},
    "empty": {"properties": {}, "required": [], "additionalProperties": False},
}
TOOLS = [ToolSpec(name=name, description=f"The {name} tool.", parameters=p) for name, p in SCHEMAS.items()]


class _SchemaEnv(rubricgym.RubricEnv):
    """Tools of arbitrary schemas (an env with its own ``tools()``) that echo their arguments."""

    env_id, stages = "schema-test-v0", ("act",)

    def sample_task(self, rng, split="train"):
        return rubricgym.Task(id="schema-0", env_id="schema-test-v0", prompt="Call tools.")

    def tools(self) -> list[ToolSpec]:
        return TOOLS

    def call_tool(self, call):
        return rubricgym.ToolOutput(text=json.dumps(call.arguments))


CASES = [
    ("typed", {"i": 1, "n": 2.5, "s": "x"}),  # the usual call
    ("typed", {"s": "x", "n": 2, "i": 1}),  # any order; an int is a number
    ("typed", {"i": 1.0, "n": 2, "s": "x"}),  # a whole float is an integer: call_error's longer check says so
    ("typed", {"i": 1.5, "n": 2, "s": "x"}),
    ("typed", {"i": True, "n": 2, "s": "x"}),  # a bool is no integer
    ("typed", {"i": 1, "n": False, "s": "x"}),
    ("typed", {"i": 1, "n": 2, "s": None}),
    ("typed", {"i": 1, "n": 2}),
    ("typed", {"i": 1, "n": 2, "s": "x", "t": 0}),
    ("kinds", {"b": True, "a": [], "o": {}, "maybe": None, "odd": "1.5"}),
    ("kinds", {"b": True, "a": [], "o": {}, "maybe": "m", "odd": 3}),
    ("kinds", {"b": 1, "a": [], "o": {}, "maybe": None, "odd": 1}),
    ("kinds", {"b": True, "a": {}, "o": {}, "maybe": None, "odd": 1}),
    ("kinds", {"b": True, "a": [], "o": [], "maybe": 1, "odd": 1}),
    ("kinds", {"b": True}),
    ("untyped", {"x": [1], "y": "s"}),
    ("untyped", {"x": 1, "y": 2}),
    ("undeclared", {"x": "s"}),
    ("undeclared", {"x": "s", "y": 1}),
    ("open", {"x": "s", "extra": 1}),
    ("open", {"x": 1}),
    ("empty", {}),
    ("empty", {"x": 1}),
    ("nope", {}),
]


@pytest.mark.parametrize(("name", "arguments"), CASES)
def test_a_steps_parse_error_is_call_errors(name: str, arguments: dict[str, Any]):
    env = _SchemaEnv()
    env.reset()
    text = "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"
    obs, _, _, _, info = env.step(text)
    expected = call_error(name, arguments, TOOLS)
    assert info["parse_error"] == expected
    step = env.trajectory().steps[0]
    assert step.action.parse_error == expected and step.action.tool_call is not None
    if expected is None:  # the tool ran with the arguments as the agent sent them
        assert json.loads(obs) == arguments and step.tool_result == obs
    else:
        assert obs.startswith(f"Invalid action: {expected}.") and step.tool_result is None
