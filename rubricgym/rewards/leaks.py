"""Leak audit: no value of a task's ``hidden`` record may reach anything the agent or a remote client sees.

A reward an optimiser can read is a reward it will read. ``audit_leaks`` plays seeded episodes of an env with its
scripted agents through the Gymnasium face (what a local agent and the server's messages are built from) and
scans every channel the agent side gets for the task's secrets:

- ``task id`` and the first observation (system prompt + task), before the agent has done anything;
- each step's observation text (the tool's output), its ``info`` (stage, errors and the env's public
  ``details``) and the typed ``Observation`` (messages, tools, stage);
- ``state()`` after every step (the server's ``/state`` and WS ``state``);
- every level of the env's ``guidance(task, level)`` (the hints the trainer shows a group that keeps failing).

Values are compared normalised: case, accents, punctuation, underscores and hyphens are ignored, and a value of
several words matches the same words in any order ("Hirox, Ke" is found in "ke hirox"). A hit is a leak unless

- the agent itself wrote the value first (in an action up to that step: an ordered exam, a submitted answer), or
- the env declares the field discoverable through that tool (``RubricEnv.discoverable``: a deep-search answer on
  a page the agent opened). Nothing is discoverable in ids, ``info``, ``state()`` or the first observation.

Which values are secret is ``RubricEnv.secrets(task)``: by default every text or number leaf of ``hidden``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import unicodedata
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rubricgym.core.agent import Agent, tool_call
from rubricgym.core.env import RubricEnv
from rubricgym.core.leaves import leaves
from rubricgym.core.registry import make, spec
from rubricgym.core.types import Message, Task

STOPWORDS = frozenset({"true", "false", "none", "null", "yes", "no", "the", "and", "not", "n/a", "unknown"})
"""Values too generic to be a secret (booleans, placeholders)."""
MIN_CHARS = 3
"""A text value shorter than this after normalisation is not scanned (it would match everywhere)."""
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
T = TypeVar("T")


def normalise(text: str) -> list[str]:
    """The words of ``text``: NFKD without accents, case-folded, split on anything that is not a letter or digit."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    return _WORD.findall(plain)


@dataclass(frozen=True)
class Secret:
    """One hidden value: where it sits in ``hidden`` (``diagnosis.aliases[2]``) and its normalised words."""

    path: str
    value: str
    words: tuple[str, ...]

    @property
    def field(self) -> str:
        """The top-level ``hidden`` field it belongs to (what ``discoverable`` names)."""
        return re.split(r"[.\[]", self.path, maxsplit=1)[0]


def make_secrets(values: Iterable[tuple[str, Any]]) -> list[Secret]:
    """Secrets of ``(path, value)`` pairs, without values too generic to scan for (booleans, stop words, one or
    two characters, one-digit numbers) and without repeats of the same words."""
    out: dict[tuple[str, ...], Secret] = {}
    for path, value in values:
        if isinstance(value, bool):
            continue
        text = str(value)
        if isinstance(value, float) and value.is_integer():
            text = str(int(value))
        words = tuple(normalise(text))
        joined = " ".join(words)
        if not words or joined in STOPWORDS:
            continue
        if isinstance(value, int | float) and len(joined.replace(" ", "")) < 2:
            continue
        if not isinstance(value, int | float) and len(joined) < MIN_CHARS:
            continue
        out.setdefault(tuple(sorted(words)), Secret(path, text, words))
    return list(out.values())


class Scanner:
    """Finds secrets in text: each text is normalised once, then every secret is a set lookup."""

    def __init__(self, secrets: Sequence[Secret]):
        self.secrets = list(secrets)
        self._sizes = sorted({len(s.words) for s in self.secrets})
        self._compacts = sorted({c for s in self.secrets if (c := "".join(s.words))})

    def windows(self, text: str) -> set[tuple[str, ...]]:
        """Every run of 1..k consecutive words of ``text`` (sorted), k the longest secret's length."""
        words = normalise(text)
        out: set[tuple[str, ...]] = set()
        for k in self._sizes:
            out.update(tuple(sorted(words[i : i + k])) for i in range(len(words) - k + 1))
        return out

    def compact(self, text: str) -> set[str]:
        """The secrets' spaceless forms ("X-ray" as "xray") that equal a run of up to k+2 consecutive words of
        ``text`` written without spaces (k the longest secret's length): of every such run, the only ones any
        membership test of this scanner asks about. Found with substring search in the joined words, a hit kept
        where it starts and ends at word boundaries."""
        words = normalise(text)
        if not words or not self._compacts:
            return set()
        k = self._sizes[-1] + 2
        joined = "".join(words)
        starts: dict[int, int] = {}  # character offset in ``joined`` -> index of the word starting there
        offset = 0
        for i, w in enumerate(words):
            starts[offset] = i
            offset += len(w)
        starts[offset] = len(words)
        out: set[str] = set()
        for c in self._compacts:
            at = joined.find(c)
            while at != -1:
                first, last = starts.get(at), starts.get(at + len(c))
                if first is not None and last is not None and last - first <= k:
                    out.add(c)
                    break
                at = joined.find(c, at + 1)
        return out

    def find(self, text: str) -> list[Secret]:
        """The secrets that occur in ``text``: the same words in any order, or the same letters and digits
        with other spacing ("joint_xray" in "Joint X-ray")."""
        if not self.secrets or not text:
            return []
        wins, compact = self.windows(text), self.compact(text)
        return [s for s in self.secrets if tuple(sorted(s.words)) in wins or "".join(s.words) in compact]


GUIDANCE = "(guidance)"
"""The ``tool`` of a hint's scan: no exemption but the env's ``hintable`` fields (nothing the agent wrote or was
shown before counts: a hint is shown before the agent acts)."""

STRUCTURAL = frozenset({"episode_id", "step_count", "max_steps", "step"})
"""Counters every episode has (``state().step_count``, ``info["step"]``, the episode id's sequence number): they
say nothing of a task, so a hidden number that equals one is not a leak."""


def _without_counters(value: Any) -> Any:
    return {k: v for k, v in value.items() if k not in STRUCTURAL} if isinstance(value, dict) else value


def flatten(value: Any) -> str:
    """A JSON-like value as text to scan: keys and values, one per line."""
    if isinstance(value, str):
        return value
    return "\n".join(f"{p}: {v}" for p, v in leaves(value)) + "\n" + json.dumps(value, default=str)


@dataclass(frozen=True)
class Leak:
    """A secret found where the agent side can read it."""

    env_id: str
    agent: str
    task_id: str
    channel: str
    path: str
    value: str

    def line(self) -> str:
        return f"{self.channel}: hidden {self.path} = {self.value!r} (task {self.task_id}, agent {self.agent})"


@dataclass
class LeakReport:
    """What ``audit_leaks`` played and found."""

    env_id: str
    episodes: int = 0
    steps: int = 0
    scanned: int = 0
    """Channel texts scanned."""
    secrets: int = 0
    leaks: list[Leak] = field(default_factory=list)
    exempt: dict[str, int] = field(default_factory=dict)
    """Hits allowed by a declaration (``discoverable`` field via a tool) or because the agent wrote them first."""

    @property
    def ok(self) -> bool:
        return not self.leaks

    def merge(self, other: LeakReport) -> None:
        """Add the counts, leaks and exemptions of ``other`` (another episode of the same audit)."""
        self.episodes += other.episodes
        self.steps += other.steps
        self.scanned += other.scanned
        self.secrets += other.secrets
        self.leaks += other.leaks
        for k, v in other.exempt.items():
            self.exempt[k] = self.exempt.get(k, 0) + v

    def by_channel(self) -> dict[tuple[str, str], Leak]:
        """One example leak per (channel kind, hidden field)."""
        out: dict[tuple[str, str], Leak] = {}
        for leak in self.leaks:
            out.setdefault((re.sub(r"step \d+", "step N", leak.channel), leak.path.split("[")[0]), leak)
        return out

    def line(self) -> str:
        if self.ok:
            exempt = ", ".join(f"{k} {v}" for k, v in sorted(self.exempt.items())) or "none"
            return (
                f"{self.episodes} episodes, {self.steps} steps, {self.scanned} channel texts, {self.secrets} secrets: "
                f"no leak (allowed hits: {exempt})"
            )
        worst = list(self.by_channel().values())
        return f"{len(self.leaks)} leak(s), e.g. " + "; ".join(x.line() for x in worst[:4])


class _Episode:
    """The scan of one episode: tracks what the agent wrote, so a value it typed first is not a leak."""

    def __init__(self, report: LeakReport, env: RubricEnv, task: Task, agent: str):
        self.report, self.env, self.task, self.agent = report, env, task, agent
        self.scanner = Scanner(make_secrets(type(env).secrets(task)))
        self.discoverable = type(env).discoverable
        self.written: set[str] = set()
        self.known: set[str] = set()
        """Secrets the agent has legitimately seen (in a declared tool's output): no longer news anywhere."""
        report.secrets += len(self.scanner.secrets)
        tools = [t.model_dump(mode="json") for t in env.tools()]
        self.constant = self.scanner.compact(flatten(tools))
        """Text every task of the env shows (tool specs, the system prompt): a value in it tells nothing."""

    def wrote(self, text: str) -> None:
        self.written |= self.scanner.compact(text)

    def shown_to_all(self, text: str) -> None:
        self.constant |= self.scanner.compact(text)

    def scan(self, channel: str, value: Any, tool: str | None = None) -> None:
        """Scan one channel; ``tool`` names the tool whose output it is (``"(any)"``: data any tool may show;
        ``"(guidance)"``: a hint, which may name the env's ``hintable`` fields and nothing else)."""
        self.report.scanned += 1
        for s in self.scanner.find(flatten(value)):
            if tool == GUIDANCE:
                if s.field in type(self.env).hintable:
                    self.report.exempt[f"{s.field} in a hint"] = self.report.exempt.get(f"{s.field} in a hint", 0) + 1
                else:
                    self.report.leaks.append(
                        Leak(self.report.env_id, self.agent, self.task.id, channel, s.path, s.value)
                    )
                continue
            tools = self.discoverable.get(s.field, frozenset())
            compact = "".join(s.words)
            if tool is not None and ("*" in tools or tool in tools or (tool == "(any)" and tools)):
                key = f"{s.field} via {tool}"
            elif compact in self.written:
                key = "agent wrote it"
            elif compact in self.known:
                key = "already shown where allowed"
            elif compact in self.constant:
                key = "in every task's tool specs or system prompt"
            else:
                self.report.leaks.append(Leak(self.report.env_id, self.agent, self.task.id, channel, s.path, s.value))
                continue
            self.known.add(compact)
            self.report.exempt[key] = self.report.exempt.get(key, 0) + 1


def as_text(output: str | Message) -> str:
    """An agent's output as the text the Gymnasium face takes (a structured tool call in ``<tool_call>`` tags)."""
    if isinstance(output, str):
        return output
    if output.tool_calls:
        call = output.tool_calls[0]
        return tool_call(call.name, **call.arguments)
    return output.content or ""


async def play_and_scan(report: LeakReport, env: RubricEnv, agent: Agent, name: str, task: Task, seed: int) -> None:
    """Play one episode of ``task`` through the Gymnasium face and scan every channel the agent side sees."""
    ep = _Episode(report, env, task, name)
    ep.scan("task id", task.id)
    text, info = await asyncio.to_thread(env.reset, seed=seed, options={"task": task})
    ep.shown_to_all(env.system_prompt())
    ep.scan("first observation", text)
    for level in range(1, type(env).guidance_levels + 1):  # hints the trainer may show: agent-visible
        ep.scan(f"guidance level {level}", env.guidance(task, level) or "", GUIDANCE)
    ep.scan("task params (the server's tasks message)", task.params, tool="(any)")
    ep.scan("reset info", _without_counters(info))
    ep.scan("state() after reset", _without_counters(env.state().model_dump(mode="json")))
    episode_agent = agent.episode(task, seed) if hasattr(agent, "episode") else agent
    report.episodes += 1
    for i in range(env.max_steps):
        output = as_text(await episode_agent.act(env.messages, env.tools()))
        ep.wrote(output)
        obs_text, _reward, terminated, truncated, info = await asyncio.to_thread(env.step, output)
        step = env.steps[-1]
        if step.action.tool_call is not None:
            ep.wrote(json.dumps(step.action.tool_call.arguments, default=str))
        tool = step.action.tool_call.name if step.action.tool_call and not step.action.parse_error else None
        ep.scan(f"step {i + 1} observation ({tool or 'no tool'})", obs_text, tool)
        ep.scan(
            f"step {i + 1} typed observation", step.observation.model_dump(mode="json", exclude={"messages", "tools"})
        )
        ep.scan(f"step {i + 1} info", _without_counters(info))
        ep.scan(f"state() after step {i + 1}", _without_counters(env.state().model_dump(mode="json")))
        report.steps += 1
        if terminated or truncated:
            break


class EnvLease:
    """Up to ``size`` envs of one id for episodes played concurrently: each env plays one episode at a time and is
    ``reset`` to the next episode's task (a fresh sandbox or page per episode, as when one env plays them all in
    turn); envs are made only while every made one is busy."""

    def __init__(self, factory: Callable[[], RubricEnv], size: int, first: RubricEnv | None = None):
        if size < 1:
            raise ValueError(f"concurrency must be >= 1, got {size}")
        self.factory, self.size = factory, size
        self.envs: list[RubricEnv] = []
        self._free: asyncio.Queue[RubricEnv] = asyncio.Queue()
        if first is not None:
            self.envs.append(first)
            self._free.put_nowait(first)

    @contextlib.asynccontextmanager
    async def env(self) -> AsyncIterator[RubricEnv]:
        """An env no other episode is using, for the duration of one episode."""
        if self._free.empty() and len(self.envs) < self.size:
            env = self.factory()
            self.envs.append(env)
        else:
            env = await self._free.get()
        try:
            yield env
        finally:
            self._free.put_nowait(env)

    async def aclose(self) -> None:
        """Close every env made (the first error is raised after all are closed)."""
        errors: list[BaseException] = []
        for env in self.envs:
            try:
                await env.aclose()
            except Exception as e:  # noqa: BLE001  (close the rest, then raise)
                errors.append(e)
        self.envs.clear()
        if errors:
            raise errors[0]


async def in_order(jobs: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run ``jobs`` concurrently and return their results in order; every job finishes before the first failure
    (in job order, the one a sequential run would have hit first) is raised."""
    results = await asyncio.gather(*(job() for job in jobs), return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results  # type: ignore[return-value]


def _tasks(env: RubricEnv, n: int, seed: int, splits: Sequence[str]) -> list[Task]:
    out: list[Task] = []
    for split in splits:
        try:
            out += env.task_set(n, seed=seed, split=split)
        except ValueError:  # an env without this split
            continue
    return out


async def audit_leaks(
    env_id: str,
    *,
    n_tasks: int = 3,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    agents: Mapping[str, Callable[..., Agent]] | None = None,
    splits: Sequence[str] = ("train", "test"),
    tasks: Sequence[Task] | None = None,
    concurrency: int = 4,
) -> LeakReport:
    """Play ``n_tasks`` tasks of each split with each scripted agent (or ``agents``) and scan every channel.

    ``tasks`` replaces the generated tasks (e.g. a bundled case file's). At most ``concurrency`` episodes are in
    flight, each in its own env (see ``EnvLease``); the report is the same as for episodes played one by one."""
    cls = spec(env_id).load()
    factories = dict(agents) if agents is not None else cls.agents()
    report = LeakReport(env_id)
    kw = env_kwargs or {}
    first = make(env_id, **kw)
    lease = EnvLease(lambda: make(env_id, **kw), concurrency, first)
    try:
        played = list(tasks) if tasks is not None else _tasks(first, n_tasks, seed, splits)

        async def episode(name: str, factory: Callable[..., Agent], i: int, task: Task) -> LeakReport:
            part = LeakReport(env_id)
            async with lease.env() as env:
                await play_and_scan(part, env, factory(seed=seed + i), name, task, seed + i)
            return part

        jobs = [
            lambda name=name, factory=factory, i=i, task=task: episode(name, factory, i, task)
            for name, factory in factories.items()
            for i, task in enumerate(played)
        ]
        for part in await in_order(jobs):
            report.merge(part)
    finally:
        await lease.aclose()
    return report
