"""Rubric rewards: rubrics, verdicts, judges, process reward models, aggregation, pairwise judging, audits."""

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

__all__ = [
    "LEVEL_WEIGHTS", "c_grpo_reward", "carr_rubric_reward", "rar_explicit", "rar_implicit",
    "renorm_step_rewards", "signed_reward", "swe_trace_margin",
]
