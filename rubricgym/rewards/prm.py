"""``ProcessRewardModel``: score a trajectory against a rubric, step by step and as a whole.

Step-scope criteria are judged on every step (only steps of the criterion's ``stage`` when it has one), each
with its preceding context; trajectory-scope criteria once on the whole trajectory. Each criterion goes to the
first judge that can judge it (``CheckJudge`` for ``check`` criteria, ``LLMJudge`` for the rest), unless its
``applies_if`` conditions do not hold: then its verdict is N/A without asking a judge. The result, a
``Breakdown``, keeps every verdict and rolls them up per step, per stage, per criterion, for the outcome and in
total with the rubric's aggregation method. Failed verdicts are left out of every roll-up and counted in
``n_errors``; N/A verdicts are left out too (counted in ``n_not_applicable``). A step or stage roll-up with
nothing left is ``None``, never 0; a total with no applicable criterion is 0 (nothing done, nothing earned),
or ``None`` when verdicts failed.

Per-step rewards go onto ``trajectory.steps[i].rewards[name]`` (plus ``name/<criterion>``) and totals onto
``trajectory.rewards`` (``name``, ``name/outcome``, ``name/process``, ``name/stage/<s>``,
``name/criterion/<id>``, ``name/errors``), with ``name`` = ``"rubric"`` by default.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from rubricgym.core.aggregation import aggregation_method
from rubricgym.core.types import Trajectory, Wire
from rubricgym.rewards import aggregate as agg
from rubricgym.rewards.applicability import applicability
from rubricgym.rewards.judges import CheckJudge, Judge
from rubricgym.rewards.methods import RollUp
from rubricgym.rewards.rubric import Criterion, Rubric, load_rubric
from rubricgym.rewards.verdict import APPLIES_IF_JUDGE, Verdict


class Breakdown(Wire):
    """Everything a rubric said about one trajectory (one line of ``scores.jsonl``)."""

    trajectory_id: str
    task_id: str
    env_id: str
    agent: str
    rubric_id: str
    rubric_version: str
    rubric_hash: str
    method: str
    total: float | None
    outcome: float | None = None
    """Aggregate of the trajectory-scope criteria."""
    process: float | None = None
    """Mean of the per-step aggregates."""
    outcome_signal: float | None = None
    """The success signal that renorm / swe_trace / carr gate on (an outcome check, or the env reward)."""
    per_step: list[float | None] = Field(default_factory=list)
    step_rewards: list[float | None] = Field(default_factory=list)
    """What was written onto the steps: ``per_step``, or ReNorm's ``r_t`` for method renorm."""
    per_stage: dict[str, float] = Field(default_factory=dict)
    per_criterion: dict[str, float] = Field(default_factory=dict)
    verdicts: list[Verdict] = Field(default_factory=list)
    n_errors: int = 0
    n_not_applicable: int = 0

    @property
    def valid(self) -> bool:
        """No verdict failed and a total exists: safe to train on without masking."""
        return self.n_errors == 0 and self.total is not None

    @property
    def reward(self) -> float:
        """The scalar reward: the total, or ``nan`` when a verdict failed or no total exists (never 0 for an
        error; the trainer masks such a rollout)."""
        return float(self.total) if self.valid and self.total is not None else math.nan

    def errors(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.ok]


@dataclass(frozen=True)
class ScoredTrajectory:
    """A trajectory with the breakdown its rubric gave it: what the hacking monitors and the rubric buffer read.
    They read the typed breakdown (N/A criteria absent, failed verdicts counted), never ``Trajectory.rewards``
    keys, where a missing stage read as 0 and a masked rollout still showed its partial total."""

    trajectory: Trajectory
    breakdown: Breakdown

    @property
    def reward(self) -> float:
        return self.breakdown.reward


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


class ProcessRewardModel:
    """Score trajectories with ``rubric`` (a ``Rubric``, a dict in its schema or a file path).

    ``judges`` defaults to ``[CheckJudge()]``; add an ``LLMJudge`` (or a ``PanelJudge``) for LLM criteria.
    ``concurrency`` bounds the verdicts in flight per trajectory.
    """

    def __init__(
        self,
        rubric: Rubric | dict[str, Any] | str,
        judges: Judge | Sequence[Judge] | None = None,
        *,
        name: str = "rubric",
        concurrency: int = 16,
    ):
        self.rubric = load_rubric(rubric)
        if judges is None:
            judges = [CheckJudge()]
        self.judges: list[Judge] = [judges] if not isinstance(judges, Sequence) else list(judges)
        self.name = name
        self.concurrency = concurrency
        self._check_judge = next((j for j in self.judges if isinstance(j, CheckJudge)), None) or CheckJudge()

    def judge_for(self, criterion: Criterion) -> Judge | None:
        return next((j for j in self.judges if j.can_judge(criterion)), None)

    async def _verdict(self, sem: asyncio.Semaphore, c: Criterion, traj: Trajectory, step: int | None) -> Verdict:
        if c.applies_if:
            app = applicability(c.applies_if, traj, step, self._check_judge.run_check)
            if app.error is not None:
                return Verdict.failed(c.id, app.error, step=step, judge=APPLIES_IF_JUDGE)
            if not app.applies:
                return Verdict.not_applicable(c.id, app.reason, step=step, judge=APPLIES_IF_JUDGE)
        judge = self.judge_for(c)
        if judge is None:
            need = "a CheckJudge" if c.check else "an LLM judge (e.g. `rubricgym score --judge URL --judge-model M`)"
            return Verdict.failed(c.id, f"no judge can judge criterion {c.id!r}: it needs {need}", step=step)
        async with sem:
            try:
                return await judge.judge(c, traj, step, rubric=self.rubric)
            except Exception as e:  # a judge bug must not lose the other verdicts; record it as an error
                return Verdict.failed(c.id, f"{type(e).__name__}: {e}", step=step, judge=judge.id)

    def _outcome_signal(self, traj: Trajectory, by_id: dict[str, Verdict]) -> tuple[float | None, str | None]:
        """(signal in [0, 1], error) from the aggregation's ``outcome_check`` or the env's outcome reward."""
        name = self.rubric.aggregation.outcome_check
        if name is None:
            return min(1.0, max(0.0, float(traj.outcome.reward))), None
        return self._named_score(name, traj, by_id, binary=True)

    def _named_score(
        self, name: str, traj: Trajectory, by_id: dict[str, Verdict], *, binary: bool
    ) -> tuple[float | None, str | None]:
        """(score, error) of criterion ``name`` if the rubric has it, else of the env check called ``name``."""
        if name in by_id:
            v = by_id[name]
            if not v.ok:
                return None, v.error
            if not v.applicable:  # an N/A outcome is no success; an N/A score is no score
                return (0.0 if binary else None), None
            return (1.0 if v.met else 0.0) if binary else v.score, None
        result = self._check_judge.run_check(name, traj)
        if isinstance(result, str):
            return None, result
        if not result.applicable:
            return (0.0 if binary else None), None
        return ((1.0 if result.met else 0.0) if binary else result.score), None

    async def score(self, trajectory: Trajectory) -> Breakdown:
        """Judge every criterion, roll up, write rewards onto ``trajectory`` and return the breakdown."""
        rubric, method = self.rubric, self.rubric.aggregation.method
        sem = asyncio.Semaphore(self.concurrency)
        if aggregation_method(method).whole_rubric:
            return self._write(trajectory, await self._implicit(trajectory))
        jobs: list[tuple[Criterion, int | None]] = [(c, None) for c in rubric.trajectory_criteria]
        for s in trajectory.steps:
            jobs += [(c, s.index) for c in rubric.step_criteria if c.stage is None or c.stage == s.stage]
        verdicts = list(await asyncio.gather(*(self._verdict(sem, c, trajectory, i) for c, i in jobs)))
        return self._write(trajectory, self._roll_up(trajectory, verdicts))

    async def _implicit(self, traj: Trajectory) -> Breakdown:
        judge = next((j for j in self.judges if hasattr(j, "judge_rubric")), None)
        if judge is None:
            v = Verdict.failed("__rubric__", "method rar_implicit needs an LLM judge (it scores the whole rubric)")
        else:
            v = await judge.judge_rubric(self.rubric, traj)
        return self._breakdown(traj, total=v.score, verdicts=[v], n_errors=0 if v.ok else 1)

    def _breakdown(self, traj: Trajectory, **fields: Any) -> Breakdown:
        """A ``Breakdown`` of ``traj`` naming this rubric (id, version, hash, method), with ``fields`` as scored."""
        r = self.rubric
        return Breakdown(
            trajectory_id=traj.id,
            task_id=traj.task.id,
            env_id=traj.task.env_id,
            agent=traj.agent,
            rubric_id=r.id,
            rubric_version=r.version,
            rubric_hash=r.hash,
            method=r.aggregation.method,
            **fields,
        )

    def _roll_up(self, traj: Trajectory, verdicts: list[Verdict]) -> Breakdown:
        rubric, a = self.rubric, self.rubric.aggregation
        crit = {c.id: c for c in rubric.criteria}
        ok = [v for v in verdicts if v.scored]  # met or unmet: failed and N/A verdicts enter no roll-up
        failed = sum(not v.ok for v in verdicts)

        def roll(vs: Sequence[Verdict]) -> float | None:
            return agg.weighted_mean([_score(v) for v in vs], [crit[v.criterion_id].resolved_weight for v in vs])

        per_criterion: dict[str, float] = {}
        for c in rubric.criteria:
            scores = [_score(v) for v in ok if v.criterion_id == c.id]
            if scores:
                per_criterion[c.id] = sum(scores) / len(scores)
        per_step = [roll([v for v in ok if v.step == s.index]) for s in traj.steps]
        per_stage: dict[str, float] = {}
        for stage in dict.fromkeys([s.stage for s in traj.steps] + [c.stage for c in rubric.criteria if c.stage]):
            step_idx = {s.index for s in traj.steps if s.stage == stage}
            members = [
                v for v in ok if (v.step in step_idx) or (v.step is None and crit[v.criterion_id].stage == stage)
            ]
            if (value := roll(members)) is not None:
                per_stage[stage] = value
        outcome = roll([v for v in ok if v.step is None])
        process = _mean([p for p in per_step if p is not None])
        by_id = {v.criterion_id: v for v in verdicts if v.step is None}
        signal, signal_error = self._outcome_signal(traj, by_id)
        named = lambda name, binary: self._named_score(name, traj, by_id, binary=binary)  # noqa: E731
        rolled = RollUp(rubric, traj, per_step, per_criterion, by_id, signal, signal_error, failed, named)
        result = aggregation_method(a.method).total_fn()(rolled)  # the method's Total (rewards.methods)
        total, step_rewards, n_errors = result.total, result.step_rewards, failed + result.errors
        return self._breakdown(
            traj,
            total=total,
            outcome=outcome,
            process=process,
            outcome_signal=signal,
            per_step=per_step,
            step_rewards=step_rewards,
            per_stage=per_stage,
            per_criterion=per_criterion,
            verdicts=verdicts,
            n_errors=int(n_errors),
            n_not_applicable=sum(v.ok and not v.applicable for v in verdicts),
        )

    def _write(self, traj: Trajectory, b: Breakdown) -> Breakdown:
        n = self.name
        for step, reward in zip(traj.steps, b.step_rewards, strict=False):
            if reward is not None:
                step.rewards[n] = reward
        for v in b.verdicts:
            if v.scored and v.step is not None and v.step < len(traj.steps):
                traj.steps[v.step].rewards[f"{n}/{v.criterion_id}"] = float(v.score or 0.0)
        out = {f"{n}/errors": float(b.n_errors)}
        if b.total is not None:
            out[n] = b.total
        for key, value in (("outcome", b.outcome), ("process", b.process)):
            if value is not None:
                out[f"{n}/{key}"] = value
        out.update({f"{n}/stage/{k}": v for k, v in b.per_stage.items()})
        out.update({f"{n}/criterion/{k}": v for k, v in b.per_criterion.items()})
        traj.rewards.update(out)
        return b

    async def score_many(self, trajectories: Sequence[Trajectory], concurrency: int = 4) -> list[Breakdown]:
        """Score several trajectories, at most ``concurrency`` at a time, in input order."""
        sem = asyncio.Semaphore(concurrency)

        async def one(t: Trajectory) -> Breakdown:
            async with sem:
                return await self.score(t)

        return list(await asyncio.gather(*(one(t) for t in trajectories)))


def _score(v: Verdict) -> float:
    """A scored verdict's score (the ``Verdict`` validator guarantees one when it is met or unmet)."""
    assert v.score is not None, f"verdict for {v.criterion_id!r} is scored but has no score"
    return v.score
