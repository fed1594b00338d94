"""Rubric rewards: rubrics, verdicts, judges, process reward models, aggregation, pairwise judging, audits.

Typical use (inside async code)::

    from rubricgym.rewards import CheckJudge, LLMJudge, ProcessRewardModel
    rubric = rubricgym.spec("toy-calculator-v0").load().default_rubric()
    prm = ProcessRewardModel(rubric, [CheckJudge(), LLMJudge(base_url=URL, model=NAME)])
    breakdown = await prm.score(trajectory)   # also writes trajectory.rewards and steps[i].rewards
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
    swe_trace_reward,
)
from rubricgym.rewards.audit import (
    INJECTIONS,
    MASTER_KEYS,
    AuditReport,
    audit_judge,
    exploitation_rate,
    measure_exploitation,
    self_internalisation_gap,
)
from rubricgym.rewards.cache import JudgeCache
from rubricgym.rewards.generate import consistency_filter, dedupe_criteria, generate_rubric
from rubricgym.rewards.gullible import GullibleChat, gullible_reply
from rubricgym.rewards.judges import CheckJudge, Judge
from rubricgym.rewards.llm_judge import LLMJudge
from rubricgym.rewards.pairwise import PairwiseJudge, PairwiseResult
from rubricgym.rewards.panel import PanelJudge, fleiss_kappa
from rubricgym.rewards.prm import Breakdown, ProcessRewardModel
from rubricgym.rewards.rubric import Aggregation, Criterion, Rubric, RubricError, load_rubric
from rubricgym.rewards.verdict import Evidence, Verdict

__all__ = [
    "INJECTIONS",
    "LEVEL_WEIGHTS",
    "MASTER_KEYS",
    "Aggregation",
    "AuditReport",
    "Breakdown",
    "CheckJudge",
    "Criterion",
    "Evidence",
    "GullibleChat",
    "Judge",
    "JudgeCache",
    "LLMJudge",
    "PairwiseJudge",
    "PairwiseResult",
    "PanelJudge",
    "ProcessRewardModel",
    "Rubric",
    "RubricError",
    "Verdict",
    "audit_judge",
    "c_grpo_reward",
    "carr_rubric_reward",
    "consistency_filter",
    "dedupe_criteria",
    "exploitation_rate",
    "fleiss_kappa",
    "generate_rubric",
    "gullible_reply",
    "load_rubric",
    "measure_exploitation",
    "rar_explicit",
    "rar_implicit",
    "renorm_step_rewards",
    "self_internalisation_gap",
    "signed_reward",
    "swe_trace_margin",
    "swe_trace_reward",
]
