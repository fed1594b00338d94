"""The one reward path: which rubric scores a trajectory, and the judges that score it, for every consumer.

``score``, training, ``eval``, the arena, the hacking monitors and the rubric buffer all call ``choose_rubric``
and score through a ``RewardPath``, so what a user sees offline is what the trainer optimises.

**Which rubric** (``choose_rubric``), most specific first:

1. ``override``: a rubric the user named for this one command (``rubricgym score --rubric FILE``);
2. the task's own rubric (``Task.rubric``: a clinical case's physician items, a question's CaRR statements);
3. the entry's rubric: a suite entry's ``rubric``, or the training config's ``env.rubric``;
4. the env's default rubric.

A task's own rubric beats the entry's because it is the more specific statement of what good work on *that* task
is (it is usually the default plus the task's items); the override exists for audits and ablations.

**Which judges** (``JudgeSettings``, the ``judge:`` section of a training config and the options of ``score`` /
``arena``): the env's programmatic checks always, plus one LLM judge or a panel over OpenAI-compatible endpoints,
with a persistent verdict cache shared across steps and resumes. ``RewardPath.require_judges`` fails before any
work starts when a rubric has LLM-judged criteria and no endpoint is configured, naming them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rubricgym.core.registry import spec
from rubricgym.core.rubric import Rubric
from rubricgym.core.types import Task, Trajectory
from rubricgym.rewards.cache import JudgeCache
from rubricgym.rewards.judges import CheckJudge, Judge
from rubricgym.rewards.llm_judge import LLMJudge
from rubricgym.rewards.panel import PanelJudge
from rubricgym.rewards.prm import Breakdown, ProcessRewardModel
from rubricgym.rewards.rubric import load_rubric

RubricLike = Rubric | dict[str, Any] | str | Path


def choose_rubric(task: Task, *, entry: RubricLike | None = None, override: RubricLike | None = None) -> Rubric:
    """The rubric a trajectory of ``task`` is scored with: ``override``, else the task's own rubric, else
    ``entry`` (a suite entry's or the training config's), else the env's default rubric."""
    if override is not None:
        return load_rubric(override)
    if task.rubric:
        return load_rubric(task.rubric)
    if entry is not None:
        return load_rubric(entry)
    return load_rubric(spec(task.env_id).load().default_rubric())


class Endpoint(BaseModel):
    """One OpenAI-compatible judge endpoint."""

    model_config = ConfigDict(extra="forbid")
    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)


class JudgeSettings(BaseModel):
    """LLM judges beside the env's checks: one endpoint (``base_url`` + ``model``) or a ``panel`` of them.

    The same options as ``rubricgym score`` / ``arena``; ``cache`` is the persistent verdict cache (relative to the
    run directory; verdicts are reused across steps and on ``--resume``)."""

    model_config = ConfigDict(extra="forbid")
    base_url: str | None = None
    model: str | None = None
    panel: list[Endpoint] = Field(default_factory=list)
    panel_method: Literal["mean", "majority"] = "mean"
    concurrency: int = Field(8, ge=1, le=256)
    timeout_s: float = Field(60.0, gt=0, le=3600)
    max_retries: int = Field(3, ge=0, le=20)
    max_tokens: int = Field(300, ge=16, le=8192)
    judge_all: bool = False
    """Let the LLM judge also take criteria that name a check (by default checks judge those)."""
    cache: str | None = "judge_cache.sqlite"
    """Verdict cache file (relative to the run directory); ``null`` for none."""

    def endpoints(self) -> list[Endpoint]:
        single = [Endpoint(base_url=self.base_url, model=self.model)] if self.base_url and self.model else []
        return single + list(self.panel)

    def validate_pair(self) -> None:
        if bool(self.base_url) != bool(self.model):
            raise ValueError("judge: give both base_url and model (the model name the server serves), or neither")


def build_judges(
    settings: JudgeSettings | None, run_dir: Path | None = None, cache: JudgeCache | None = None
) -> list[Judge]:
    """``CheckJudge`` first, then one ``LLMJudge`` or a ``PanelJudge`` of several, sharing one verdict cache
    (``cache``, else ``settings.cache`` under ``run_dir``)."""
    judges: list[Judge] = [CheckJudge()]
    if settings is None:
        return judges
    settings.validate_pair()
    endpoints = settings.endpoints()
    if not endpoints:
        return judges
    if cache is None and settings.cache:
        path = Path(settings.cache)
        cache = JudgeCache(path if path.is_absolute() or run_dir is None else run_dir / path)
    members = [
        LLMJudge(
            base_url=e.base_url,
            model=e.model,
            cache=cache,
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
            concurrency=settings.concurrency,
            max_tokens=settings.max_tokens,
            judge_all=settings.judge_all,
        )
        for e in endpoints
    ]
    judges.append(members[0] if len(members) == 1 else PanelJudge(members, method=settings.panel_method))
    return judges


def llm_criteria(rubric: Rubric) -> list[str]:
    """Ids of the criteria only an LLM can judge (a ``judge`` instruction and no ``check``)."""
    return [c.id for c in rubric.criteria if c.check is None]


class RewardPath:
    """Scores trajectories with the rubric ``choose_rubric`` picks for each, through one set of judges: one
    ``ProcessRewardModel`` per rubric (by hash), all sharing the judges and their verdict cache."""

    def __init__(
        self,
        judges: Sequence[Judge] | None = None,
        *,
        entry: RubricLike | None = None,
        override: RubricLike | None = None,
        name: str = "rubric",
        concurrency: int = 8,
    ):
        self.judges = list(judges) if judges else [CheckJudge()]
        self.entry = load_rubric(entry) if entry is not None else None
        self.override = load_rubric(override) if override is not None else None
        self.name = name
        self.concurrency = concurrency
        self._prms: dict[str, ProcessRewardModel] = {}

    def rubric_for(self, task: Task) -> Rubric:
        return choose_rubric(task, entry=self.entry, override=self.override)

    def prm_for(self, rubric: Rubric) -> ProcessRewardModel:
        """The (cached) process reward model of ``rubric`` over this path's judges."""
        prm = self._prms.get(rubric.hash)
        if prm is None:
            prm = self._prms[rubric.hash] = ProcessRewardModel(rubric, self.judges, name=self.name)
        return prm

    def set_entry(self, rubric: RubricLike) -> None:
        """Replace the entry rubric (the rubric buffer evolves it); tasks with their own rubric keep theirs."""
        self.entry = load_rubric(rubric)

    async def score(self, traj: Trajectory) -> Breakdown:
        return (await self.score_many([traj]))[0]

    async def score_many(self, trajs: Sequence[Trajectory], concurrency: int | None = None) -> list[Breakdown]:
        """Breakdowns in input order, each trajectory scored with its own rubric."""
        groups: dict[str, tuple[Rubric, list[int]]] = {}
        for i, t in enumerate(trajs):
            r = self.rubric_for(t.task)
            groups.setdefault(r.hash, (r, []))[1].append(i)
        out: list[Breakdown | None] = [None] * len(trajs)
        for rubric, idx in groups.values():
            scored = await self.prm_for(rubric).score_many(
                [trajs[i] for i in idx], concurrency=concurrency or self.concurrency
            )
            for i, b in zip(idx, scored, strict=True):
                out[i] = b
        return [b for b in out if b is not None]

    def require_judges(self, tasks: Iterable[Task]) -> None:
        """Raise ``ValueError`` when a rubric these tasks use has criteria no judge of this path can judge (an LLM
        criterion and no endpoint), naming them: before any model loads, not as masked steps later."""
        missing: dict[str, list[str]] = {}
        seen: set[str] = set()
        for task in tasks:
            rubric = self.rubric_for(task)
            if rubric.hash in seen:
                continue
            seen.add(rubric.hash)
            orphans = [c.id for c in rubric.criteria if not any(j.can_judge(c) for j in self.judges)]
            if orphans:
                missing[rubric.id] = orphans
        if missing:
            named = "; ".join(f"rubric {rid!r}: {', '.join(ids)}" for rid, ids in missing.items())
            raise ValueError(
                f"these criteria need an LLM judge and none is configured ({named}); add a judge: section "
                "(base_url and model of an OpenAI-compatible server, e.g. `rubricgym model serve`), or score with "
                "a rubric whose criteria name checks"
            )

    async def aclose(self) -> None:
        for j in self.judges:
            for member in getattr(j, "judges", [j]):
                if hasattr(member, "aclose"):
                    await member.aclose()
