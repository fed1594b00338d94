"""Trainers: advantage estimators (GRPO, RLOO, stage-structured, per-step, tournament-ranked), PPO-clip loss,
the training loop and the machinery around it, in three floors, each importing only those below
(``tests/core/test_layering.py``):

- ``algo/`` -- the math: pure functions over tensors and typed records (estimators, losses, log-probs, samples);
- ``engine/`` -- how updates and sampling run: the update, sharding, LoRA, checkpoints, rollout backends (local,
  Ray, vLLM) built from the config in one place, weight sync;
- the run loop at this folder's root: ``data.py`` (what a run trains on: one env is a one-entry suite),
  ``step.py`` (one step), ``trainer.py`` (the run), ``config.py`` (the YAML schema every floor reads its section
  of), the CLI, reports, the demo's configs.

The reading order of a training step, and every module per floor: ``docs/architecture.md``.

Names are imported on first use so that ``import rubricgym.trainers.cli`` (the CLI start-up) does not load torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "grpo_advantages": "algo.advantages",
    "rloo_advantages": "algo.advantages",
    "stage_advantages": "algo.advantages",
    "stage_returns": "algo.advantages",
    "k3_kl": "algo.loss",
    "ppo_clip_loss": "algo.loss",
    "TournamentResult": "algo.tournament",
    "rank_advantages": "algo.tournament",
    "run_tournament": "algo.tournament",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rubricgym.trainers' has no attribute {name!r}")
    return getattr(importlib.import_module(f"rubricgym.trainers.{_EXPORTS[name]}"), name)
