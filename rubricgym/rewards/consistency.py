"""Outcome consistency: a rubric's total rises only when the work gets better.

A rubric can pass the gaming audit (``gaming.py``: nothing for nothing) and the shortcut battery
(``shortcuts.py``: nothing for tricks) and still mislead training: if a wrong answer reached with tidy tool calls
earns more than a right one, GRPO learns tidy tool calls while the solve rate falls. ``audit_consistency`` plays,
on the same test tasks,

- the env's ``scripted_agents`` (``oracle``, ``random*``, guessers, ...),
- the env's ``outcome_agents`` (``partial``: real work, partly right; ``failed``: the protocol completed with a
  wrong outcome; ``activity``: tool calls without progress), and
- generic probes: ``empty`` (no step), ``give_up`` (the terminal tool at once), ``wrong_submit`` and ``shotgun``
  (the shortcut battery's, or the env's own), and ``activity`` (each non-terminal tool called with its example
  arguments for a few turns, then the terminal tool) unless the env names its own ``activity``,

scores every episode with the default rubric's programmatic criteria (LLM-judged criteria are not audited here)
and its outcome (solved: ``Outcome.succeeded``, the env's own verdict, else an outcome reward of 1), and flags

- a *breach*: on one task, a failed episode whose total exceeds a solved episode's total;
- a chance-level agent (``random*``, ``empty``, ``give_up``, ``activity``) averaging more than ``chance_max``.

The standard fix is an outcome gate (``aggregation: {method: swe_trace, outcome_check: ...}``): every solved
episode then outranks every failed one, and process criteria rank attempts within an outcome.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import Field

from rubricgym.core.agent import Agent, BaseAgent, tool_call
from rubricgym.core.env import RubricEnv
from rubricgym.core.registry import make, spec
from rubricgym.core.rubric import Rubric, load_rubric
from rubricgym.core.types import Message, Task, ToolSpec, Trajectory, Wire, json_type
from rubricgym.rewards.gaming import TERMINAL_TOOLS, GiveUpAgent, empty_trajectory, judgeable, placeholder_arguments
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.leaks import EnvLease, in_order
from rubricgym.rewards.prm import ProcessRewardModel
from rubricgym.rewards.shortcuts import GENERIC, play

CHANCE_MAX = 0.1
"""The most a chance-level agent may average (random, doing nothing, activity without progress)."""
ACTIVITY_CALLS = 4
"""How many non-terminal tool calls the generic activity probe makes before it calls the terminal tool."""
Role = Literal["oracle", "teacher", "partial", "failed", "chance", "shotgun", "baseline"]
ROLES: tuple[Role, ...] = ("oracle", "teacher", "partial", "failed", "chance", "shotgun", "baseline")
OUTCOME_ROLE: dict[str, Role] = {"partial": "partial", "failed": "failed", "activity": "chance"}
"""The audit role of each ``RubricEnv.outcome_agents`` role (an env's activity agent is chance-level)."""
GATE_HINT = (
    "gate the default rubric on its outcome: aggregation: {method: swe_trace, outcome_check: <the outcome "
    "criterion or check>} (every solved episode then outranks every failed one; process criteria rank within)"
)


def example_arguments(tool: ToolSpec) -> dict[str, Any]:
    """A well-formed argument set for ``tool``: each required argument's schema example, else its first enum
    value, else a value of its type ("x", 1, 1.0, false, [], {})."""
    by_type: dict[str, Any] = {"string": "x", "integer": 1, "number": 1.0, "boolean": False, "array": [], "object": {}}
    out: dict[str, Any] = {}
    props = tool.parameters.get("properties", {})
    for name in tool.parameters.get("required", []):
        schema = props.get(name, {})
        if schema.get("examples"):
            out[name] = schema["examples"][0]
        elif schema.get("enum"):
            out[name] = schema["enum"][0]
        else:
            kinds = json_type(schema) if "type" in schema else ["string"]
            out[name] = by_type.get(next((k for k in kinds if k != "null"), "string"), "x")
    return out


class ActivityAgent(BaseAgent):
    """Activity without progress: calls the env's non-terminal tools in turn with their example arguments
    (``calls`` calls in all), then its terminal tool with placeholder arguments (``gaming.placeholder_arguments``:
    no answer, so a tool's example that happens to be a task's answer is no lucky solve), never reading what came
    back."""

    name = "probe:activity"

    def __init__(self, seed: int | None = None, calls: int = ACTIVITY_CALLS):  # seed: the probes' factory signature
        self.calls = calls
        self.made = 0

    def episode(self, task: Task, seed: int | None) -> Agent:
        return ActivityAgent(seed, self.calls)

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        work = [t for t in tools if t.name not in TERMINAL_TOOLS]
        if work and self.made < self.calls:
            t = work[self.made % len(work)]
            self.made += 1
            return tool_call(t.name, **example_arguments(t))
        by_name = {t.name: t for t in tools}
        terminal = next((by_name[n] for n in TERMINAL_TOOLS if n in by_name), None)
        return "I am done." if terminal is None else tool_call(terminal.name, **placeholder_arguments(terminal))


PROBES: dict[str, tuple[Role, Callable[..., Agent]]] = {
    "give_up": ("chance", lambda seed=None: GiveUpAgent()),
    "activity": ("chance", ActivityAgent),
    "wrong_submit": ("shotgun", GENERIC["wrong_submit"]),
    "shotgun": ("shotgun", GENERIC["shotgun"]),
}
"""The generic probes played live (``empty`` has no step to play), by name: (role, factory)."""


def scripted_role(name: str) -> Role:
    """The role of a scripted agent by its name: ``oracle*`` solves (it may read the answer), ``teacher*`` works
    from what it observed (it solves what it can), ``random*`` is chance-level, a ``*shotgun*``/``*shortcut*``
    agent is a shortcut, every other scripted agent (a guesser, a thorough history taker) a baseline."""
    if name.startswith("oracle"):
        return "oracle"
    if name.startswith("teacher"):
        return "teacher"
    if name.startswith("random"):
        return "chance"
    return "shotgun" if "shotgun" in name or "shortcut" in name else "baseline"


class Episode(Wire):
    """One audited episode: who played it, its rubric total and whether it solved the task."""

    task_id: str
    agent: str
    role: Role
    total: float | None
    """The rubric total (programmatic criteria); ``None`` when it could not be computed (counted in errors)."""
    reward: float
    solved: bool


class Breach(Wire):
    """On one task, a failed episode whose rubric total exceeds a solved episode's."""

    task_id: str
    failed_agent: str
    failed_total: float
    solved_agent: str
    solved_total: float

    def line(self) -> str:
        return (
            f"task {self.task_id}: failed {self.failed_agent!r} earns {self.failed_total:.3f} > solved "
            f"{self.solved_agent!r} {self.solved_total:.3f}"
        )


class RoleStats(Wire):
    """Mean rubric total and solve rate of one role's episodes."""

    role: Role
    agents: list[str]
    episodes: int
    mean_total: float | None
    solve_rate: float


class ConsistencyReport(Wire):
    """Every audited episode of one env, with the breaches and chance-level totals they show."""

    env_id: str
    rubric_id: str
    rubric_hash: str
    method: str
    tasks: int
    criteria: int = 0
    """Criteria the audit could judge; with none there is nothing to flag."""
    skipped_criteria: list[str] = Field(default_factory=list)
    """LLM-judged criteria: left out of every total (this audit is programmatic)."""
    chance_max: float = CHANCE_MAX
    errors: int = 0
    episodes: list[Episode] = Field(default_factory=list)

    def breaches(self) -> list[Breach]:
        """Every (failed, solved) pair of episodes of one task in which the failed one earns more, worst first."""
        out: list[Breach] = []
        scored = [(e, e.total) for e in self.episodes if e.total is not None]
        for task_id in dict.fromkeys(e.task_id for e, _ in scored):
            mine = [(e, total) for e, total in scored if e.task_id == task_id]
            solved = [(e, total) for e, total in mine if e.solved]
            for f, f_total in ((e, total) for e, total in mine if not e.solved):
                out += [
                    Breach(
                        task_id=task_id,
                        failed_agent=f.agent,
                        failed_total=f_total,
                        solved_agent=s.agent,
                        solved_total=s_total,
                    )
                    for s, s_total in solved
                    if f_total > s_total + 1e-9
                ]
        return sorted(out, key=lambda b: b.solved_total - b.failed_total)

    def agent_means(self, role: Role | None = None) -> dict[str, float | None]:
        """Mean total per agent (of ``role``), in play order."""
        names = dict.fromkeys(e.agent for e in self.episodes if role is None or e.role == role)
        return {a: _mean([e.total for e in self.episodes if e.agent == a]) for a in names}

    def roles(self) -> list[RoleStats]:
        """Per role (those played): its agents, mean total and solve rate."""
        out = []
        for role in ROLES:
            eps = [e for e in self.episodes if e.role == role]
            if eps:
                out.append(
                    RoleStats(
                        role=role,
                        agents=list(dict.fromkeys(e.agent for e in eps)),
                        episodes=len(eps),
                        mean_total=_mean([e.total for e in eps]),
                        solve_rate=sum(e.solved for e in eps) / len(eps),
                    )
                )
        return out

    def problems(self) -> list[str]:
        """Each breach as its pair, and each chance-level agent above ``chance_max`` (empty when consistent, or
        when no criterion could be judged)."""
        if not self.criteria:
            return []
        out = [b.line() for b in self.breaches()]
        for agent, mean in self.agent_means("chance").items():
            if mean is not None and mean > self.chance_max:
                out.append(f"chance-level {agent!r} averages {mean:.3f} > {self.chance_max:g}")
        return out

    @property
    def ok(self) -> bool:
        return not self.problems()

    def line(self) -> str:
        solved = [e.total for e in self.episodes if e.solved and e.total is not None]
        failed = [e.total for e in self.episodes if not e.solved and e.total is not None]
        chance = [m for m in self.agent_means("chance").values() if m is not None]
        parts = [
            f"{len(self.breaches())} breach(es) over {self.tasks} task(s)",
            f"solved min {_fmt(min(solved, default=None))}",
            f"failed max {_fmt(max(failed, default=None))}",
            f"chance-level max {_fmt(max(chance, default=None))} (<= {self.chance_max:g})",
        ]
        if not solved:
            parts.append("no solved episode to rank against")
        if self.errors:
            parts.append(f"{self.errors} total(s) could not be computed (left out)")
        if self.skipped_criteria:
            parts.append(f"LLM criteria {self.skipped_criteria} not audited")
        return f"{self.env_id}: " + "; ".join(parts)

    def table_rows(self) -> list[tuple[str, str, str, str]]:
        """``(role, agents, mean total, solve rate)`` rows for printing."""
        return [(r.role, ", ".join(r.agents), _fmt(r.mean_total), f"{r.solve_rate:.0%}") for r in self.roles()]

    def as_json(self) -> str:
        return json.dumps(
            {
                "env": self.env_id,
                "rubric": self.rubric_id,
                "rubric_hash": self.rubric_hash,
                "method": self.method,
                "roles": [r.model_dump() for r in self.roles()],
                "agents": self.agent_means(),
                "breaches": [b.model_dump() for b in self.breaches()],
                "skipped_criteria": self.skipped_criteria,
                "errors": self.errors,
                "problems": self.problems(),
            }
        )


def _mean(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def players(cls: type[RubricEnv]) -> list[tuple[str, Role, Callable[..., Agent]]]:
    """The audit's live agents for an env class: (name, role, factory), scripted agents first, then the env's
    outcome agents, then the generic probes (the env's own ``wrong_submit``/``shotgun``/``activity`` if it names
    them)."""
    out: list[tuple[str, Role, Callable[..., Agent]]] = [
        (name, scripted_role(name), factory) for name, factory in cls.agents().items()
    ]
    own = cls.outcome_roles()
    out += [(f"outcome:{role}", OUTCOME_ROLE[role], own[role]) for role in own]
    shortcuts = cls.shortcuts()
    for name, (role, factory) in PROBES.items():
        if name == "activity" and "activity" in own:
            continue
        out.append((f"probe:{name}", role, shortcuts.get(name, factory)))
    return out


async def audit_consistency(
    env_id: str,
    *,
    n_tasks: int = 2,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    chance_max: float = CHANCE_MAX,
    rubric: Rubric | dict[str, Any] | str | None = None,
    concurrency: int = 4,
) -> ConsistencyReport:
    """Play every agent of ``players`` (and the empty episode) on ``n_tasks`` test tasks, task ``i`` seeded
    ``seed + i``, and score each with ``rubric`` (default: the env's default rubric; its programmatic criteria).

    At most ``concurrency`` episodes are in flight, each in its own env (``leaks.EnvLease``); every env made is
    closed. The report lists every episode; ``report.problems()`` says what breaks consistency.
    """
    cls = spec(env_id).load()
    judges = [CheckJudge()]
    full = load_rubric(rubric if rubric is not None else cls.default_rubric())
    scored, skipped = judgeable(full, judges)
    prm = ProcessRewardModel(scored, judges)
    kw = env_kwargs or {}
    everyone = players(cls)
    with contextlib.closing(make(env_id, **kw)) as env:
        tasks = env.task_set(n_tasks, seed=seed, split="test")
    lease = EnvLease(lambda: make(env_id, **kw), concurrency)

    async def episode(name: str, factory: Callable[..., Agent], i: int, task: Task) -> Trajectory:
        async with lease.env() as env:
            return await play(env, factory(seed=seed + i), task, seed + i, name)

    jobs = [
        lambda name=name, factory=factory, i=i, task=task: episode(name, factory, i, task)
        for name, _, factory in everyone
        for i, task in enumerate(tasks)
    ]
    try:
        played = await in_order(jobs)
    finally:
        await lease.aclose()
    roles = [role for _, role, _ in everyone for _ in tasks]
    played += [empty_trajectory(t, agent="probe:empty") for t in tasks]
    roles += ["chance"] * len(tasks)
    report = ConsistencyReport(
        env_id=env_id,
        rubric_id=full.id,
        rubric_hash=full.hash,
        method=scored.aggregation.method,
        tasks=len(tasks),
        criteria=len(scored.criteria),
        skipped_criteria=skipped,
        chance_max=chance_max,
    )
    if not scored.criteria:
        return report
    breakdowns = await prm.score_many(played)
    for traj, role, b in zip(played, roles, breakdowns, strict=True):
        reward = traj.outcome.reward or 0.0
        report.errors += b.total is None
        report.episodes.append(
            Episode(
                task_id=traj.task.id,
                agent=traj.agent or "?",
                role=role,
                total=b.total,
                reward=reward,
                solved=traj.outcome.succeeded,
            )
        )
    return report
