"""``@tool``: schemas from signatures and docstrings, dispatch by name, argument checks as observations."""

from typing import Literal

import pytest

from rubricgym import RubricEnv, Task, ToolOutput, tool
from rubricgym.core.checks import check, check_set
from rubricgym.core.tools import json_schema
from rubricgym.core.types import CheckResult


class NotesEnv(RubricEnv):
    env_id, stages = "notes-test-v0", ("write", "answer")

    def sample_task(self, rng, split="train"):
        return Task(id=f"notes-{split}", env_id="notes-test-v0", split=split, prompt="Write a note.", hidden={})

    @tool(examples={"title": "groceries"})
    def write(self, title: str, tags: list[str], priority: Literal["low", "high"] = "low", pinned: bool = False):
        """Write a note.

        Longer explanation that is not part of the description.

        Args:
            title: the note's title,
                continued on a second line
            tags: labels to file it under
            priority: how urgent it is
        """
        return f"wrote {title} [{','.join(tags)}] {priority} pinned={pinned}"

    @tool(name="finish")
    def _finish(self, count: int | None = None) -> ToolOutput:
        """End the episode."""
        return ToolOutput(text="bye", done=True, answer=str(count))


def test_schema_comes_from_signature_hints_and_docstring():
    write, finish = NotesEnv().tools()
    assert write.name == "write" and write.description == "Write a note."
    props = write.parameters["properties"]
    assert props["title"] == {
        "type": "string",
        "description": "the note's title, continued on a second line",
        "examples": ["groceries"],
    }
    assert props["tags"]["type"] == "array" and props["tags"]["items"] == {"type": "string"}
    assert props["priority"] == {
        "type": "string",
        "enum": ["low", "high"],
        "description": "how urgent it is",
        "default": "low",
    }
    assert props["pinned"] == {"type": "boolean", "default": False}
    assert write.parameters["required"] == ["title", "tags"]
    assert write.parameters["additionalProperties"] is False
    assert finish.name == "finish" and finish.parameters["required"] == []
    assert finish.parameters["properties"]["count"] == {"type": ["integer", "null"]}


def test_tool_list_is_one_object_per_class():
    assert NotesEnv().tools() is NotesEnv().tools()


def test_calls_dispatch_by_name_and_bad_values_become_observations():
    env = NotesEnv()
    env.reset(seed=0)
    obs, *_ = env.step('<tool_call>{"name": "write", "arguments": {"title": "a", "tags": ["x", "y"]}}</tool_call>')
    assert obs == "wrote a [x,y] low pinned=False"
    obs, _, _, _, info = env.step(
        '<tool_call>{"name": "write", "arguments": {"title": "a", "tags": [], "priority": "urgent"}}</tool_call>'
    )
    assert "must be one of 'low', 'high'" in obs and info["tool_error"]
    obs, *_ = env.step('<tool_call>{"name": "write", "arguments": {"title": 3, "tags": []}}</tool_call>')
    assert "must be string" in obs
    _, _, terminated, _, _ = env.step('<tool_call>{"name": "finish", "arguments": {"count": 2}}</tool_call>')
    assert terminated and env.outcome.answer == "2"


def test_declaration_errors_name_the_problem():
    with pytest.raises(TypeError, match="needs a type hint"):

        class NoHint(NotesEnv):
            @tool
            def bad(self, x):
                """Bad."""

        NoHint().tools()
    with pytest.raises(TypeError, match="has no JSON schema"):
        json_schema(set, "f(x)")


def test_check_takes_its_name_from_the_function():
    @check(scope="step")
    def step_ok(traj, step=None):
        """Fine."""
        return CheckResult.of(True, "ok")

    assert step_ok.name == "step_ok" and step_ok.scope == "step" and step_ok.description == "Fine."
    assert set(check_set(step_ok)) == {"step_ok"}
    with pytest.raises(ValueError, match="two checks"):
        check_set(step_ok, step_ok)


def test_a_tool_advertised_without_code_is_the_env_authors_error_named_at_the_first_call():
    from rubricgym.core.types import ToolSpec

    class Advertises(NotesEnv):  # offers a "delete" tool but neither declares it with @tool nor overrides call_tool
        def tools(self):
            return [*super().tools(), ToolSpec(name="delete", description="Delete a note.", parameters={})]

    env = Advertises()
    env.reset(seed=0)
    with pytest.raises(TypeError, match="has no @tool named 'delete': declare it with @tool or override call_tool"):
        env.step('<tool_call>{"name": "delete", "arguments": {}}</tool_call>')


def test_a_changed_tool_schema_is_checked_against_the_new_spec_not_a_cached_one():
    from rubricgym.core.types import ToolSpec

    class Switches(NotesEnv):  # tools per episode: a new list (and new specs) when they change
        strict = False

        def tools(self):
            write, finish = super().tools()
            if not self.strict:
                return [write, finish]
            params = {**finish.parameters, "properties": {"count": {"type": "string"}}, "required": ["count"]}
            return [write, ToolSpec(name="finish", description=finish.description, parameters=params)]

    env = Switches()
    env.reset(seed=0)
    finish = '<tool_call>{"name": "finish", "arguments": {"count": 2}}</tool_call>'
    assert env.step(finish)[2]  # valid under the first schema: the episode ends
    env.strict = True
    obs, info = env.reset(seed=0)
    assert "finish(count: string)" in obs  # the system prompt follows the tools
    obs, _, terminated, _, info = env.step(finish)
    assert not terminated and info["parse_error"] == "argument 'count' of tool 'finish' must be string, got int (2)"
    _, _, _, _, info = env.step('<tool_call>{"name": "finish", "arguments": {}}</tool_call>')
    assert info["parse_error"] == "tool 'finish' is missing required argument(s): count"
    env.strict = False  # and back, within the episode
    assert env.step(finish)[2]


def test_a_subclass_declares_its_own_tools_whatever_was_built_first():
    base = [t.name for t in NotesEnv().tools()]

    class More(NotesEnv):
        @tool
        def erase(self, title: str) -> str:
            """Erase a note."""
            return f"erased {title}"

    assert [t.name for t in More().tools()] == [*base, "erase"]
    assert [t.name for t in NotesEnv().tools()] == base
    env = More()
    env.reset(seed=0)
    assert env.step('<tool_call>{"name": "erase", "arguments": {"title": "a"}}</tool_call>')[0] == "erased a"
