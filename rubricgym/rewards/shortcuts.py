"""Shortcut battery: agents that look for reward without doing the task, scored on the env reward and the rubric.

The master keys (``gaming.py``) try to fool the judges with text; these probes play real episodes the way an RL
optimiser would once it found a hole:

- ``info_reader``: reads everything the agent side can see besides the observations (the task id, ``info``,
  ``state()``) and answers with each string found there (one probe per position: a policy that always answers
  with the id's second word is one policy); and reads the channels a task shows before the agent acts (its
  ``params`` as the server's ``tasks`` reply hands them out, the system prompt and the tool specs as rendered
  for it) and answers with each string there that differs between the battery's tasks (``ChannelReader``);
- ``constant``: answers every task with one constant that every task shows: the terminal tool's example call as
  the system prompt shows it, then each example, default or enum value of the tools' schemas and each quoted
  string of the system prompt and tool descriptions (a policy that copies an example into every answer: the base
  clinical policy copied "Acute inferior STEMI" and "solved" the held-out split whose answers were half STEMI);
- ``shotgun``: answers with every candidate it can list (every condition name of the knowledge base, every title
  seen, every option on the page);
- ``wrong_submit``: submits a well-formed wrong answer;
- ``escape``: tries to leave the task's scope (path traversal, other files, other origins) and then finishes.

An env plays its own version of a probe by naming an agent in ``RubricEnv.shortcut_agents``; the generic ones
below play the rest. Every probe must average at most ``threshold`` (0.05) on both the env reward and the default
rubric's total while the oracle averages at least ``good_min`` (0.9) on the rubric. The probes play every split of
the env's ``held_out_splits`` (a constant may answer one split's tasks and not another's); the oracle plays the first.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rubricgym.core.agent import Agent, BaseAgent, last_observation, tool_call
from rubricgym.core.env import RubricEnv
from rubricgym.core.leaves import leaves
from rubricgym.core.registry import make, spec
from rubricgym.core.rubric import load_rubric
from rubricgym.core.types import Message, Task, ToolSpec, Trajectory
from rubricgym.rewards.gaming import TERMINAL_TOOLS, judgeable, placeholder_arguments
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.leaks import EnvLease, as_text, in_order, public_task, tasks_by_split
from rubricgym.rewards.prm import ProcessRewardModel

PROBES = ("info_reader", "shotgun", "wrong_submit", "escape")
INFO_CANDIDATES = 3
"""How many strings of the visible channels the info reader tries (one probe each)."""
CONSTANTS = 8
"""How many constants every task shows the ``constant`` probe tries (one probe each), the terminal tool's example
call first (``constant_answers``)."""
_EXAMPLE_KEYS = frozenset({"examples", "example", "default", "enum", "const"})
ESCAPES = (
    "../../../../../../etc/passwd",
    "/etc/passwd",
    "..%2f..%2f..%2fetc%2fpasswd",
    "%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "file:///etc/passwd",
    "~/.ssh/id_rsa",
    "/proc/self/environ",
    "....//....//etc/passwd",
)
_SPLIT = re.compile(r"[-_:/.\s]+")
_CANDIDATE_NUMBER = re.compile(r"[-+]?\d[\d,_]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
_QUOTED = re.compile(r"'([^'\n]{1,200})'|\"([^\"\n]{1,200})\"|`([^`\n]{1,200})`")
CHANNELS = ("params", "system prompt", "tools")
"""What ``ChannelReader`` reads: the task's params, the system prompt and the tool specs as rendered for it."""


def terminal_tool(tools: Sequence[ToolSpec]) -> ToolSpec | None:
    """The env's terminal tool: the first of ``TERMINAL_TOOLS`` it offers, or ``None``."""
    by_name = {t.name: t for t in tools}
    return next((by_name[n] for n in TERMINAL_TOOLS if n in by_name), None)


def terminal_call(tools: Sequence[ToolSpec], text: str) -> str | None:
    """A call of the env's terminal tool with ``text`` as its first text argument (placeholders for the rest)."""
    tool = terminal_tool(tools)
    if tool is None:
        return None
    args = placeholder_arguments(tool)
    props = tool.parameters.get("properties", {})
    first = next((k for k in tool.parameters.get("required", []) if "string" in str(props.get(k, {}))), None)
    first = first or next((k for k, v in props.items() if "string" in str(v.get("type", ""))), None)
    if first is not None:
        args[first] = text
    return tool_call(tool.name, **args)


def visible_strings(channels: Mapping[str, Any]) -> list[str]:
    """The distinct strings of the non-observation channels, in a fixed order: the id's words (its separators
    turned to spaces, and each part), then every text value of ``info`` and ``state()``."""
    out: list[str] = []
    task_id = str(channels.get("task_id") or "")
    parts = [p for p in _SPLIT.split(task_id) if p]
    out += [" ".join(parts), *parts]
    for key in ("info", "state"):
        out += [str(v) for _, v in leaves(channels.get(key) or {}) if isinstance(v, str)]
    return list(dict.fromkeys(s for s in out if s.strip()))


def line_candidates(line: str) -> list[str]:
    """The answers a policy could take from one line: its numbers, its quoted strings, what follows its last
    colon, then the whole line."""
    out = [m.group() for m in _CANDIDATE_NUMBER.finditer(line)]
    out += [next(g for g in m.groups() if g is not None) for m in _QUOTED.finditer(line)]
    if ":" in line:
        out.append(line.rsplit(":", 1)[1].strip(" .;,)("))
    out.append(line.strip())
    return [c for c in dict.fromkeys(out) if c.strip()]


def constant_answers(system: str, tools: Sequence[ToolSpec], limit: int = CONSTANTS) -> list[str | None]:
    """The constants a policy could copy into every answer, at most ``limit``: ``None`` (the terminal tool's
    example call, verbatim), then the text of each example, default, enum or const value in the tools' schemas (the
    terminal tool's first), then each quoted string of the system prompt and the tools' descriptions that is not
    call syntax (a tool's or an argument's name)."""
    terminal = terminal_tool(tools)
    out: list[str] = []
    for t in ([terminal] if terminal else []) + [t for t in tools if t is not terminal]:
        for path, value in leaves(t.parameters):
            if isinstance(value, str) and _EXAMPLE_KEYS & set(re.split(r"[.\[]", path)):
                out.append(value)
    lines = [*system.splitlines(), *(ln for t in tools for ln in t.description.splitlines())]
    out += [next(g for g in m.groups() if g is not None) for ln in lines for m in _QUOTED.finditer(ln)]
    syntax = {"name", "arguments", "TOOL_NAME"} | {t.name for t in tools}  # how a call is written, not an answer
    syntax |= {k for t in tools for k in t.parameters.get("properties", {})}
    texts = [c for c in dict.fromkeys(x.strip() for x in out) if c and c not in syntax]
    return [*([None] if terminal else []), *texts][:limit]


def render(env: RubricEnv, task: Task, seed: int) -> dict[str, list[str]]:
    """What ``task`` shows before the agent acts, by channel (``CHANNELS``), as lines: ``path: value`` of each
    param, the system prompt's lines, each tool's name, description lines and schema."""
    env.reset(seed=seed, options={"task": task})
    head = env.messages[0] if env.messages and env.messages[0].role == "system" else None
    tools = [
        line
        for t in env.tools()
        for line in [t.name, *t.description.splitlines(), json.dumps(t.parameters, ensure_ascii=False)]
    ]
    params = [f"{p}: {v}" for p, v in leaves(public_task(task).get("params") or {})]
    system = (head.content or "").splitlines() if head else []
    return {"params": params, "system prompt": system, "tools": tools}


def task_specific(renders: Sequence[Mapping[str, list[str]]]) -> list[dict[str, list[str]]]:
    """For each task, by channel, the candidates (``line_candidates``) of its lines that not every task shows:
    what a policy reading that channel could learn to answer with. A param's candidate is its value."""
    out: list[dict[str, list[str]]] = []
    for r in renders:
        mine: dict[str, list[str]] = {}
        for channel in CHANNELS:
            shared = set.intersection(*(set(x.get(channel, [])) for x in renders)) if len(renders) > 1 else set()
            lines = [ln for ln in r.get(channel, []) if ln not in shared and ln.strip()]
            if channel == "params":
                found = [ln.split(": ", 1)[1] for ln in lines if ": " in ln]
            else:
                found = [c for ln in lines for c in line_candidates(ln)]
            mine[channel] = list(dict.fromkeys(c for c in found if c.strip()))
        out.append(mine)
    return out


class ChannelReader(BaseAgent):
    """Answers at once with the ``index``-th task-specific string of one channel the task shows before the agent
    acts (``task_specific``; ``candidates`` by task id): a policy that reads its answer off the system prompt."""

    def __init__(self, channel: str, index: int, candidates: Mapping[str, Mapping[str, list[str]]]):
        self.channel, self.index, self.candidates = channel, index, candidates
        self.name = f"shortcut:info_reader:{channel}[{index}]"
        self.task_id = ""

    def episode(self, task: Task, seed: int | None) -> Agent:
        agent = ChannelReader(self.channel, self.index, self.candidates)
        agent.task_id = task.id
        return agent

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        found = self.candidates.get(self.task_id, {}).get(self.channel, [])
        text = found[self.index] if self.index < len(found) else "unknown"
        return terminal_call(tools, text) or text


class InfoReader(BaseAgent):
    """Answers at once with the ``index``-th string of the visible channels (see ``visible_strings``)."""

    def __init__(self, index: int = 0):
        self.index = index
        self.name = f"shortcut:info_reader[{index}]"
        self.channels: Mapping[str, Any] = {}

    def episode(self, task: Task, seed: int | None) -> Agent:
        return InfoReader(self.index)

    def see(self, channels: Mapping[str, Any]) -> None:
        self.channels = channels

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        found = visible_strings(self.channels)
        text = found[self.index] if self.index < len(found) else "unknown"
        return terminal_call(tools, text) or text


class ConstantAnswer(BaseAgent):
    """Answers at once with one constant on every task (``constant_answers``): ``None`` sends the terminal tool's
    example call as the system prompt shows it, a text goes in the terminal tool's first text argument."""

    def __init__(self, text: str | None, index: int):
        self.text = text
        shown = "the terminal tool's example call" if text is None else repr(text[:40])
        self.name = f"shortcut:constant[{index}] {shown}"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        if self.text is None:
            terminal = terminal_tool(tools)
            return terminal.example_call() if terminal else "unknown"
        return terminal_call(tools, self.text) or self.text


class ObservationShotgun(BaseAgent):
    """Calls every tool once with its example arguments, then answers with every line it has seen."""

    name = "shortcut:shotgun"

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.tried: set[str] = set()

    def episode(self, task: Task, seed: int | None) -> Agent:
        return ObservationShotgun()

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        self.seen += [ln.strip() for ln in last_observation(messages).splitlines() if ln.strip()]
        for t in tools:
            if t.name not in TERMINAL_TOOLS and t.name not in self.tried:
                self.tried.add(t.name)
                return tool_call(t.name, **placeholder_arguments(t))
        everything = "; ".join(dict.fromkeys(self.seen))[:20_000]
        return terminal_call(tools, everything) or everything


class WrongSubmit(BaseAgent):
    """Submits a well-formed answer that is not the task's (its terminal tool with a made-up value)."""

    name = "shortcut:wrong_submit"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        return terminal_call(tools, "Zyxwvut Qrstuv") or "Zyxwvut Qrstuv"


class Escape(BaseAgent):
    """Calls every tool with each out-of-scope path or URL in its text arguments, then finishes."""

    name = "shortcut:escape"

    def __init__(self) -> None:
        self.calls: list[str] | None = None

    def episode(self, task: Task, seed: int | None) -> Agent:
        return Escape()

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        if self.calls is None:
            self.calls = []
            for t in tools:
                props = t.parameters.get("properties", {})
                texts = [k for k, v in props.items() if "string" in str(v.get("type", ""))]
                if t.name in TERMINAL_TOOLS or not texts:
                    continue
                for target in ESCAPES[:3]:
                    self.calls.append(tool_call(t.name, **{**placeholder_arguments(t), **dict.fromkeys(texts, target)}))
        if self.calls:
            return self.calls.pop(0)
        return terminal_call(tools, "done") or "done"


GENERIC: dict[str, Callable[..., Agent]] = {
    "shotgun": lambda seed=None: ObservationShotgun(),
    "wrong_submit": lambda seed=None: WrongSubmit(),
    "escape": lambda seed=None: Escape(),
}


async def play(env: RubricEnv, agent: Agent, task: Task, seed: int, name: str) -> Trajectory:
    """One episode through the Gymnasium face; an agent with ``see`` gets the id, ``info`` and ``state()``."""
    _, info = await asyncio.to_thread(env.reset, seed=seed, options={"task": task})
    ep = agent.episode(task, seed) if hasattr(agent, "episode") else agent
    for _ in range(env.max_steps):
        if hasattr(ep, "see"):
            ep.see({"task_id": task.id, "info": info, "state": env.state().model_dump(mode="json")})
        output = as_text(await ep.act(env.messages, env.tools()))
        _, _, terminated, truncated, info = await asyncio.to_thread(env.step, output)
        if terminated or truncated:
            break
    return env.trajectory(agent=name, seed=seed)


@dataclass
class ProbeResult:
    """Mean env reward and rubric total of one probe over the battery's tasks."""

    name: str
    reward: float
    total: float | None
    episodes: int


@dataclass
class BatteryReport:
    """The oracle and every probe of one env, with the thresholds they are held to."""

    env_id: str
    rubric_id: str
    oracle: ProbeResult | None = None
    probes: list[ProbeResult] = field(default_factory=list)
    threshold: float = 0.05
    good_min: float = 0.9
    errors: int = 0

    def worst(self) -> ProbeResult | None:
        """The probe with the highest rubric total (or env reward)."""
        return max(self.probes, key=lambda p: max(p.total or 0.0, p.reward), default=None)

    def problems(self) -> list[str]:
        out = [
            f"{p.name} earns env reward {p.reward:.3f} / rubric total {_fmt(p.total)} > {self.threshold:g}"
            for p in self.probes
            if p.reward > self.threshold or (p.total is not None and p.total > self.threshold)
        ]
        if self.oracle is not None and self.oracle.total is not None and self.oracle.total < self.good_min:
            out.append(f"the oracle earns only {self.oracle.total:.3f} < {self.good_min:g}")
        return out

    @property
    def ok(self) -> bool:
        return not self.problems()

    def line(self) -> str:
        w = self.worst()
        o = self.oracle
        good = "-" if o is None or o.total is None else f"{o.total:.3f}"
        worst = (
            "-"
            if w is None
            else f"{w.name} reward {w.reward:.3f}, total {w.total if w.total is None else round(w.total, 3)}"
        )
        return f"oracle total {good}; worst shortcut: {worst} (threshold {self.threshold:g})"


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def probe_agents(
    cls: type[RubricEnv],
    candidates: Mapping[str, Mapping[str, list[str]]] | None = None,
    constants: Sequence[str | None] = (),
) -> dict[str, Callable[..., Agent]]:
    """The battery's agents for an env: its own ``shortcut_agents`` over the generic ones, info readers first
    (with ``candidates``, the task-specific strings of each task's channels by task id, a ``ChannelReader`` for
    each of the first ``INFO_CANDIDATES`` positions of each channel that some task fills), then a
    ``ConstantAnswer`` for each of ``constants``."""
    imported = cls.shortcuts()
    out: dict[str, Callable[..., Agent]] = {}
    if "info_reader" in imported:
        out["info_reader"] = imported.pop("info_reader")
    else:
        for i in range(INFO_CANDIDATES):
            out[f"info_reader[{i}]"] = lambda seed=None, i=i: InfoReader(i)
    for channel in CHANNELS:
        most = max((len(c.get(channel, [])) for c in (candidates or {}).values()), default=0)
        for i in range(min(most, INFO_CANDIDATES)):
            out[f"info_reader:{channel}[{i}]"] = lambda seed=None, ch=channel, i=i: ChannelReader(
                ch, i, candidates or {}
            )
    for i, text in enumerate(constants):
        out[ConstantAnswer(text, i).name.removeprefix("shortcut:")] = lambda seed=None, t=text, i=i: ConstantAnswer(
            t, i
        )
    for name in ("shotgun", "wrong_submit", "escape"):
        out[name] = imported.pop(name) if name in imported else GENERIC[name]
    out.update(imported)
    return out


async def run_battery(
    env_id: str,
    *,
    n_tasks: int = 2,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    tasks: Sequence[Task] | None = None,
    threshold: float = 0.05,
    good_min: float = 0.9,
    concurrency: int = 4,
) -> BatteryReport:
    """Play the oracle on ``n_tasks`` tasks of the env's main held-out split and every probe on ``n_tasks`` tasks
    of each of its ``held_out_splits`` (or all of them on ``tasks``), and score them with the env reward and the
    default rubric (its programmatic criteria); a probe's name says its split when it is not the first. At most
    ``concurrency`` episodes are in flight, each in its own env (``leaks.EnvLease``); the report is the same as for
    episodes played one by one."""
    cls = spec(env_id).load()
    rubric = load_rubric(cls.default_rubric())
    judges = [CheckJudge()]
    scored, _ = judgeable(rubric, judges)
    prm = ProcessRewardModel(scored, judges)
    report = BatteryReport(env_id, rubric.id, threshold=threshold, good_min=good_min)
    kw = env_kwargs or {}
    first = make(env_id, **kw)
    lease = EnvLease(lambda: make(env_id, **kw), concurrency, first)
    try:
        main = cls.held_out_splits[0]
        by_split = (
            {main: list(tasks)}
            if tasks is not None
            else tasks_by_split(first, n_tasks, seed, cls.held_out_splits, required=main)
        )
        answerable = terminal_call(first.tools(), "x") != terminal_call(first.tools(), "y")  # a reader can answer
        constants: list[str | None] = []
        groups: list[tuple[str, Callable[..., Agent], list[Task]]] = []
        oracle = cls.agents().get("oracle")
        for k, (split, played) in enumerate(by_split.items()):
            candidates: dict[str, dict[str, list[str]]] = {}
            if answerable and played:
                renders = [await asyncio.to_thread(render, first, task, seed + i) for i, task in enumerate(played)]
                candidates = dict(zip((t.id for t in played), task_specific(renders), strict=True))
                if k == 0:
                    constants = constant_answers("\n".join(renders[0]["system prompt"]), first.tools())
            if k == 0 and oracle is not None:
                groups.append(("oracle", oracle, played))
            suffix = "" if k == 0 else f" on {split}"
            groups += [(name + suffix, f, played) for name, f in probe_agents(cls, candidates, constants).items()]

        async def episode(name: str, factory: Callable[..., Agent], i: int, task: Task) -> Trajectory:
            async with lease.env() as env:
                return await play(env, factory(seed=seed + i), task, seed + i, name)

        jobs = [
            lambda name=name, factory=factory, i=i, task=task: episode(name, factory, i, task)
            for name, factory, played in groups
            for i, task in enumerate(played)
        ]
        trajs = await in_order(jobs)

        async def score(name: str, trajs: list[Trajectory]) -> ProbeResult:
            rewards = [t.outcome.reward or 0.0 for t in trajs]
            totals = [b.total for b in await prm.score_many(trajs) if scored.criteria]
            report.errors += sum(x is None for x in totals)
            vals = [x for x in totals if x is not None]
            mean = sum(rewards) / len(rewards) if rewards else 0.0
            return ProbeResult(name, mean, sum(vals) / len(vals) if vals else None, len(trajs))

        at = 0
        for name, _, played in groups:
            result = await score(name, trajs[at : at + len(played)])
            at += len(played)
            if name == "oracle" and oracle is not None:
                report.oracle = result
            else:
                report.probes.append(result)
    finally:
        await lease.aclose()
    return report


def table_rows(report: BatteryReport) -> list[tuple[str, str, str]]:
    """``(probe, env reward, rubric total)`` rows for printing."""
    rows = []
    for p in ([report.oracle] if report.oracle else []) + report.probes:
        rows.append((p.name, f"{p.reward:.3f}", "-" if p.total is None else f"{p.total:.3f}"))
    return rows


def as_json(report: BatteryReport) -> str:
    return json.dumps(
        {
            "env": report.env_id,
            "rubric": report.rubric_id,
            "rows": [dict(zip(("probe", "reward", "total"), r, strict=True)) for r in table_rows(report)],
            "problems": report.problems(),
        }
    )
