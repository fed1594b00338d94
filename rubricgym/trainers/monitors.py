"""The trainer's side of the hacking monitors (``rewards.monitor``): the self-internalisation gap scorer, which
needs the policy's weights and each rollout's recorded turns, and ``RolloutMonitor``, the run's monitor fed with
rollouts (its state is checkpointed, so a resumed run's alarms continue where they were).

Δ = mean_o [ℓ_prompt(o) - ℓ_cond(o)]: the first turn of each sampled rollout is scored by the current policy
with its own prompt and with the rubric appended to the first message ("Your work is graded by this rubric").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from rubricgym.agents.local import Turn
from rubricgym.core.rubric import Rubric
from rubricgym.core.types import Message, Trajectory
from rubricgym.rewards.audit import self_internalisation_gap
from rubricgym.rewards.monitor import GapFn, HackingMonitor, MonitorConfig
from rubricgym.trainers.algo.rollouts import Rollout, scored
from rubricgym.trainers.engine.policy import TrainingPolicy

RUBRIC_NOTE = "\n\nYour work is graded by this rubric:\n"


def completion_logprobs(model: Any, prompt_ids: Sequence[int], completion_ids: Sequence[int]) -> list[float]:
    """Per-token log-probs of ``completion_ids`` after ``prompt_ids`` under ``model`` (temperature 1)."""
    ids = torch.tensor([list(prompt_ids) + list(completion_ids)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(1, torch.tensor(list(completion_ids)).unsqueeze(1)).squeeze(1).tolist()


def with_rubric(messages: Sequence[Message], rubric_text: str) -> list[Message]:
    """``messages`` with the rubric appended to the first message (the system prompt or the task)."""
    first = messages[0]
    return [first.model_copy(update={"content": (first.content or "") + RUBRIC_NOTE + rubric_text}), *messages[1:]]


def policy_gap_fn(policy: TrainingPolicy, turns_of: Callable[[Trajectory], Sequence[Turn]]) -> GapFn:
    """A ``GapFn`` over the policy: the first turn of each sampled rollout (``turns_of``), scored both ways."""

    async def gap(trajectories: Sequence[Trajectory], rubric_text: str) -> float | None:
        plain, cond = [], []
        for t in trajectories:
            turns = turns_of(t)
            first_reply = next((i for i, m in enumerate(t.messages) if m.role == "assistant"), None)
            if not turns or not turns[0].completion_ids or not first_reply:
                continue
            turn = turns[0]
            cond_ids = policy.prompt_ids(with_rubric(t.messages[:first_reply], rubric_text))
            if policy.response_prefix:  # prefilled into the prompt, as when it was sampled
                cond_ids += policy.tokenizer.encode(policy.response_prefix, add_special_tokens=False)
            plain.append(completion_logprobs(policy.lm, turn.prompt_ids, turn.completion_ids))
            cond.append(completion_logprobs(policy.lm, cond_ids, turn.completion_ids))
        return self_internalisation_gap(plain, cond) if plain else None

    return gap


class RolloutMonitor:
    """A ``HackingMonitor`` observing a step's rollouts; its gap scorer reads the turns those rollouts carry."""

    def __init__(self, config: MonitorConfig, rubric: Callable[[], Rubric], policy: TrainingPolicy):
        self._turns: dict[int, list[Turn]] = {}  # the observed step's rollouts, by trajectory object
        gap = policy_gap_fn(policy, lambda t: self._turns.get(id(t), []))
        self.monitor = HackingMonitor(config, rubric, gap_fn=gap)  # ``rubric`` follows the rubric buffer

    async def observe(self, step: int, rollouts: Sequence[Rollout]) -> dict[str, float | str | None]:
        """The ``monitor/...`` fields of this step's metrics record (the rollouts are scored)."""
        self._turns = {id(r.trajectory): r.turns for r in rollouts}
        try:
            return await self.monitor.observe(step, scored(rollouts))
        finally:
            self._turns = {}

    @property
    def stop_reason(self) -> str | None:
        return self.monitor.stop_reason

    def summary_lines(self) -> list[str]:
        return self.monitor.summary_lines()

    def state_dict(self) -> dict[str, Any]:
        return self.monitor.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.monitor.load_state_dict(state)


def build_monitor(
    config: MonitorConfig | None, rubric: Callable[[], Rubric], policy: TrainingPolicy
) -> RolloutMonitor | None:
    """The run's monitor, or ``None`` when the config has no ``monitor`` section."""
    return None if config is None else RolloutMonitor(config, rubric, policy)
