"""The sampler's own copy of the policy for the async pipeline (``async.enabled``, ``trainers/pipeline.py``).

While the learner updates its weights in place, the next steps' rollouts are generated from a separate copy, so a
generation never reads half-updated weights. After each update the learner *stages* a snapshot of what the update
changes (the trainable parameters: all of them, or the LoRA adapters); the producer *publishes* it into the copy
at the start of its next collection, when no generation is running. Every turn generated from the copy is tagged
with the copy's version (the number of updates behind its weights), which is what the staleness is measured on.

With ``ray: true`` the actors are the sampler: ``PoolWeights`` stages the same snapshot and publishes it by pushing
it to the actors at the start of the next collection, when none of them generates.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from rubricgym.trainers.engine.policy import TrainingPolicy
from rubricgym.trainers.engine.sampling import RolloutBackend


class StagedWeights:
    """A frozen copy of ``model``'s weights at policy version ``version``, updated by ``stage`` then ``publish``;
    ``published`` says what else holds them (a subclass's samplers)."""

    def __init__(self, model: Any, version: int) -> None:
        self.names = [n for n, p in model.named_parameters() if p.requires_grad]  # what an update changes
        self.model = copy.deepcopy(model).eval().requires_grad_(False)
        self.version = version
        self._pending: tuple[int, dict[str, torch.Tensor]] | None = None

    def stage(self, model: Any, version: int) -> None:
        """Snapshot ``model``'s trainable parameters as policy ``version`` (call it after an update, before
        anything changes them again); it replaces a snapshot not yet published."""
        params = dict(model.named_parameters())
        with torch.no_grad():
            self._pending = (version, {n: params[n].detach().clone() for n in self.names})

    def publish(self) -> int:
        """Copy the staged snapshot into the sampler's weights (only while nothing generates from them) and return
        the version the sampler now holds."""
        if self._pending is not None:
            version, snapshot = self._pending
            self._pending = None
            params = dict(self.model.named_parameters())
            with torch.no_grad():
                for name, value in snapshot.items():
                    params[name].copy_(value)
            self.published()
            self.version = version
        return self.version

    def published(self) -> None:
        """What follows a publish: nothing here."""


class SamplerCopy(StagedWeights):
    """A frozen copy of ``model`` at policy version ``version`` and a ``TrainingPolicy`` sampling from it."""

    def __init__(self, policy: TrainingPolicy, model: Any, version: int) -> None:
        super().__init__(model, version)
        policy_copy = policy.with_model(self.model)
        assert isinstance(policy_copy, TrainingPolicy)
        self.policy = policy_copy

    def published(self) -> None:
        self.policy.release_packed()  # packed from the previous weights


class PoolWeights(StagedWeights):
    """The async pipeline's sampler when rollouts run on a pool of actors with their own copies (``ray: true``):
    ``publish``, at the start of the producer's next collection, when no actor generates, pushes the staged weights
    to the actors (``backend.push_weights``), so each collection samples one version and is tagged with it."""

    def __init__(self, backend: RolloutBackend, model: Any, version: int) -> None:
        super().__init__(model, version)
        self.backend = backend

    def published(self) -> None:
        self.backend.push_weights(self.model)
