"""Rubric rewards: rubrics, verdicts, judges, process reward models, aggregation, pairwise judging, audits.

>>> from rubricgym.rewards import ProcessRewardModel, CheckJudge
>>> prm = ProcessRewardModel(rubricgym.spec("toy-calculator-v0").load().default_rubric(), [CheckJudge()])
>>> breakdown = await prm.score(trajectory)   # also writes trajectory.rewards and steps[i].rewards
"""

from rubricgym.rewards.aggregate import (
    LEVEL_WEIGHTS,
    c_grpo_reward,
    carr_rubric_reward,
    rar_explicit,
    rar_implicit,
    renorm_step_rewards,
    signed_reward,
    swe_trace_margin,
)
from rubricgym.rewards.cache import JudgeCache
from rubricgym.rewards.judges import CheckJudge, Judge
from rubricgym.rewards.llm_judge import LLMJudge
from rubricgym.rewards.panel import PanelJudge, fleiss_kappa
from rubricgym.rewards.prm import Breakdown, ProcessRewardModel
from rubricgym.rewards.rubric import Aggregation, Criterion, Rubric, RubricError, load_rubric
from rubricgym.rewards.verdict import Evidence, Verdict

__all__ = [
    "LEVEL_WEIGHTS",
    "Aggregation",
    "Breakdown",
    "CheckJudge",
    "Criterion",
    "Evidence",
    "Judge",
    "JudgeCache",
    "LLMJudge",
    "PanelJudge",
    "ProcessRewardModel",
    "Rubric",
    "RubricError",
    "Verdict",
    "c_grpo_reward",
    "carr_rubric_reward",
    "fleiss_kappa",
    "load_rubric",
    "rar_explicit",
    "rar_implicit",
    "renorm_step_rewards",
    "signed_reward",
    "swe_trace_margin",
]
