"""Typed step records: a step's info parses as its tool's record, and anything else fails loudly, naming the env,
the step, the tool and the bad key."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import Discriminator, Tag

from rubricgym.core.steprecord import Edits, RecordError, StepRecords, ToolRecord, env_records
from rubricgym.core.types import Action, Observation, Step, ToolCall


class Lookup(ToolRecord):
    item: str
    hits: int
    note: str | None = None


class Write(Edits):
    tool: Literal["write"]


class Moved(ToolRecord):
    moved: bool


class Left(ToolRecord):
    left: Literal[True]
    to: str


Move = Annotated[
    Annotated[Moved, Tag("moved")] | Annotated[Left, Tag("left")],
    Discriminator(lambda v: "left" if "left" in (v if isinstance(v, dict) else vars(v)) else "moved"),
]
RECORDS = StepRecords("demo-v0", {"lookup": Lookup, "write": Write, "move": Move})


def step(tool: str | None, info: dict[str, Any], *, index: int = 3, parse_error: str | None = None, **kw: Any) -> Step:
    call = ToolCall(name=tool) if tool else None
    return Step(
        index=index,
        stage="act",
        action=Action(text="...", tool_call=call, parse_error=parse_error),
        observation=Observation(messages=[]),
        info=info,
        **kw,
    )


def test_a_step_reads_as_its_tools_record():
    s = step("lookup", {"item": "apple", "hits": 2})
    record = RECORDS.of(s)
    assert record == Lookup(item="apple", hits=2)
    assert RECORDS.get(s, Lookup) == record and RECORDS.get(s, Write) is None
    w = step("write", {"tool": "write", "changed_files": ["a.py"]}, index=4)
    assert RECORDS.each([s, w], Edits) == [(w, Write(tool="write", changed_files=["a.py"]))]


def test_a_renamed_key_names_env_step_tool_and_key_and_what_to_do():
    with pytest.raises(RecordError) as e:
        RECORDS.of(step("lookup", {"item": "apple", "hitz": 2}))
    msg = str(e.value)
    assert msg.startswith("demo-v0: step 3, tool 'lookup'")
    assert "key 'hits' is missing" in msg and "key 'hitz' is not part of the record" in msg
    assert "(Lookup)" in msg and "Record(...).info()" in msg


def test_a_wrong_type_names_the_key_and_the_value():
    with pytest.raises(RecordError, match=r"key 'hits': Input should be a valid integer.*\(got 'many'\)"):
        RECORDS.of(step("lookup", {"item": "apple", "hits": "many"}))
    with pytest.raises(RecordError, match=r"key 'changed_files\.0'"):
        RECORDS.of(step("write", {"tool": "write", "changed_files": [7]}))


def test_steps_without_a_tool_run_have_no_record():
    assert RECORDS.of(step(None, {}, parse_error="no tool call found")) is None
    assert RECORDS.of(step("lookup", {}, parse_error="missing argument 'item'")) is None  # the call as given
    assert RECORDS.of(step("lookup", {}, tool_error="no such item")) is None  # ToolError: the contract records {}
    with pytest.raises(RecordError, match="step 3 made no valid tool call, yet its info holds"):
        RECORDS.of(step(None, {"item": "apple"}, parse_error="no tool call found"))


def test_a_failed_tool_that_recorded_something_is_held_to_its_record():
    failed = step("move", {"left": True, "to": "http://elsewhere"}, tool_error="left the app")
    assert RECORDS.of(failed) == Left(left=True, to="http://elsewhere")
    with pytest.raises(RecordError, match=r"tool 'move'.*\(Moved \| Left\).*key 'left\.too' is not part"):
        RECORDS.of(step("move", {"left": True, "too": "x"}, tool_error="left the app"))


def test_a_tool_without_a_declared_record_is_an_error():
    with pytest.raises(RecordError, match=r"ran tool 'delete', which has no declared record .*add 'delete'"):
        RECORDS.of(step("delete", {}))


def test_info_is_the_set_fields_and_reads_back_as_the_same_record():
    assert Lookup(item="a", hits=1).info() == {"item": "a", "hits": 1}  # an unset optional field is no key
    full = Lookup(item="a", hits=1, note=None)
    assert full.info() == {"item": "a", "hits": 1, "note": None}
    assert RECORDS.of(step("lookup", full.info())) == full


def test_records_are_read_fresh_and_leave_the_wire_type_alone():
    s = step("lookup", {"item": "apple", "hits": 2})
    assert RECORDS.get(s, Lookup) is not None
    assert Step.model_validate_json(s.model_dump_json()) == s  # nothing of the record rides on the step
    s.info["hitz"] = s.info.pop("hits")  # a step edited after a read is read again, not served from a cache
    with pytest.raises(RecordError, match="hitz"):
        RECORDS.of(s)


def test_env_records_finds_the_declaration():
    class Env:
        step_records = RECORDS

    class Bare:
        pass

    class Wrong:
        step_records = {"lookup": Lookup}

    assert env_records(Env) is RECORDS and env_records(Env()) is RECORDS and env_records(Bare) is None
    with pytest.raises(TypeError, match="must be a StepRecords"):
        env_records(Wrong)
    with pytest.raises(ValueError, match="at least one tool"):
        StepRecords("demo-v0", {})
