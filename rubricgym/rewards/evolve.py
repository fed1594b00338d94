"""Evolving rubrics: RubricEM's per-stage rubric buffer during training.

The rubric a run trains on is its base rubric plus a buffer of criteria per stage, capped per stage (RubricEM:
3/2/2/3 over plan/research/review/answer; here the caps apply in the env's stage order, the last one repeating).
After each scored step ``RubricBuffer.update``

1. retires buffered criteria that stopped discriminating: no variance within any group for ``retire_after``
   consecutive steps (a criterion every rollout of a group meets, or none does, carries no advantage);
2. adds criteria written from the current policy's contrasting rollouts (pairs of one group's rollouts whose
   rewards differ, widest gap first) by a ``writer``, into the stage whose reward separates the two most, while
   that stage has room: ``llm_writer`` (OpenRubrics-style contrastive generation, ``rewards.generate``) or
   ``check_writer`` (the env checks the rubric does not use yet that the better rollout passes and the worse one
   fails).

Base criteria are never retired. Every version is recorded (``versions``; ``rubric_versions.jsonl`` in the run
directory) with its content hash and the full rubric, so any past score can be reproduced by re-scoring with the
recorded version (``RubricBuffer.version(hash)``). With ``keep_trajectories`` the scored groups each update saw
go to ``rubric_scored.jsonl`` beside it, tagged with the hash that scored them, and ``reproduce`` re-scores them
(``rubricgym rubric-versions RUN_DIR``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rubricgym.core.checks import NamedCheck
from rubricgym.core.llm import ChatClient
from rubricgym.core.rubric import Criterion, Rubric
from rubricgym.core.safeio import append_lines, atomic_write
from rubricgym.core.types import Task, Trajectory, Wire
from rubricgym.rewards.generate import generate_rubric
from rubricgym.rewards.monitor import final_text
from rubricgym.rewards.prm import Breakdown, ProcessRewardModel, ScoredTrajectory

Writer = Callable[[Task, Trajectory, Trajectory, str, int, Rubric], Awaitable[list[Criterion]]]
"""``writer(task, better, worse, stage, n, rubric)``: at most ``n`` new criteria for ``stage``."""


class BufferConfig(BaseModel):
    """``rubric_buffer:`` in a training config."""

    model_config = ConfigDict(extra="forbid")
    caps: list[int] = Field(default_factory=lambda: [3, 2, 2, 3])
    """Buffered criteria per stage, in the env's stage order (the last cap repeats)."""
    retire_after: int = Field(3, ge=1)
    """Retire a buffered criterion after this many consecutive steps without variance within any group."""
    add_per_step: int = Field(1, ge=0)
    pairs_per_group: int = Field(4, ge=1)
    """Contrasting (better, worse) pairs per group the writer may read, widest reward gap first."""
    writer: str = "checks"
    """``checks`` (env checks the rubric does not use yet) or ``llm`` (needs ``base_url`` and ``model``)."""
    base_url: str | None = None
    model: str | None = None
    keep_trajectories: bool = True
    """Record each step's scored groups (``rubric_scored.jsonl`` beside the versions) so they can be re-scored."""


class RubricVersion(Wire):
    step: int
    version: str
    hash: str
    added: list[str] = Field(default_factory=list)
    retired: list[str] = Field(default_factory=list)
    rubric: dict[str, Any]


class ScoredRollout(Wire):
    """One rollout a buffer update saw, with the rubric version (hash) that scored it and the breakdown it got."""

    step: int
    group: int
    hash: str
    trajectory: Trajectory
    breakdown: Breakdown


SCORED = "rubric_scored.jsonl"


def check_writer(checks: Mapping[str, NamedCheck]) -> Writer:
    """Contrast by the env's own checks: propose the unused trajectory-scope checks that ``better`` meets and
    ``worse`` does not (deterministic; no LLM needed)."""

    async def write(
        task: Task, better: Trajectory, worse: Trajectory, stage: str, n: int, rubric: Rubric
    ) -> list[Criterion]:
        used = rubric.referenced_checks()
        out: list[Criterion] = []
        for name, chk in sorted(checks.items()):
            if len(out) >= n or name in used or chk.scope != "trajectory":
                continue
            try:
                b, w = chk(better), chk(worse)
            except Exception:  # a check that cannot judge these rollouts proposes nothing
                continue
            if b.applicable and w.applicable and b.met and not w.met:
                out.append(
                    Criterion(
                        id=f"evolved_{name}", text=chk.description or name, level="important", stage=stage, check=name
                    )
                )
        return out

    return write


def llm_writer(client: Any) -> Writer:
    """OpenRubrics-style contrastive generation (``generate.generate_rubric``) from the two final outputs."""

    async def write(
        task: Task, better: Trajectory, worse: Trajectory, stage: str, n: int, rubric: Rubric
    ) -> list[Criterion]:
        generated = await generate_rubric(client, task, final_text(better), final_text(worse), max_criteria=n)
        taken = {c.id for c in rubric.criteria}
        return [
            c.model_copy(update={"id": f"evolved_{c.id}", "stage": stage, "level": "important"})
            for c in generated.criteria
            if f"evolved_{c.id}" not in taken
        ][:n]

    return write


class RubricBuffer:
    """The base rubric plus per-stage buffered criteria, updated from each step's scored groups."""

    def __init__(
        self,
        base: Rubric,
        stages: Sequence[str],
        config: BufferConfig,
        writer: Writer | None,
        *,
        record: Path | None = None,
    ):
        self.base, self.stages, self.config, self.writer = base, list(stages), config, writer
        self.record = record
        self.scored = record.with_name(SCORED) if record is not None and config.keep_trajectories else None
        self.buffered: list[Criterion] = []
        self.quiet: dict[str, int] = {}
        self.versions: list[RubricVersion] = []
        self.current = base
        self._trimmed = False
        if record is not None and record.exists():
            record.unlink()  # a new buffer starts a new history
        self._log(0, base, [], [])

    def cap(self, stage: str) -> int:
        caps = self.config.caps or [0]
        i = self.stages.index(stage) if stage in self.stages else len(self.stages)
        return caps[min(i, len(caps) - 1)]

    def version(self, hash: str) -> Rubric:
        """The recorded rubric with content hash ``hash`` (re-scoring with it reproduces that step's scores)."""
        for v in self.versions:
            if v.hash == hash:
                return Rubric.model_validate(v.rubric)
        raise KeyError(f"no recorded rubric version with hash {hash!r}")

    def _log(self, step: int, rubric: Rubric, added: list[str], retired: list[str]) -> None:
        v = RubricVersion(
            step=step,
            version=rubric.version,
            hash=rubric.hash,
            added=added,
            retired=retired,
            rubric=rubric.model_dump(mode="json"),
        )
        self.versions.append(v)
        if self.record is not None:
            self.record.parent.mkdir(parents=True, exist_ok=True)
            append_lines(self.record, (v.model_dump_json() + "\n").encode("utf-8"))

    def _keep(self, step: int, groups: Sequence[Sequence[ScoredTrajectory]]) -> None:
        """Append the groups scored with the current version (before this update changes it). The first call
        keeps only the earlier steps' rollouts of an existing record: none in a fresh run, the checkpointed ones
        when a run resumes."""
        if self.scored is None:
            return
        if not self._trimmed and self.scored.exists():  # drop what a fresh run or a resume will score again
            kept = [line for line in self.scored.read_text().splitlines() if _step_of(line) < step]
            atomic_write(self.scored, "".join(f"{line}\n" for line in kept))
        self._trimmed = True
        self.scored.parent.mkdir(parents=True, exist_ok=True)
        lines = [
            ScoredRollout(
                step=step, group=gi, hash=self.current.hash, trajectory=s.trajectory, breakdown=s.breakdown
            ).model_dump_json()
            + "\n"
            for gi, g in enumerate(groups)
            for s in g
        ]
        append_lines(self.scored, "".join(lines).encode("utf-8"))

    @staticmethod
    def _discriminates(cid: str, groups: Sequence[Sequence[ScoredTrajectory]]) -> bool:
        """Whether criterion ``cid`` scored differently within some group (N/A verdicts and masked rollouts,
        whose verdicts failed, tell nothing either way)."""
        for g in groups:
            vals = {s.breakdown.per_criterion.get(cid) for s in g if s.breakdown.valid} - {None}
            if len(vals) > 1:
                return True
        return False

    def _open(self, stage: str) -> int:
        return self.cap(stage) - sum(c.stage == stage for c in self.buffered)

    def _contrast(
        self, groups: Sequence[Sequence[ScoredTrajectory]]
    ) -> list[tuple[ScoredTrajectory, ScoredTrajectory]]:
        """(better, worse) pairs of one group's rollouts whose rewards differ, the widest gaps first, at most
        ``pairs_per_group`` per group. Not just the best and the worst: a lucky best (a correct guess) or a tie
        at the top can share every unused behaviour with the worst while another pair of the group contrasts.
        Masked rollouts (a failed verdict: reward ``nan``) take no part."""
        out: list[tuple[float, ScoredTrajectory, ScoredTrajectory]] = []
        for g in groups:
            ok = [s for s in g if math.isfinite(s.reward)]
            pairs = [(b.reward - w.reward, b, w) for b in ok for w in ok if b.reward > w.reward]
            out += sorted(pairs, key=lambda p: -p[0])[: self.config.pairs_per_group]
        return [(b, w) for _, b, w in sorted(out, key=lambda p: -p[0])]

    def _stage(self, better: ScoredTrajectory, worse: ScoredTrajectory) -> str | None:
        """The open stage (room under its cap) whose reward separates ``better`` from ``worse`` the most. A rollout
        that never reached a stage earned 0 there; one that reached it with every criterion N/A has no score there,
        so that stage separates nothing (it comes after every stage with a gap)."""
        open_stages = [s for s in self.stages if self._open(s) > 0]
        if not open_stages:
            return None

        def gap(s: str) -> float:
            b, w = _stage_score(better, s), _stage_score(worse, s)
            return b - w if b is not None and w is not None else -math.inf

        return max(open_stages, key=gap)

    async def _add(self, groups: Sequence[Sequence[ScoredTrajectory]]) -> list[str]:
        added: list[str] = []
        if self.writer is None:
            return added
        for better, worse in self._contrast(groups):
            stage = self._stage(better, worse)
            if len(added) >= self.config.add_per_step or stage is None:
                break
            room = min(self._open(stage), self.config.add_per_step - len(added))
            taken = {c.id for c in self.base.criteria} | {c.id for c in self.buffered}
            b, w = better.trajectory, worse.trajectory
            for c in (await self.writer(b.task, b, w, stage, room, self.current))[:room]:
                if c.id not in taken:
                    self.buffered.append(c)
                    self.quiet[c.id] = 0
                    taken.add(c.id)
                    added.append(c.id)
        return added

    async def update(self, step: int, groups: Sequence[Sequence[ScoredTrajectory]]) -> Rubric | None:
        """Retire and add criteria after ``step``'s groups were scored (each rollout with the breakdown the
        current rubric gave it; rollouts another rubric scored, a task's own, are not this buffer's to learn from
        and are left out); the new rubric, or ``None`` if unchanged."""
        mine = [[s for s in g if s.breakdown.rubric_hash == self.current.hash] for g in groups]
        groups = [g for g in mine if g]
        self._keep(step, groups)
        retired = []
        for c in list(self.buffered):
            self.quiet[c.id] = 0 if self._discriminates(c.id, groups) else self.quiet.get(c.id, 0) + 1
            if self.quiet[c.id] >= self.config.retire_after:
                self.buffered.remove(c)
                retired.append(c.id)
        added = await self._add(groups)
        if not added and not retired:
            return None
        n = len(self.versions)
        self.current = Rubric.model_validate(
            {
                **self.base.model_dump(),
                "version": f"{self.base.version}+e{n}",
                "criteria": [c.model_dump() for c in [*self.base.criteria, *self.buffered]],
            }
        )
        self._log(step, self.current, added, retired)
        return self.current

    def state_dict(self) -> dict[str, Any]:
        """The buffered criteria, their quiet-step counts, the recorded versions and the rubric now in use."""
        return {
            "buffered": [c.model_dump(mode="json") for c in self.buffered],
            "quiet": dict(self.quiet),
            "versions": [v.model_dump(mode="json") for v in self.versions],
            "current": self.current.model_dump(mode="json"),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state_dict()``; the version record is rewritten to match it."""
        self.buffered = [Criterion.model_validate(c) for c in state["buffered"]]
        self.quiet = {k: int(v) for k, v in state["quiet"].items()}
        self.versions = [RubricVersion.model_validate(v) for v in state["versions"]]
        self.current = Rubric.model_validate(state["current"])
        if self.record is not None:
            atomic_write(self.record, "".join(v.model_dump_json() + "\n" for v in self.versions))


def _stage_score(s: ScoredTrajectory, stage: str) -> float | None:
    """The breakdown's score of ``stage``: 0 for a stage the episode never reached, ``None`` for one it reached
    whose criteria were all N/A."""
    if stage in s.breakdown.per_stage:
        return s.breakdown.per_stage[stage]
    return None if any(step.stage == stage for step in s.trajectory.steps) else 0.0


def build_buffer(
    config: BufferConfig | None, base: Rubric, env_cls: Any, *, record: Path | None
) -> RubricBuffer | None:
    """The run's rubric buffer, or ``None`` without a ``rubric_buffer`` config section."""
    if config is None:
        return None
    if config.writer == "llm":
        if not (config.base_url and config.model):
            raise ValueError("rubric_buffer.writer 'llm' needs rubric_buffer.base_url and rubric_buffer.model")
        writer = llm_writer(ChatClient(config.base_url, config.model))
    else:
        writer = check_writer(dict(env_cls.checks()))
    return RubricBuffer(base, list(env_cls.stages) or ["act"], config, writer, record=record)


def read_versions(path: Path) -> list[RubricVersion]:
    return [RubricVersion.model_validate(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


class VersionCheck(BaseModel):
    """One recorded version and how its rollouts re-score (``reproduce``)."""

    step: int
    version: str
    hash: str
    added: list[str]
    retired: list[str]
    criteria: int
    rollouts: int
    """Stored rollouts this version scored during the run."""
    identical: int
    """Of those, how many re-score to exactly the recorded rewards (total, stages, criteria)."""


def _step_of(line: str) -> int:
    return int(json.loads(line)["step"]) if line.strip() else 1 << 62


def read_scored(path: Path) -> list[ScoredRollout]:
    return [ScoredRollout.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]


def _own(rewards: Mapping[str, float], key: str) -> dict[str, float]:
    return {k: v for k, v in rewards.items() if k == key or k.startswith(f"{key}/")}


async def rescore(rubric: Rubric, traj: Trajectory, key: str = "rubric") -> Breakdown:
    """The breakdown ``rubric`` gives a copy of ``traj`` (checks only, as the buffer's run scores)."""
    t = traj.model_copy(deep=True)
    t.rewards = {k: v for k, v in t.rewards.items() if k not in _own(t.rewards, key)}
    return await ProcessRewardModel(rubric, name=key).score(t)


SCORES = {
    "total",
    "outcome",
    "process",
    "outcome_signal",
    "per_step",
    "step_rewards",
    "per_stage",
    "per_criterion",
    "n_errors",
    "n_not_applicable",
}
"""The fields of a ``Breakdown`` that are scores (verdict rationales and latencies may differ between runs)."""


def same_scores(a: Breakdown, b: Breakdown) -> bool:
    """Whether two breakdowns give the same numbers (``nan`` equal to ``nan``)."""
    x, y = a.model_dump(include=SCORES), b.model_dump(include=SCORES)
    return json.dumps(x, sort_keys=True) == json.dumps(y, sort_keys=True)


async def reproduce(run_dir: Path, key: str = "rubric") -> list[VersionCheck]:
    """Every version in ``run_dir/rubric_versions.jsonl``: re-score the stored rollouts it scored with the
    recorded rubric and count those whose breakdowns come out with identical scores."""
    versions = read_versions(run_dir / "rubric_versions.jsonl")
    scored = read_scored(run_dir / SCORED) if (run_dir / SCORED).exists() else []
    out = []
    for v in versions:
        rubric = Rubric.model_validate(v.rubric)
        if rubric.hash != v.hash:
            raise ValueError(
                f"{run_dir}: version {v.version} records hash {v.hash} but its rubric hashes to {rubric.hash}"
            )
        mine = [r for r in scored if r.hash == v.hash]
        same = [same_scores(await rescore(rubric, r.trajectory, key), r.breakdown) for r in mine]
        out.append(
            VersionCheck(
                step=v.step,
                version=v.version,
                hash=v.hash,
                added=v.added,
                retired=v.retired,
                criteria=len(rubric.criteria),
                rollouts=len(mine),
                identical=sum(same),
            )
        )
    return out
