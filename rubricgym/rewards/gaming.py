"""Gaming audit: the *total* reward a rubric pays for master keys and for doing nothing, next to good work.

A per-criterion false-positive rate (``audit.audit_judge``) can look fine while the total still pays for
nothing: pitfalls met vacuously by an agent that never acted, a "clean actions" criterion met by one guess.
GRPO then finds the do-nothing attractor. ``audit_totals`` scores, per env, with the rubric training would use:

- ``good``: the env's known-good scripted agent (``oracle``) on the same tasks;
- ``master_keys``: each of ``audit.MASTER_KEYS`` as a one-step plain-text response;
- ``do_nothing``: ``empty`` (an episode with no step at all) and ``give_up`` (a live episode whose first and
  only tool call is the env's terminal tool, ``submit``/``answer``/..., with placeholder arguments).

It flags a rubric whose master-key or do-nothing mean total exceeds ``threshold`` (default 0.05) or whose
known-good mean falls below ``good_min`` (default 0.9). ``rubricgym audit-judge`` prints it and
``rubricgym check`` runs it for every env, so an env cannot ship a default rubric that pays for nothing.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import Field

from rubricgym.core.agent import BaseAgent
from rubricgym.core.env import RubricEnv
from rubricgym.core.registry import make, spec
from rubricgym.core.rollout import rollout, rollout_many
from rubricgym.core.rubric import Rubric, RubricError, load_rubric
from rubricgym.core.types import Message, Outcome, Task, ToolSpec, Trajectory, Wire
from rubricgym.rewards.audit import MASTER_KEYS, MasterKey, response_trajectory
from rubricgym.rewards.judges import CheckJudge, Judge
from rubricgym.rewards.leaks import EnvLease, in_order
from rubricgym.rewards.prm import ProcessRewardModel

TERMINAL_TOOLS = ("submit", "answer", "final_answer", "finish", "done", "diagnose", "stop")
"""Tool names that end an episode, tried in this order by the give-up probe."""
PLACEHOLDER_TEXT = "I don't know."


def empty_trajectory(task: Task, agent: str = "do-nothing:empty") -> Trajectory:
    """An episode in which the agent never acted: no step, no answer."""
    return Trajectory(
        task=task,
        messages=[Message(role="user", content=task.prompt)],
        steps=[],
        outcome=Outcome(truncated=True),
        agent=agent,
    )


def placeholder_arguments(tool: ToolSpec) -> dict[str, Any]:
    """The cheapest well-typed value for each required argument of ``tool`` (text, 0, false, [], {})."""
    props = tool.parameters.get("properties", {})
    out: dict[str, Any] = {}
    for name in tool.parameters.get("required", []):
        schema = props.get(name, {})
        kind = schema.get("type", "string")
        kind = kind[0] if isinstance(kind, list) and kind else kind
        if schema.get("enum"):
            out[name] = schema["enum"][0]
        else:
            out[name] = {"number": 0, "integer": 0, "boolean": False, "array": [], "object": {}}.get(
                kind, PLACEHOLDER_TEXT
            )
    return out


class GiveUpAgent(BaseAgent):
    """Calls the env's terminal tool at once with placeholder arguments, then only says it gives up."""

    name = "do-nothing:give_up"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        by_name = {t.name: t for t in tools}
        tool = next((by_name[n] for n in TERMINAL_TOOLS if n in by_name), None)
        if tool is None or any(m.role == "assistant" for m in messages):
            return "I give up."
        call = {"name": tool.name, "arguments": placeholder_arguments(tool)}
        return f"<tool_call>{json.dumps(call)}</tool_call>"


class TotalsReport(Wire):
    """Mean rubric totals per probe for one env (``None``: every total of that probe failed to compute)."""

    env_id: str
    rubric_id: str
    rubric_hash: str
    method: str
    tasks: int
    good_agent: str | None = None
    good: float | None = None
    master_keys: dict[str, float | None] = Field(default_factory=dict)
    do_nothing: dict[str, float | None] = Field(default_factory=dict)
    criteria: int = 0
    """Criteria the audit could judge; with none there is nothing to flag."""
    skipped_criteria: list[str] = Field(default_factory=list)
    """Criteria no given judge can judge (LLM criteria in a programmatic audit): left out of every total."""
    errors: int = 0
    threshold: float = 0.05
    good_min: float = 0.9

    def problems(self) -> list[str]:
        """Why the rubric is gameable (empty when it is not, or when no criterion could be judged)."""
        out: list[str] = []
        if not self.criteria:
            return out
        for kind, probes in (("master key", self.master_keys), ("do-nothing", self.do_nothing)):
            for name, total in probes.items():
                if total is not None and total > self.threshold:
                    out.append(f"{kind} {name!r} earns {total:.3f} > {self.threshold:g}")
        if self.good is not None and self.good < self.good_min:
            out.append(f"known-good agent {self.good_agent!r} earns only {self.good:.3f} < {self.good_min:g}")
        return out

    @property
    def ok(self) -> bool:
        return not self.problems()

    @property
    def worst(self) -> float | None:
        """The highest master-key or do-nothing mean total."""
        values = [v for v in (*self.master_keys.values(), *self.do_nothing.values()) if v is not None]
        return max(values, default=None)

    def line(self) -> str:
        good = "-" if self.good is None else f"{self.good:.3f}"
        worst = "-" if self.worst is None else f"{self.worst:.3f}"
        return f"{self.env_id}: good {good}, worst master-key/do-nothing {worst} (threshold {self.threshold:g})"


def judgeable(rubric: Rubric, judges: Sequence[Judge]) -> tuple[Rubric, list[str]]:
    """``rubric`` without the criteria none of ``judges`` can judge (same aggregation), and their ids."""
    keep = [c for c in rubric.criteria if any(j.can_judge(c) for j in judges)]
    skipped = [c.id for c in rubric.criteria if c not in keep]
    if not skipped:
        return rubric, []
    try:
        return Rubric.model_validate({**rubric.model_dump(), "criteria": [c.model_dump() for c in keep]}), skipped
    except ValueError as e:
        raise RubricError(
            f"rubric {rubric.id!r} without its {skipped} criteria is invalid ({e}); give the audit a judge for them"
        ) from None


def _mean(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


async def audit_totals(
    env_id: str,
    rubric: Rubric | dict[str, Any] | str | None = None,
    judges: Sequence[Judge] | None = None,
    *,
    n_tasks: int = 3,
    seed: int = 0,
    good_agent: str | None = "oracle",
    threshold: float = 0.05,
    good_min: float = 0.9,
    master_keys: dict[str, MasterKey] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    good: Sequence[Trajectory] | None = None,
    concurrency: int = 4,
) -> TotalsReport:
    """Mean totals of master keys, do-nothing probes and the known-good agent on ``n_tasks`` test tasks.

    ``rubric`` defaults to the env's default rubric (what training uses); ``judges`` to ``[CheckJudge()]``;
    ``good`` reuses the known-good agent's trajectories of these tasks instead of rolling them out again. At most
    ``concurrency`` give-up (or known-good) episodes are in flight, each in its own env (``leaks.EnvLease``); the
    report is the same as for episodes played one by one. Every env the audit makes is closed.
    """
    cls = spec(env_id).load()
    judges = list(judges) if judges else [CheckJudge()]
    full = load_rubric(rubric if rubric is not None else cls.default_rubric())
    scored, skipped = judgeable(full, judges)
    prm = ProcessRewardModel(scored, judges)
    kw = env_kwargs or {}
    with contextlib.closing(make(env_id, **kw)) as env:
        tasks = env.task_set(n_tasks, seed=seed, split="test")
    report = TotalsReport(
        env_id=env_id,
        rubric_id=full.id,
        rubric_hash=full.hash,
        method=scored.aggregation.method,
        tasks=len(tasks),
        criteria=len(scored.criteria),
        skipped_criteria=skipped,
        threshold=threshold,
        good_min=good_min,
    )

    async def totals(trajs: Sequence[Trajectory]) -> float | None:
        breakdowns = await prm.score_many(list(trajs))
        report.errors += sum(b.total is None for b in breakdowns)
        return _mean([b.total for b in breakdowns])

    keys = MASTER_KEYS if master_keys is None else master_keys
    for name, make_key in keys.items():
        report.master_keys[name] = await totals(
            [response_trajectory(t, make_key(t, full), agent=f"master-key:{name}") for t in tasks]
        )
    report.do_nothing["empty"] = await totals([empty_trajectory(t) for t in tasks])
    report.do_nothing["give_up"] = await totals(
        await _give_up(lambda: make(env_id, **{**kw, "max_steps": 3}), tasks, seed, concurrency)
    )
    agents = cls.agents()
    if good_agent and (good is not None or good_agent in agents):
        if good is None:
            played = await rollout_many(
                env_id, agents[good_agent](), tasks, concurrency=concurrency, progress=False, env_kwargs=kw
            )
            good = played.trajectories
        report.good_agent, report.good = good_agent, await totals([t.model_copy(deep=True) for t in good])
    return report


async def _give_up(
    factory: Callable[[], RubricEnv], tasks: Sequence[Task], seed: int, concurrency: int
) -> list[Trajectory]:
    """The give-up probe's episodes of ``tasks`` (task ``i`` seeded ``seed + i``), at most ``concurrency`` in flight."""
    lease = EnvLease(factory, concurrency)

    async def episode(i: int, task: Task) -> Trajectory:
        async with lease.env() as env:
            return await rollout(env, GiveUpAgent(), task, seed=seed + i)

    jobs = [lambda i=i, task=task: episode(i, task) for i, task in enumerate(tasks)]
    try:
        return await in_order(jobs)
    finally:
        await lease.aclose()
