"""Recorded calls and the sessions (episodes) they make up.

Every chat completion the proxy serves is a ``Call``: the exact prompt and completion token ids, the sampling
log-probs, the policy version, the messages as the policy read them and what it wrote. Calls are grouped into
sessions (one per episode of the user's agent) by, in order: the ``X-Rubricgym-Session`` header, an API key that
starts with ``rgs-`` (any OpenAI client can set one), the request's ``user`` field, or else the conversation
itself: a request whose messages extend a session's last request and reply continues that session.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rubricgym.agents.local import Turn
from rubricgym.core.types import Message

SESSION_HEADER = "x-rubricgym-session"
KEY_PREFIX = "rgs-"


@dataclass
class Call:
    """One served completion, as recorded."""

    session: str
    index: int
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    version: int
    text: str
    messages: list[dict[str, Any]]
    reply: dict[str, Any]
    at: float = field(default_factory=time.time)

    def turn(self) -> Turn:
        """The call as the trainer's ``Turn`` (the token ids and log-probs it trains on)."""
        return Turn(self.prompt_ids, self.completion_ids, self.logprobs, self.text, version=self.version)


@dataclass
class Session:
    """The calls of one episode of the user's agent, and its reward once posted."""

    key: str
    calls: list[Call] = field(default_factory=list)
    reward: float | None = None
    solved: bool | None = None
    ended: bool = False
    call_ids: list[str] = field(default_factory=list)
    """The tool-call ids the proxy issued in this session's replies."""
    conversation: list[dict[str, Any]] = field(default_factory=list)
    """The last request's messages plus the reply, as the policy read them (for grouping by conversation)."""

    def summary(self) -> dict[str, Any]:
        return {"session": self.key, "calls": len(self.calls), "reward": self.reward, "solved": self.solved}


def _dumped(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json", exclude_none=True) for m in messages]


def session_key(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    """The session a request names (header, ``rgs-`` API key or ``user`` field), or ``None``."""
    if headers.get(SESSION_HEADER):
        return str(headers[SESSION_HEADER])
    auth = headers.get("authorization", "")
    token = auth.removeprefix("Bearer ").strip()
    if token.startswith(KEY_PREFIX):
        return token
    user = body.get("user")
    return str(user) if isinstance(user, str) and user else None


class SessionLog:
    """The sessions of a proxy, kept in memory and (with ``out``) appended to ``out/calls.jsonl`` and
    ``out/rewards.jsonl`` as they happen, so a crash loses no recorded call."""

    def __init__(self, out: Path | None = None):
        self.sessions: dict[str, Session] = {}
        self.written: dict[str, str] = {}
        """Tool-call id the proxy issued -> the text the policy generated for that turn (ids are unique)."""
        self.out = out
        self._lock = threading.Lock()
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)

    def resolve(self, key: str | None, messages: list[Message]) -> Session:
        """The session ``key`` names (created on first use), or the one whose conversation ``messages``
        extend, or a new one."""
        with self._lock:
            if key is not None:
                return self.sessions.setdefault(key, Session(key))
            dumped = _dumped(messages)
            for s in reversed(self.sessions.values()):
                n = len(s.conversation)
                if not s.ended and n and dumped[:n] == s.conversation:
                    return s
            new = Session("conv-" + uuid.uuid4().hex[:16])
            self.sessions[new.key] = new
            return new

    def record(self, session: Session, messages: list[Message], turn: Turn, reply: dict[str, Any]) -> Call:
        """Append one served completion to ``session`` (and to ``calls.jsonl``)."""
        call = Call(
            session.key,
            len(session.calls),
            list(turn.prompt_ids),
            list(turn.completion_ids),
            list(turn.logprobs),
            turn.version,
            turn.text,
            _dumped(messages),
            reply,
        )
        with self._lock:
            session.calls.append(call)
            for c in reply.get("tool_calls") or []:
                self.written[c["id"]] = turn.text
                session.call_ids.append(c["id"])
            session.conversation = [*call.messages, {"role": "assistant", "content": turn.text}]
            if self.out is not None:
                with (self.out / "calls.jsonl").open("a", encoding="utf-8") as f:
                    f.write(json.dumps(asdict(call)) + "\n")
        return call

    def forget(self, key: str) -> None:
        """Drop a finished session from memory (a training run's proxy serves thousands of episodes)."""
        with self._lock:
            s = self.sessions.pop(key, None)
            for call_id in s.call_ids if s else []:
                self.written.pop(call_id, None)

    def post_reward(self, key: str, reward: float, solved: bool | None = None) -> Session:
        """End ``key`` with the reward the user's program gives it."""
        with self._lock:
            s = self.sessions.get(key)
            if s is None:
                raise KeyError(key)
            s.reward, s.solved, s.ended = reward, solved, True
            if self.out is not None:
                with (self.out / "rewards.jsonl").open("a", encoding="utf-8") as f:
                    f.write(json.dumps({"session": key, "reward": reward, "solved": solved}) + "\n")
        return s


def load_sessions(out: Path) -> dict[str, Session]:
    """The sessions a proxy recorded in ``out`` (``calls.jsonl``, ``rewards.jsonl``), in call order."""
    sessions: dict[str, Session] = {}
    calls = out / "calls.jsonl"
    if not calls.is_file():
        raise FileNotFoundError(f"{calls}: no recorded calls (is {out} a proxy's --out directory?)")
    for line in calls.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            sessions.setdefault(row["session"], Session(row["session"])).calls.append(Call(**row))
    rewards = out / "rewards.jsonl"
    if rewards.is_file():
        for line in rewards.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                if row["session"] in sessions:
                    s = sessions[row["session"]]
                    s.reward, s.solved, s.ended = row["reward"], row.get("solved"), True
    return sessions
