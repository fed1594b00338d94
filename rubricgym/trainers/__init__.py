"""Trainers: advantage estimators (GRPO, stage-structured, tournament-ranked), PPO-clip loss, the loop.

Names are imported on first use so that ``import rubricgym.trainers.cli`` (the CLI start-up) does not load torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "grpo_advantages": "advantages",
    "rloo_advantages": "advantages",
    "stage_advantages": "advantages",
    "stage_returns": "advantages",
    "k3_kl": "loss",
    "ppo_clip_loss": "loss",
    "TournamentResult": "tournament",
    "rank_advantages": "tournament",
    "run_tournament": "tournament",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rubricgym.trainers' has no attribute {name!r}")
    return getattr(importlib.import_module(f"rubricgym.trainers.{_EXPORTS[name]}"), name)
