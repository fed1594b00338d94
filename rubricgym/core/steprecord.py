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

import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Literal, TypeVar, Union, get_args, get_origin

from annotated_types import BaseMetadata
from pydantic import BaseModel, ConfigDict, PydanticUndefinedAnnotation, PydanticUserError, TypeAdapter, ValidationError
from pydantic_core import SchemaValidator

from rubricgym.core.types import Step

R = TypeVar("R", bound="ToolRecord")

_SCALARS = (int, float, str, bool, type(None))


def _dumps_as_is(cls: type[BaseModel]) -> bool:
    """Whether ``cls.model_dump()`` returns its instances' field values unchanged: every field is a scalar (a
    union or ``Literal`` of them) with no serializer, alias dump or exclusion, and the model keeps no extras."""
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


def _fields_validator(cls: type[BaseModel]) -> SchemaValidator | None:
    """A validator of ``cls``'s fields alone, built from the model's own core schema: it validates exactly as
    ``cls(**data)`` does (the same field schemas, validators and config) but returns ``(values, extra,
    fields_set)`` instead of an instance. ``None`` where building the model does more than validate its fields
    (a model validator, ``__init__`` or ``model_post_init``) or the schema is not complete yet."""
    try:
        schema = cls.__pydantic_core_schema__
        if (
            schema["type"] != "model"
            or schema["schema"]["type"] != "model-fields"
            or schema.get("custom_init")
            or schema.get("post_init")
        ):
            return None
        return SchemaValidator(schema["schema"], schema.get("config"))
    except (AttributeError, KeyError, TypeError, PydanticUndefinedAnnotation, PydanticUserError):
        return None


def _writer(cls: type[ToolRecord]) -> Callable[..., dict[str, Any]]:
    """``cls.info_of`` as a function, with what it reads of the class bound in (``ToolRecord.writer``)."""
    validator = cls._fields
    if validator is None:
        return lambda **fields: cls(**fields).info()
    validate = validator.validate_python

    def info_of(**fields: Any) -> dict[str, Any]:
        values, _, given = validate(fields)
        return values if len(given) == len(values) else {k: v for k, v in values.items() if k in given}

    return info_of


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
    """Base of a tool's typed record: the keys a tool writes in ``ToolOutput.info``, nothing else."""

    model_config = ConfigDict(extra="forbid")
    _scalar: ClassVar[bool] = False
    """Whether ``model_dump`` of this class is its field values as they are (scalar fields, no serializers)."""
    _fields: ClassVar[SchemaValidator | None] = None
    """``info_of``'s validator of the fields alone (``_fields_validator``); ``None``: build the record."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._scalar = _dumps_as_is(cls)
        cls._fields = _fields_validator(cls) if cls._scalar else None

    @classmethod
    def info_of(cls, **fields: Any) -> dict[str, Any]:
        """``cls(**fields).info()``, cheaper where a tool writes a record every step (a tool that does can keep
        ``writer()`` instead, which skips even this method's class lookups).

        A record of scalar fields (see ``info``) is validated by its model's own fields validator, the same
        checks, coercions and ``ValidationError`` as building it, straight to the values that are its info,
        with no instance to build and copy (~40% fewer instructions); any other record is built and dumped."""
        validator = cls._fields
        if validator is None:
            return cls(**fields).info()
        values, _, given = validator.validate_python(fields)
        return values if len(given) == len(values) else {k: v for k, v in values.items() if k in given}

    @classmethod
    def writer(cls) -> Callable[..., dict[str, Any]]:
        """``info_of`` of this record as a plain function (``calc_info = Calculation.writer()`` at import, then
        ``calc_info(value=3)`` per step): the same info and the same ``ValidationError``, without the class
        attribute lookups that pydantic's metaclass makes slow (~1k instructions each)."""
        return _writer(cls)

    def info(self) -> dict[str, Any]:
        """The ``ToolOutput.info`` this record is: every field the tool set (an optional field left unset is no
        key, so a record written and read back is the same record).

        Tools write one per step, so a record of scalar fields (numbers, strings, booleans, ``None``; no
        serializer, computed field or excluded field) copies its values, which is what ``model_dump`` would
        return, without the serializer's pass (~2 us of a ~3 us record); any other record is dumped."""
        if type(self)._scalar:
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
