"""``StepRecord``: one env step as ``RubricEnv.step`` keeps it; the pydantic ``Step`` and messages come on demand."""

from __future__ import annotations

from dataclasses import dataclass

from rubricgym.core.tools import ToolOutput
from rubricgym.core.types import Action, Message, Observation, Step, ToolCall, ToolSpec


@dataclass(slots=True)
class StepRecord:
    """A step as the hot path keeps it; the pydantic ``Step`` and messages are built once, on first use."""

    index: int
    stage: str
    text: str
    call: ToolCall | None
    parse_error: str | None
    structured: bool
    out: ToolOutput
    reply: str
    truncated: bool
    duration_s: float
    tools: list[ToolSpec]
    built: tuple[Step, Message, Message] | None = None

    def materialise(self) -> tuple[Step, Message, Message]:
        if self.built is None:
            call, valid = self.call, self.parse_error is None
            reply = (
                Message(role="tool", content=self.reply, tool_call_id=call.id, name=call.name)
                if call is not None and self.structured and valid
                else Message(role="user", content=self.reply)
            )
            assistant = Message(
                role="assistant",
                content=(self.text or None) if self.structured else self.text,
                tool_calls=[call] if call is not None and self.structured else None,
            )
            obs = Observation(
                messages=[reply],
                done=self.out.done,
                truncated=self.truncated,
                reward=self.out.reward,
                stage=self.stage,
                tools=self.tools,
            )
            action = Action(text=self.text, tool_call=call, parse_error=self.parse_error, structured=self.structured)
            step = Step(
                index=self.index,
                stage=self.stage,
                action=action,
                observation=obs,
                tool_result=self.out.text if valid and self.out.error is None else None,
                tool_error=self.out.error,
                duration_s=self.duration_s,
                info=self.out.info,
            )
            self.built = (step, assistant, reply)
        return self.built
