"""The trainable policy on the generation side: a ``LocalAgent`` whose episodes record their token turns.

``recording(task, seed, temperature)`` is one episode's view of the shared model; its ``turns`` (prompt ids,
completion ids, sampling log-probs) travel with the trajectory in a ``Rollout``, so the trainer trains on exactly
what was generated. ``response_prefix`` prefills the start of every assistant turn (e.g.
``<tool_call>{"name": "``), a standard way to make a small model's outputs parse: the prefix is part of the
prompt (never trained on) and of the action text the env sees.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from rubricgym.agents.local import LocalAgent
from rubricgym.core.types import Task

if TYPE_CHECKING:
    from rubricgym.trainers.config import TrainConfig


class TrainingPolicy(LocalAgent):
    """A ``LocalAgent`` (response prefix included) whose episode views are ``rollouts.Recorder`` episodes."""

    name = "policy"

    def recording(self, task: Task, seed: int, temperature: float | None) -> TrainingPolicy:
        """The episode view for (``task``, ``seed``), sampling at ``temperature`` (None: the policy's own)."""
        view = self.episode(task, seed)
        assert isinstance(view, TrainingPolicy)
        if temperature is not None:
            view.params = replace(view.params, temperature=temperature)
        return view


def sampler_policy(cfg: TrainConfig, device: str) -> TrainingPolicy:
    """The policy as the config's sampler runs it (``generation`` and ``model``): the GRPO trainer's and the warm
    start's, whose DAgger rounds play with it."""
    g = cfg.generation
    return TrainingPolicy(
        cfg.model.name,
        temperature=g.temperature,
        top_p=g.top_p,
        max_new_tokens=g.max_new_tokens,
        dtype=cfg.model.dtype,
        max_batch=g.max_batch,
        response_prefix=g.response_prefix,
        bf16_autocast=cfg.model.bf16_autocast,
        device=device,
        packed_weights=cfg.model.packed_weights,
        kv_reuse_tokens=g.kv_reuse_tokens,
    )
