"""What the env's own oracle scores on each case of an imported file once it loads back (with
``diagnosis.map_diagnosis``, what ``rubricgym clinical import`` reports per case).

The score plays the env's ``oracle`` agent on every case of the written file and scores each episode with the
task's rubric (``rewards.path.choose_rubric``, its programmatic criteria) as ``rubricgym score`` would. A case
whose own diagnosis the oracle is not credited for would teach nothing: the import names it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rubricgym.core.registry import make
from rubricgym.core.rollout import rollout
from rubricgym.envs.clinical.env import ClinicalEnv
from rubricgym.rewards.gaming import judgeable
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.path import choose_rubric
from rubricgym.rewards.prm import ProcessRewardModel


@dataclass
class OracleScore:
    """The env's oracle on one case: whether the matcher credited its diagnosis, the env's reward and the rubric
    total (programmatic criteria; ``None`` when the rubric has none)."""

    correct: bool
    reward: float
    total: float | None


async def _oracle_scores(env_kwargs: dict[str, Any], on_case: Callable[[str], None] | None) -> dict[str, OracleScore]:
    env = make("clinical-v0", **env_kwargs)
    if not isinstance(env, ClinicalEnv):
        raise TypeError(f"clinical-v0 made a {type(env).__name__}, not a ClinicalEnv")
    tasks = env.task_set(len(env.cases))
    oracle = ClinicalEnv.agents()["oracle"]
    out: dict[str, OracleScore] = {}
    for task in tasks:
        traj = await rollout(make("clinical-v0", **env_kwargs), oracle(seed=0), task, seed=0)
        rubric, _ = judgeable(choose_rubric(task), [CheckJudge()])
        total = (await ProcessRewardModel(rubric, [CheckJudge()]).score(traj)).total if rubric.criteria else None
        last = traj.steps[-1].info if traj.steps else {}
        out[task.hidden["case_id"]] = OracleScore(bool(last.get("correct")), traj.outcome.reward or 0.0, total)
        if on_case is not None:
            on_case(task.hidden["case_id"])
    return out


def oracle_scores(
    cases: str, kb: str | None = None, on_case: Callable[[str], None] | None = None
) -> dict[str, OracleScore]:
    """Case id -> the env's oracle's score on that case of the cases file ``cases`` (``kb``: the knowledge-base
    folder the env takes, default the bundled one); ``on_case`` is called with each case id as it is played."""
    kw: dict[str, Any] = {"cases": cases}
    if kb:
        kw["kb"] = kb
    return asyncio.run(_oracle_scores(kw, on_case))
