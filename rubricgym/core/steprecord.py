"""Typed step records: what an env's tools write in ``Step.info``, declared as pydantic models that checks read.

A check that reads ``step.info.get("covers", [])`` turns a renamed or misspelt key into a quietly unmet
criterion, and an RL run trains on the wrong reward. Instead an env declares, per tool, the record that tool
writes (a ``ToolRecord`` subclass, ``extra="forbid"``), its tools write ``Record(...).info()`` and its checks read
``RECORDS.of(step)``: a step whose info does not match its tool's record raises ``RecordError``, naming the env,
the step, the tool and the bad key, and a check that raises becomes an error verdict, never a 0.

One model per tool, chosen by the step's own call (``step.action.tool_call.name``), rather than one model per env
with a discriminator key: the tool that ran is already on every step, so no env has to add a ``tool`` key to
its info (and no agent-visible detail changes), trajectories recorded before these models still parse, and each
model lists exactly its tool's keys, so a key written by the wrong tool is an error too. A tool whose output has
several shapes (a browser action that left the app) maps to an annotated union with a discriminator of its own.

Records are parsed on each ``of`` call, never cached: a ``Step`` is mutable and unhashable, a cache keyed by it
could return a record its info no longer matches, and a record parses in microseconds (checks read a few dozen).

Which steps have a record: a step that made no valid call (a parse error) has none and must have no info; a
step whose tool raised ``ToolError`` has none when its info is empty (the env contract records ``{}``) and is
held to its tool's record otherwise (a browser action that failed still reports the page's state).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from annotated_types import BaseMetadata
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from rubricgym.core.types import Step

R = TypeVar("R", bound="ToolRecord")

_SCALARS = (int, float, str, bool, type(None))


@functools.cache
def _dumps_as_is(cls: type[BaseModel]) -> bool:
    """Whether ``cls.model_dump()`` returns its instances' field values unchanged: every field is a scalar (a
    union or ``Literal`` of them) with no serializer, alias dump or exclusion, and the model keeps no extras.

    Decided once per class, on its first ``info()`` (the class is complete by then), and looked up by class: a
    flag read as a class attribute would go through pydantic's metaclass, which costs more than the copy."""
    config, decorators = cls.model_config, cls.__pydantic_decorators__
    if (
        config.get("extra") == "allow"
        or config.get("serialize_by_alias")
        or decorators.field_serializers
        or decorators.model_serializers
        or cls.__pydantic_computed_fields__
    ):
        return False
    return all(
        not field.exclude
        and getattr(field, "exclude_if", None) is None  # pydantic >= 2.12
        and all(isinstance(m, BaseMetadata) for m in field.metadata)  # constraints only, no PlainSerializer
        and _is_scalar(field.annotation)
        for field in cls.model_fields.values()
    )


def _is_scalar(hint: Any) -> bool:
    if hint in _SCALARS:
        return True
    origin = get_origin(hint)
    if origin is Literal:
        return all(type(a) in _SCALARS for a in get_args(hint))
    if origin is Union or origin is types.UnionType:
        return all(_is_scalar(a) for a in get_args(hint))
    return False


class ToolRecord(BaseModel):
    """Base of a tool's typed record: the keys a tool writes in ``ToolOutput.info``, nothing else.

    A tool writes ``Record(...).info()``; checks read it back with ``StepRecords.of``."""

    model_config = ConfigDict(extra="forbid")

    def info(self) -> dict[str, Any]:
        """The ``ToolOutput.info`` this record is: every field the tool set (an optional field left unset is no
        key, so a record written and read back is the same record).

        What ``model_dump(exclude_unset=True)`` returns, in a fresh dict; a record of scalar fields (numbers,
        strings, booleans, ``None``; no serializer, computed field or excluded field) is its values as they are,
        so they are copied without the serializer's pass (a tool writes one every step)."""
        if _dumps_as_is(type(self)):
            values, given = self.__dict__, self.__pydantic_fields_set__
            if len(given) == len(values):
                return dict(values)
            return {k: v for k, v in values.items() if k in given}
        return self.model_dump(exclude_unset=True)


class Edits(ToolRecord):
    """The record of a tool that changes files: the built-in ``edited`` condition of ``applies_if`` reads it.

    An env whose tools edit files subclasses it for those tools' records, so rewards know what changed without
    reading env-specific keys."""

    changed_files: list[str]
    """Repository-relative paths the call created, modified or deleted."""


class RecordError(ValueError):
    """A step's info does not match its tool's declared record (or the tool declares none)."""


class StepRecords:
    """An env's declaration of the record each of its tools writes into ``Step.info``.

    ``tools`` maps each tool name to a ``ToolRecord`` subclass, or to an annotated union of them (with a
    ``pydantic.Discriminator``) for a tool whose info has several shapes. ``env`` names the env in errors. Envs
    expose it as the class attribute ``step_records`` (``env_records`` finds it).
    """

    def __init__(self, env: str, tools: Mapping[str, Any]):
        if not tools:
            raise ValueError(f"StepRecords for {env!r}: declare the record of at least one tool")
        self.env = env
        self.tools = dict(tools)
        self._adapters: dict[str, TypeAdapter[Any]] = {name: TypeAdapter(kind) for name, kind in tools.items()}

    def of(self, step: Step) -> ToolRecord | None:
        """The typed record of ``step``'s tool, or ``None`` when the step ran no tool (or its tool failed and
        recorded nothing). Raises ``RecordError`` when the info does not match the tool's record."""
        call = step.action.tool_call
        if call is None or step.action.parse_error is not None:
            if step.info:
                raise RecordError(
                    f"{self.env}: step {step.index} made no valid tool call, yet its info holds "
                    f"{sorted(step.info)}: only a tool that ran writes info; record these keys from a tool"
                )
            return None
        if call.name not in self._adapters:
            raise RecordError(
                f"{self.env}: step {step.index} ran tool {call.name!r}, which has no declared record (declared: "
                f"{', '.join(sorted(self._adapters))}): add {call.name!r} to the env's StepRecords with the "
                f"ToolRecord model of what it writes in ToolOutput.info"
            )
        if step.tool_error is not None and not step.info:
            return None
        return self.parse(call.name, step.info, step.index)

    def parse(self, tool: str, info: Mapping[str, Any], index: int | None = None) -> ToolRecord:
        """``info`` as the record of ``tool`` (e.g. a live ``ToolOutput.info``; ``index``: its step, for errors)."""
        where = f"step {index}" if index is not None else "a step"
        if tool not in self._adapters:
            raise RecordError(f"{self.env}: {where}: tool {tool!r} has no declared record")
        try:
            record = self._adapters[tool].validate_python(info)
        except ValidationError as e:
            raise RecordError(self._explain(where, tool, e)) from None
        if not isinstance(record, ToolRecord):
            raise TypeError(
                f"{self.env}: the record of tool {tool!r} parsed to a {type(record).__name__}; declare a "
                f"ToolRecord subclass (or an annotated union of them)"
            )
        return record

    def get(self, step: Step, kind: type[R]) -> R | None:
        """``of(step)`` when it is a ``kind`` (e.g. the record of one tool), else ``None``."""
        record = self.of(step)
        return record if isinstance(record, kind) else None

    def each(self, steps: Iterable[Step], kind: type[R]) -> list[tuple[Step, R]]:
        """The steps among ``steps`` whose record is a ``kind``, each with that record."""
        out = []
        for s in steps:
            record = self.get(s, kind)
            if record is not None:
                out.append((s, record))
        return out

    def _explain(self, where: str, tool: str, error: ValidationError) -> str:
        problems = []
        for err in error.errors():
            key = ".".join(str(p) for p in err["loc"]) or "(the whole info)"
            if err["type"] == "missing":
                problems.append(f"key {key!r} is missing")
            elif err["type"] == "extra_forbidden":
                problems.append(f"key {key!r} is not part of the record")
            else:
                problems.append(f"key {key!r}: {err['msg']} (got {_short(err.get('input'))})")
        return (
            f"{self.env}: {where}, tool {tool!r}: Step.info does not match the tool's declared record "
            f"({_name(self.tools[tool])}): {'; '.join(problems)}. Checks read this record, so a renamed or missing "
            f"key would silently change the reward: make the tool write its record (Record(...).info()) and the "
            f"record model agree, or re-record a trajectory written by another version of the env"
        )


def env_records(env: type | object) -> StepRecords | None:
    """The ``StepRecords`` an env class (or instance) declares as ``step_records``; ``None`` when it declares none."""
    found = getattr(env, "step_records", None)
    if found is not None and not isinstance(found, StepRecords):
        raise TypeError(f"{env!r}.step_records must be a StepRecords, got {type(found).__name__}")
    return found


def _name(kind: Any) -> str:
    """A record type's name: the class, or the classes of an annotated union (``A | B``)."""
    if isinstance(kind, type):
        return kind.__name__
    names = [_name(a) for a in get_args(kind) if isinstance(a, type) or get_args(a)]
    return " | ".join(n for n in names if n) or str(kind)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
