import pytest
from pydantic import ValidationError

from rubricgym.core.types import (
    SCHEMA_VERSION,
    Action,
    Message,
    Observation,
    Step,
    Task,
    ToolCall,
    ToolSpec,
    Trajectory,
)


def make_traj() -> Trajectory:
    task = Task(id="t1", env_id="toy-calculator-v0", prompt="2+2? Ünïcödé 中文", hidden={"answer": 4})
    call = ToolCall(name="answer", arguments={"value": 4})
    obs = Observation(messages=[Message(role="user", content="ok\nline")], done=True, reward=1.0)
    step = Step(index=0, stage="answer", action=Action(text="x", tool_call=call), observation=obs)
    return Trajectory(task=task, steps=[step], agent="oracle", seed=3, versions={"python": "3.11"})


def test_trajectory_json_round_trip_is_lossless():
    t = make_traj()
    back = Trajectory.model_validate_json(t.model_dump_json())
    assert back == t
    assert back.schema_version == SCHEMA_VERSION
    assert back.steps[0].action.tool_call.arguments == {"value": 4}


def test_unknown_fields_are_rejected():
    with pytest.raises(ValidationError, match="extra"):
        Task(id="t", env_id="e-v0", prompt="p", promt="typo")


def test_newer_schema_version_is_refused_with_a_clear_message():
    data = make_traj().model_dump()
    data["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(ValidationError, match="upgrade rubricgym"):
        Trajectory.model_validate(data)


def test_toolspec_openai_format_and_example_call():
    spec = ToolSpec(
        name="search",
        description="d",
        parameters={
            "type": "object",
            "properties": {"q": {"type": "string"}, "k": {"type": ["integer", "null"]}},
            "required": ["q", "k"],
        },
    )
    assert spec.to_openai()["function"]["name"] == "search"
    assert spec.example_call() == '<tool_call>{"name": "search", "arguments": {"q": "...", "k": 1}}</tool_call>'


def test_message_to_openai_serialises_tool_calls_as_json_strings():
    m = Message(role="assistant", content=None, tool_calls=[ToolCall(id="c1", name="f", arguments={"a": 1})])
    out = m.to_openai()
    assert out["tool_calls"][0] == {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
