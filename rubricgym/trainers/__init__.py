"""Trainers: advantage estimators (GRPO, stage-structured, tournament-ranked), PPO-clip loss, the loop."""

from rubricgym.trainers.advantages import grpo_advantages, rloo_advantages, stage_advantages, stage_returns
from rubricgym.trainers.loss import k3_kl, ppo_clip_loss
from rubricgym.trainers.tournament import TournamentResult, rank_advantages, run_tournament

__all__ = [
    "TournamentResult", "grpo_advantages", "k3_kl", "ppo_clip_loss", "rank_advantages", "rloo_advantages",
    "run_tournament", "stage_advantages", "stage_returns",
]
