"""Wire types shared by every part of rubricgym.

All are pydantic v2 models with ``extra="forbid"`` so a typo in a file or on the wire is an error, not a
silently dropped field. Documents that are persisted on their own (``Task``, ``Trajectory``, ``State``) carry a
``schema_version`` so readers can refuse or migrate records written by a different version.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator

SCHEMA_VERSION = 1


class Wire(BaseModel):
    """Base of every wire type: strict about unknown fields, JSON round-trippable."""

    model_config = ConfigDict(extra="forbid")

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> Self:
        return cls.model_validate_json(text)


class Versioned(Wire):
    schema_version: int = SCHEMA_VERSION

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if v > SCHEMA_VERSION:
            raise ValueError(
                f"schema_version {v} is newer than this rubricgym understands ({SCHEMA_VERSION}); "
                "upgrade rubricgym to read it"
            )
        return v


class Task(Versioned):
    """One episode's specification.

    ``params`` is what the env needs to build the episode; ``hidden`` is ground truth the agent never sees
    (answers, gold patches, key exams); ``rubric`` is an optional task-specific rubric in the rewards schema.
    """

    id: str
    env_id: str
    split: str = "train"
    prompt: str
    params: dict[str, Any] = Field(default_factory=dict)
    hidden: dict[str, Any] = Field(default_factory=dict)
    rubric: dict[str, Any] | None = None


class ToolSpec(Wire):
    """A tool the agent may call, described by a JSON schema of its arguments (OpenAI's function format)."""

    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def example_call(self) -> str:
        """A syntactically correct call of this tool, shown in the system prompt and after a malformed action.

        Each required argument takes its schema's first ``examples`` entry (JSON Schema), else its ``default``,
        else a placeholder of its type.
        """
        args: dict[str, Any] = {}
        props = self.parameters.get("properties", {})
        for name in self.parameters.get("required", list(props)):
            prop = props.get(name, {})
            if isinstance(prop.get("examples"), list) and prop["examples"]:
                args[name] = prop["examples"][0]
            elif "default" in prop:
                args[name] = prop["default"]
            else:
                kind = json_type(prop)[0]
                args[name] = {"integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}.get(kind, "...")
        return "<tool_call>" + json.dumps({"name": self.name, "arguments": args}) + "</tool_call>"


def json_type(schema: dict[str, Any]) -> list[str]:
    """The JSON-schema type(s) a property allows, as a list (``["string"]`` when unspecified)."""
    kind = schema.get("type", "string")
    return [str(k) for k in kind] if isinstance(kind, list) else [str(kind)]


class ToolCall(Wire):
    """A parsed call of a tool. ``id`` is set when the call came as a structured OpenAI tool call."""

    id: str | None = None
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Message(Wire):
    """A chat message in OpenAI's format."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    def to_openai(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id or f"call_{i}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for i, c in enumerate(self.tool_calls)
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out


class Action(Wire):
    """What the agent did in one turn: its raw text plus the parsed tool call, or why parsing failed."""

    text: str
    tool_call: ToolCall | None = None
    parse_error: str | None = None
    structured: bool = False
    """True when the call arrived as a structured API tool call (the reply then uses the ``tool`` role)."""


class Observation(Wire):
    """What the env returns after reset or a step."""

    messages: list[Message]
    done: bool = False
    truncated: bool = False
    reward: float = 0.0
    stage: str | None = None
    tools: list[ToolSpec] = Field(default_factory=list)
    extras: dict[str, Any] = Field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n\n".join(m.content or "" for m in self.messages)


class Step(Wire):
    """One agent turn: the action, what the env answered, and reward parts attached later by rewards."""

    index: int
    stage: str
    action: Action
    observation: Observation
    tool_result: str | None = None
    tool_error: str | None = None
    duration_s: float = 0.0
    rewards: dict[str, float] = Field(default_factory=dict)
    info: dict[str, Any] = Field(default_factory=dict)


SOLVED_AT = 1.0 - 1e-9
"""Where an env does not say whether an episode solved its task, the episode counts as solved when its outcome
reward reaches 1 (``Outcome.succeeded``)."""


class Outcome(Wire):
    """How an episode ended."""

    answer: str | None = None
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    summary: dict[str, Any] = Field(default_factory=dict)
    solved: bool | None = None
    """The env's own verdict on the task (right diagnosis, tests resolved, the page's full success), set by its
    terminal tool: an outcome reward may give partial credit (exams ordered, citations), so it is no solve flag.
    ``None``: the env did not say (``succeeded`` then falls back to an outcome reward of 1)."""

    @property
    def succeeded(self) -> bool:
        """Whether the episode solved its task: the env's ``solved``, else an outcome reward of 1."""
        return self.solved if self.solved is not None else self.reward >= SOLVED_AT


class Trajectory(Versioned):
    """The unit that rewards score, trainers consume, the arena compares and the store persists."""

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    task: Task
    messages: list[Message] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    outcome: Outcome = Field(default_factory=Outcome)
    agent: str = "unknown"
    model: str | None = None
    seed: int | None = None
    group_id: str | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    rewards: dict[str, float] = Field(default_factory=dict)
    metrics: dict[str, float] = Field(default_factory=dict)
    created_at: float | None = None
    duration_s: float = 0.0

    @property
    def env_id(self) -> str:
        return self.task.env_id

    def stages(self) -> list[str]:
        return [s.stage for s in self.steps]


class State(Versioned):
    """An env's episode state as the typed (OpenEnv-style) face reports it."""

    episode_id: str | None = None
    env_id: str
    task_id: str | None = None
    step_count: int = 0
    stage: str | None = None
    done: bool = False
    max_steps: int
    extras: dict[str, Any] = Field(default_factory=dict)


class CheckResult(Wire):
    """The result of one of an env's named programmatic checks (deterministic, judged by ``CheckJudge``)."""

    score: float = Field(ge=0.0, le=1.0)
    met: bool
    rationale: str = ""
    evidence: list[int] = Field(default_factory=list)
    """Indices of the steps that support the result."""
    details: dict[str, Any] = Field(default_factory=dict)
    applicable: bool = True
    """False when the check does not apply to this trajectory (a pitfall the agent never came near): the
    criterion's verdict is N/A and leaves every aggregate; ``score``/``met`` are then 0/False and meaningless."""

    @classmethod
    def of(cls, met: bool, rationale: str = "", evidence: list[int] | None = None, **details: Any) -> CheckResult:
        return cls(score=1.0 if met else 0.0, met=met, rationale=rationale, evidence=evidence or [], details=details)

    @classmethod
    def not_applicable(cls, rationale: str, **details: Any) -> CheckResult:
        """The check does not apply (e.g. "no test file edited" when nothing was edited)."""
        return cls(score=0.0, met=False, rationale=rationale, details=details, applicable=False)
