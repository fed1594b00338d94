"""The recording proxy's HTTP face: an OpenAI-compatible ``/v1/chat/completions`` (streaming or not, with
tools) in front of the policy, plus the session routes (``/v1/sessions``: list, read, post a reward).

What generates is a ``Generator``: ``PolicyGenerator`` (``rubricgym proxy``: the local policy, one episode view per
session) or ``proxy.backend.EpisodeRouter`` (a training run: each session is one episode the trainer plays).
Requests the proxy cannot record faithfully are refused with OpenAI-style errors: a model it does not serve,
``n`` > 1, a sampling setting other than the one it samples with, non-text content.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel

from rubricgym.agents.local import LocalAgent, Turn
from rubricgym.core.types import Message, ToolSpec
from rubricgym.proxy.sessions import Session, SessionLog, session_key
from rubricgym.proxy.wire import WireError, chunks, completion, reply_message, to_messages, tool_specs

REFUSED = ("logit_bias", "response_format", "audio", "prediction")
"""Request fields that would change what is generated in ways the recording cannot carry."""


class Generator(Protocol):
    """What the proxy serves: a model name, and one recorded generation for a session's messages."""

    model: str
    temperature: float
    log: SessionLog

    async def complete(self, session: Session, messages: list[Message], tools: list[ToolSpec]) -> Turn: ...


class PolicyGenerator:
    """The local policy (``LocalAgent``) as the proxy's generator: one episode view per session, so a session's
    turns follow its own seed sequence, and every session's prompts batch together."""

    def __init__(self, agent: LocalAgent, log: SessionLog, *, seed: int = 0, version: int = 0):
        self.agent, self.log, self.seed, self.version = agent, log, seed, version
        self.model: str = agent.model or "policy"
        self.temperature = agent.params.temperature
        self._views: dict[str, LocalAgent] = {}

    async def complete(self, session: Session, messages: list[Message], tools: list[ToolSpec]) -> Turn:
        view = self._views.get(session.key)
        if view is None:
            view = self._views[session.key] = self.agent.episode(None, self.seed + len(self._views))  # type: ignore[arg-type]
        turn = await view.generate(view.render(messages))
        turn.version = self.version
        view.turns.append(turn)
        return turn


class RewardBody(BaseModel):
    reward: float
    solved: bool | None = None


def _check(body: dict[str, Any], gen: Generator) -> None:
    if body.get("model") != gen.model:
        raise WireError(
            f"this proxy serves the model {gen.model!r}, not {body.get('model')!r}: set the client's model to "
            f"{gen.model!r}",
            404,
            "model_not_found",
        )
    if body.get("n", 1) != 1:
        raise WireError("n > 1 cannot be recorded as one episode's turn: send n separate requests", 400, "n")
    for name in REFUSED:
        if body.get(name) is not None:
            raise WireError(f"{name!r} is not supported by the recording proxy: leave it unset", 400, name)
    t = body.get("temperature")
    if t is not None and abs(float(t) - gen.temperature) > 1e-9:
        raise WireError(
            f"temperature {t} asked, but the policy samples at {gen.temperature} (the recorded log-probs are of "
            "that distribution): leave the client's temperature unset or start the proxy/run with this one",
            400,
            "temperature",
        )


def create_app(gen: Generator) -> FastAPI:
    """The proxy app over ``gen``."""
    app = FastAPI(title="rubricgym recording proxy")

    @app.exception_handler(WireError)
    async def _wire_error(request: Request, exc: WireError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": gen.model, "object": "model", "owned_by": "rubricgym"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            raise WireError("the request body is not JSON") from None
        if not isinstance(body, dict):
            raise WireError("the request body must be a JSON object")
        _check(body, gen)
        tools = tool_specs(body.get("tools"))
        messages = to_messages(body.get("messages"), tools, gen.log.written)
        session = gen.log.resolve(session_key(request.headers, body), messages)
        if session.ended:
            raise WireError(f"session {session.key!r} has ended: start a new one", 409, "session_ended")
        turn = await gen.complete(session, messages, tools)
        message, finish = reply_message(turn.text, tools)
        gen.log.record(session, messages, turn, message)
        usage = {
            "prompt_tokens": len(turn.prompt_ids),
            "completion_tokens": len(turn.completion_ids),
            "total_tokens": len(turn.prompt_ids) + len(turn.completion_ids),
        }
        headers = {"x-rubricgym-session": session.key}
        if not body.get("stream"):
            return JSONResponse(completion(gen.model, message, finish, usage), headers=headers)

        async def events() -> AsyncIterator[str]:
            for c in chunks(gen.model, message, finish, usage):
                yield f"data: {json.dumps(c)}\n\n"
                await asyncio.sleep(0)
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    @app.get("/v1/sessions")
    async def sessions() -> list[dict[str, Any]]:
        return [s.summary() for s in gen.log.sessions.values()]

    @app.get("/v1/sessions/{key}")
    async def session(key: str) -> Any:
        s = gen.log.sessions.get(key)
        if s is None:
            raise WireError(f"no session {key!r}", 404, "session_not_found")
        return {**s.summary(), "calls": [c.__dict__ for c in s.calls]}

    @app.post("/v1/sessions/{key}/reward")
    async def reward(key: str, body: RewardBody) -> Any:
        try:
            return gen.log.post_reward(key, body.reward, body.solved).summary()
        except KeyError:
            raise WireError(
                f"no session {key!r} to reward (GET /v1/sessions lists them)", 404, "session_not_found"
            ) from None

    return app
