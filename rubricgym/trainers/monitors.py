"""The trainer's side of the hacking monitors (``rewards.monitor``): the self-internalisation gap scorer, which
needs the policy's weights, and the monitor built from a training config.

Δ = mean_o [ℓ_prompt(o) - ℓ_cond(o)]: the first turn of each sampled rollout is scored by the current policy
with its own prompt and with the rubric appended to the first message ("Your work is graded by this rubric").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rubricgym.core.types import Message, Trajectory
from rubricgym.rewards.audit import self_internalisation_gap
from rubricgym.rewards.monitor import GapFn, HackingMonitor, MonitorConfig

RUBRIC_NOTE = "\n\nYour work is graded by this rubric:\n"


def completion_logprobs(model: Any, prompt_ids: Sequence[int], completion_ids: Sequence[int]) -> list[float]:
    """Per-token log-probs of ``completion_ids`` after ``prompt_ids`` under ``model`` (temperature 1)."""
    import torch

    ids = torch.tensor([list(prompt_ids) + list(completion_ids)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(1, torch.tensor(list(completion_ids)).unsqueeze(1)).squeeze(1).tolist()


def with_rubric(messages: Sequence[Message], rubric_text: str) -> list[Message]:
    """``messages`` with the rubric appended to the first message (the system prompt or the task)."""
    first = messages[0]
    return [first.model_copy(update={"content": (first.content or "") + RUBRIC_NOTE + rubric_text}), *messages[1:]]


def policy_gap_fn(policy: Any) -> GapFn:
    """A ``GapFn`` over a ``TrainingPolicy``: first turns of the sampled rollouts, scored both ways."""

    async def gap(trajectories: Sequence[Trajectory], rubric_text: str) -> float | None:
        plain, cond = [], []
        for t in trajectories:
            try:
                turn = policy.turns_for(t)[0]
            except (KeyError, IndexError):
                continue
            first_reply = next((i for i, m in enumerate(t.messages) if m.role == "assistant"), None)
            if not turn.completion_ids or not first_reply:
                continue
            cond_ids = policy.prompt_ids(with_rubric(t.messages[:first_reply], rubric_text))
            if getattr(policy, "response_prefix", ""):  # prefilled into the prompt, as when it was sampled
                cond_ids += policy.tokenizer.encode(policy.response_prefix, add_special_tokens=False)
            plain.append(completion_logprobs(policy.model_obj, turn.prompt_ids, turn.completion_ids))
            cond.append(completion_logprobs(policy.model_obj, cond_ids, turn.completion_ids))
        return self_internalisation_gap(plain, cond) if plain else None

    return gap


def build_monitor(config: MonitorConfig | None, prm: Any, policy: Any, key: str) -> HackingMonitor | None:
    """The run's monitor, or ``None`` when the config has no ``monitor`` section."""
    if config is None:
        return None
    return HackingMonitor(config, lambda: prm.rubric, key=key, gap_fn=policy_gap_fn(policy))  # follows the buffer
