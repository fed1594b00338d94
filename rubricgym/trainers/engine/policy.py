"""The trainable policy on the generation side: a ``LocalAgent`` whose episodes record their token turns.

``recording(task, seed, temperature)`` is one episode's view of the shared model; its ``turns`` (prompt ids,
completion ids, sampling log-probs) travel with the trajectory in a ``Rollout``, so the trainer trains on exactly
what was generated. ``response_prefix`` prefills the start of every assistant turn (e.g.
``<tool_call>{"name": "``), a standard way to make a small model's outputs parse: the prefix is part of the
prompt (never trained on) and of the action text the env sees.
"""

from __future__ import annotations

from dataclasses import replace

from rubricgym.agents.local import LocalAgent
from rubricgym.core.types import Task


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
