"""Trainers: advantage estimators (GRPO, RLOO, stage-structured, per-step, tournament-ranked), PPO-clip loss,
the training loop and the machinery around it.

Reading order. The algorithm, pure functions first:

1. ``advantages.py``, ``tournament.py`` -- advantage estimators on arrays (formulas in docs/algorithms.md);
2. ``loss.py`` -- the PPO-clip loss, k3 KL, aggregation, importance weights, on tensors;
3. ``samples.py`` -- a rollout's turns as training sequences with per-token advantages;
4. ``rollouts.py`` -- ``Rollout`` (trajectory + turns + breakdown) and the ``RolloutBackend`` protocol;
5. ``estimate.py`` -- scored groups -> samples, one estimator function per name;
6. ``update.py`` -- one policy update (log-probs, loss, backward, step; off-policy weights in ``corrections.py``);
7. ``step.py`` -- ``StepTrainer.produce`` (collect, score, estimate) and ``consume`` (update, push weights);
8. ``trainer.py`` -- ``Trainer``: the run (evaluations, steps in order or pipelined by ``pipeline.py``, checkpoints).

Then the infrastructure: ``config.py`` (the YAML schema), ``policy.py`` (the local policy), ``backends.py``,
``ray_backend.py`` (with ``ray_sync.py``, its collective weight push, and ``ray_ranks.py``, one pool for several
learner ranks), ``vllm_backend.py`` (where rollouts are generated), ``sampler_copy.py`` (async runs' sampler
weights), ``distributed.py``, ``checkpoint.py``,
``monitors.py``, ``evaluation.py``, ``display.py``, ``report.py``, ``suite_trainer.py``, ``demo.py``, ``cli.py``.

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
