"""Typed step records: a step's info parses as its tool's record, and anything else fails loudly, naming the env,
the step, the tool and the bad key."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    PlainSerializer,
    Tag,
    ValidationError,
    computed_field,
    field_serializer,
    field_validator,
    model_validator,
)

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


class Serialised(ToolRecord):
    when: float

    @field_serializer("when")
    def _rounded(self, v: float) -> float:
        return round(v)


class Computed(ToolRecord):
    a: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def doubled(self) -> int:
        return 2 * self.a


class Hidden(ToolRecord):
    shown: int
    secret: int = Field(default=0, exclude=True)


class Annotated_(ToolRecord):
    n: Annotated[int, Field(ge=0)]
    label: Annotated[str, PlainSerializer(str.upper)]


class Kinds(ToolRecord):
    choice: Literal["a", "b"]
    maybe: int | float | None = None
    flag: bool = False


@pytest.mark.parametrize(
    "record",
    [
        Lookup(item="a", hits=1),
        Lookup(item="a", hits=1, note="n"),
        Kinds(choice="b"),
        Kinds(choice="a", maybe=2, flag=True),
        Kinds(choice="a", maybe=2.5),
        Write(tool="write", changed_files=["x.py"]),
        Serialised(when=1.7),
        Computed(a=2),
        Hidden(shown=1, secret=2),
        Annotated_(n=1, label="low"),
    ],
)
def test_info_equals_model_dump_of_the_set_fields_whatever_the_record(record: ToolRecord):
    # info() copies the values of a record of plain scalars instead of dumping it; every record still gets exactly
    # what model_dump gives, serializers, computed and excluded fields included
    info = record.info()
    assert info == record.model_dump(exclude_unset=True)
    assert [type(v) for v in info.values()] == [type(v) for v in record.model_dump(exclude_unset=True).values()]
    info["extra"] = 1  # a fresh dict: writing to it leaves the record alone
    assert "extra" not in record.info()


def test_info_dumps_what_a_serializer_changes():
    assert Serialised(when=1.7).info() == {"when": 2}
    assert Computed(a=2).info() == {"a": 2, "doubled": 4}
    assert Hidden(shown=1, secret=2).info() == {"shown": 1}
    assert Annotated_(n=1, label="low").info() == {"n": 1, "label": "LOW"}
    assert Kinds(choice="a", maybe=2).info()["maybe"] == 2 and type(Kinds(choice="a", maybe=2).info()["maybe"]) is int


class Measured(ToolRecord):
    x: float
    n: int | None = None


class Checked(ToolRecord):
    x: int

    @field_validator("x")
    @classmethod
    def _even(cls, v: int) -> int:
        if v % 2:
            raise ValueError("odd")
        return v * 10


class Bounded(ToolRecord):
    x: int = Field(ge=0)


class Aliased(ToolRecord):
    x: int = Field(alias="ex")


class Stripped(ToolRecord):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)
    s: str


class Whole(ToolRecord):
    low: int
    high: int

    @model_validator(mode="after")
    def _ordered(self) -> Whole:
        if self.low > self.high:
            raise ValueError("low > high")
        return self


class Strict(ToolRecord):
    model_config = ConfigDict(extra="forbid", strict=True)
    x: float


BUILD_CASES: list[tuple[type[ToolRecord], dict[str, Any]]] = [
    (Lookup, {"item": "a", "hits": 1}),
    (Lookup, {"item": "a", "hits": 1, "note": None}),
    (Lookup, {"item": "a", "hits": 1, "note": "n"}),
    (Lookup, {"item": "a", "hits": True}),  # a bool is not an int to pass as it is
    (Lookup, {"item": "a", "hits": "3"}),  # coerced by validation
    (Lookup, {"item": "a", "hits": 1.0}),
    (Lookup, {"item": "a"}),  # missing
    (Lookup, {"item": "a", "hits": 1, "hitz": 2}),  # unknown
    (Lookup, {"item": 3, "hits": 1}),
    (Measured, {"x": 1}),  # an int for a float field becomes 1.0
    (Measured, {"x": 1.5, "n": None}),
    (Measured, {"x": 1.5, "n": 2}),
    (Measured, {"x": False}),
    (Kinds, {"choice": "a"}),
    (Kinds, {"choice": "c"}),  # not one of the Literal's values
    (Kinds, {"choice": "b", "maybe": 2, "flag": True}),
    (Kinds, {"choice": "b", "maybe": 2.5}),
    (Checked, {"x": 2}),  # a validator changes the value
    (Checked, {"x": 3}),
    (Bounded, {"x": 1}),
    (Bounded, {"x": -1}),  # a constraint refuses it
    (Aliased, {"ex": 1}),
    (Aliased, {"x": 1}),
    (Stripped, {"s": "  padded "}),  # a config option changes the value
    (Whole, {"low": 1, "high": 2}),  # a model validator: the record is built
    (Whole, {"low": 3, "high": 2}),
    (Strict, {"x": 1}),
    (Strict, {"x": 1.0}),
    (Write, {"tool": "write", "changed_files": ["a.py"]}),
]
"""What a tool might pass to its record: ``Record(**fields).info()`` is the record's dump, or building it raises."""


@pytest.mark.parametrize(("kind", "fields"), BUILD_CASES)
def test_a_record_built_from_what_a_tool_passes_has_its_dump_as_info(kind: type[ToolRecord], fields: dict[str, Any]):
    # coercions, validators, aliases, config and constraints all happen in building; info() is then the dump
    try:
        record = kind(**fields)
    except ValidationError:
        return
    info = record.info()
    dumped = record.model_dump(exclude_unset=True)
    assert info == dumped and [(k, type(v)) for k, v in info.items()] == [(k, type(v)) for k, v in dumped.items()]


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
