"""Guidance for groups that all fail: hints in the prompt, adaptive levels, the guided samples trained as the
policy's own answer to the plain task.

On a hard agentic task a small policy's group often fails together: every reward equal, no variance, no
gradient. ``Guide`` (``guidance:`` in the training config) re-rolls part of such a group with a hint:

- **Trigger** (GHPO): a group whose best rollout scores below ``threshold`` (on the env's outcome reward or the
  rubric reward; masked rollouts do not count) is guided.
- **Hints**: the env's graded ``RubricEnv.guidance(task, level)`` (clinical: a specialty, then the category of a key
  exam; deep search: the first hop; SWE: the failing test, then the file; ...), else, with ``rubric_hints``, the rubric
  criteria the group's best rollout missed (RGR-GRPO), heaviest first, ``level`` of them. A hint is
  agent-visible: one that contains any of the task's secrets (``RubricEnv.secrets``, the leak audit's scanner;
  only the env's ``hintable`` fields, such as SWE's failing tests and files, are allowed) is dropped and counted,
  never shown.
- **Levels** (GHPO's adaptive ω): the re-rolled share is replaced by rollouts at the task's remembered level
  (1 the first time); while they still all fail the level rises within the same step, up to ``max_level``. A task
  remembers the level that last helped; an unguided rollout that solves it resets it to no guidance.
- **Training** (``correction``): ``tis`` lays each guided completion on the prompt *without* the hint (the task the
  policy will face) and weights each token by ``min(pi_old(o | plain) / mu(o | hinted), cap)``, truncated like the
  sampler TIS (Agent-RLVR stores guided successes against the unguided task; RGR-GRPO trains the refined sample
  under the plain prompt with a shaped ratio); ``hinted`` trains them under the hinted prompt they were sampled
  from, on-policy (GHPO), so the policy learns to act with hints. Advantages are computed over the whole group,
  guided and unguided rollouts together.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rubricgym.core.env import RubricEnv
from rubricgym.core.registry import make
from rubricgym.core.types import Task
from rubricgym.rewards.leaks import Scanner, make_secrets
from rubricgym.rewards.prm import Breakdown
from rubricgym.rewards.rubric import Rubric
from rubricgym.trainers.algo.rollouts import Group, Rollout
from rubricgym.trainers.config import GuidanceConfig

Regenerate = Callable[[Sequence[Task], Sequence[str], int], Awaitable[list[Group]]]
"""(tasks, hints, n) -> one scored group of ``n`` rollouts per task, each hint shown in its task's prompt."""


def rubric_hint(rubric: Rubric, breakdown: Breakdown | None, level: int) -> str | None:
    """The ``level`` heaviest criteria ``breakdown`` did not fully meet (pitfalls left out), as advice."""
    if breakdown is None or level < 1:
        return None
    scores: dict[str, float] = {}
    for v in breakdown.verdicts:
        if v.applicable and v.score is not None:
            scores[v.criterion_id] = min(scores.get(v.criterion_id, 1.0), v.score)
    missed = [c for c in rubric.criteria if c.level != "pitfall" and scores.get(c.id, 1.0) < 1.0]
    missed.sort(key=lambda c: -c.resolved_weight)
    if not missed:
        return None
    return "Your work will be judged on: " + "; ".join(c.text.rstrip(".") for c in missed[:level]) + "."


def value_of(r: Rollout, metric: str) -> float:
    """The value the trigger reads: the outcome reward, or the rubric reward (NaN when masked)."""
    if metric == "outcome":
        return float(r.trajectory.outcome.reward)
    return r.breakdown.reward if r.breakdown is not None else math.nan


@dataclass
class GuidanceStats:
    """One step's guidance, for ``metrics.jsonl`` (``guidance/...``)."""

    groups: int = 0
    guided_groups: int = 0
    rerolls: int = 0
    guided_rollouts: int = 0
    guided_solved: int = 0
    refused: int = 0
    levels: list[int] = field(default_factory=list)

    def record(self) -> dict[str, float]:
        out = {
            "guidance/share": self.guided_groups / self.groups if self.groups else 0.0,
            "guidance/rerolls": float(self.rerolls),
            "guidance/refused": float(self.refused),
        }
        if self.guided_rollouts:
            out["guidance/success"] = self.guided_solved / self.guided_rollouts
            out["guidance/level_mean"] = sum(self.levels) / len(self.levels)
        return out


class Guide:
    """Decides which groups to guide, with what hint, and re-rolls them (see the module docstring).

    ``env_of(task)`` is the (env id, kwargs) the task is played in; ``rubric_of(task)`` the rubric that scores it.
    """

    def __init__(
        self,
        cfg: GuidanceConfig,
        env_of: Callable[[Task], tuple[str, dict[str, Any]]],
        rubric_of: Callable[[Task], Rubric],
    ):
        self.cfg, self.env_of, self.rubric_of = cfg, env_of, rubric_of
        self.levels: dict[str, int] = {}
        """Task id -> the guidance level to start at the next time its group fails."""
        self._envs: dict[str, RubricEnv] = {}

    def failed(self, group: Sequence[Rollout]) -> bool:
        """Whether ``group`` needs guidance: its best (unmasked) rollout is below the threshold."""
        values = [v for r in group if math.isfinite(v := value_of(r, self.cfg.metric))]
        return bool(values) and max(values) < self.cfg.threshold

    def solved(self, r: Rollout) -> bool:
        v = value_of(r, self.cfg.metric)
        return math.isfinite(v) and v >= self.cfg.threshold

    def env(self, task: Task) -> RubricEnv:
        env_id, kwargs = self.env_of(task)
        key = f"{env_id}:{sorted(kwargs.items())!r}"
        if key not in self._envs:
            self._envs[key] = make(env_id, **kwargs)
        return self._envs[key]

    def hint(self, task: Task, level: int, best: Rollout | None, stats: GuidanceStats) -> str | None:
        """The hint at ``level``: the env's, else the missed rubric criteria; ``None`` where none is safe."""
        env = self.env(task)
        text = env.guidance(task, level) if level <= type(env).guidance_levels else None
        if not text and self.cfg.rubric_hints:
            text = rubric_hint(self.rubric_of(task), best.breakdown if best is not None else None, level)
        if not text:
            return None
        secret = [(path, v) for path, v in type(env).secrets(task) if _field(path) not in type(env).hintable]
        if Scanner(make_secrets(secret)).find(text):
            stats.refused += 1  # a hint that states a secret would teach the answer, not the task
            return None
        return text

    async def guide(self, groups: list[Group], regenerate: Regenerate) -> GuidanceStats:
        """Replace the last ``share`` of every failing group (in place) by guided rollouts, escalating levels."""
        stats = GuidanceStats(groups=len(groups))
        pending: dict[int, int] = {}  # group index -> level to try
        for g, group in enumerate(groups):
            task_id = group[0].trajectory.task.id
            if self.failed(group):
                pending[g] = max(1, self.levels.get(task_id, 1))
            elif any(self.solved(r) for r in group):
                self.levels.pop(task_id, None)  # solved unguided: no more help
        stats.guided_groups = len(pending)
        while pending:
            asks = self._asks(groups, pending, stats)
            if not asks:
                break
            pending = {}
            by_size: dict[int, list[tuple[int, int, str]]] = {}
            for ask in asks:
                size = max(1, min(len(groups[ask[0]]), math.ceil(self.cfg.share * len(groups[ask[0]]))))
                by_size.setdefault(size, []).append(ask)
            for size, batch in by_size.items():
                fresh = await regenerate(
                    [groups[g][0].trajectory.task for g, _, _ in batch], [h for *_, h in batch], size
                )
                stats.rerolls += 1
                for (g, level, _), new in zip(batch, fresh, strict=True):
                    if self._replace(groups[g], new, level) and level < self.cfg.max_level:
                        pending[g] = level + 1  # still failing: more help, this step
        for r in (r for group in groups for r in group if r.guidance):
            stats.guided_rollouts += 1
            stats.guided_solved += int(self.solved(r))
            stats.levels.append(r.guidance)
        return stats

    def _asks(self, groups: list[Group], pending: dict[int, int], stats: GuidanceStats) -> list[tuple[int, int, str]]:
        """(group, level, hint) for each pending group: the first level from its own with a safe hint."""
        asks = []
        for g, level in sorted(pending.items()):
            best = max(groups[g], key=lambda r: _finite(value_of(r, self.cfg.metric)))
            for lv in range(level, self.cfg.max_level + 1):
                text = self.hint(groups[g][0].trajectory.task, lv, best, stats)
                if text:
                    asks.append((g, lv, text))
                    break
        return asks

    def _replace(self, group: Group, new: Group, level: int) -> bool:
        """Put the guided rollouts ``new`` in the last slots of ``group``; remember the level; True if they all
        still fail."""
        for r in new:
            r.guidance = level
            r.trajectory.metrics["guidance_level"] = float(level)
        group[len(group) - len(new) :] = new
        self.levels[group[0].trajectory.task.id] = level
        return not any(self.solved(r) for r in new)

    def state_dict(self) -> dict[str, Any]:
        return {"levels": dict(self.levels)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.levels = {str(k): int(v) for k, v in (state or {}).get("levels", {}).items()}

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()


def _field(path: str) -> str:
    """The top-level ``hidden`` field of a secret's path (``FAIL_TO_PASS[0]`` -> ``FAIL_TO_PASS``)."""
    return re.split(r"[.\[]", path, maxsplit=1)[0]


def _finite(x: float) -> float:
    return x if math.isfinite(x) else -math.inf
