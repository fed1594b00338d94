"""Token bookkeeping: turn a rollout's generation records into training sequences with per-token labels.

A multi-turn episode is one sequence when every turn's prompt extends the previous turn's prompt + completion
token for token (the chat template re-renders the history exactly); otherwise the turn starts a new sequence
(re-tokenised history differs from what was generated, so the generated tokens keep their own context). In
either case only the tokens the policy generated carry ``loss_mask`` 1: system, user, env and tool text, and
the chat template's own markup, never train. Each generated token is labelled with its step index and its
stage index, so stage (SS-GRPO) and step (ReNorm) advantages can be spread onto exactly its tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np


class TurnLike(Protocol):
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]


if TYPE_CHECKING:  # torch is imported lazily at run time (the CLI starts without it)
    import torch


@dataclass
class Sample:
    """One training sequence of one rollout (``rollout`` indexes the batch's trajectories)."""

    rollout: int
    input_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    step_ids: list[int] = field(default_factory=list)
    stage_ids: list[int] = field(default_factory=list)
    sampled_logprobs: list[float] = field(default_factory=list)
    advantages: list[float] = field(default_factory=list)
    guided: bool = False
    """Sampled under a hinted prompt but laid out on the plain one: the update weights its tokens by
    ``min(pi_old / mu, guidance cap)`` whatever ``loss.off_policy`` says (``trainers/algo/guidance.py``)."""

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def n_generated(self) -> int:
        return int(sum(self.loss_mask))

    def generated_past(self, max_len: int) -> int:
        """Generated tokens past the first ``max_len``: what ``truncate(max_len)`` leaves untrained."""
        return int(sum(self.loss_mask[max_len:]))

    def extend(
        self, ids: Sequence[int], generated: bool, step: int, stage: int, logprobs: Sequence[float] | None = None
    ) -> None:
        n = len(ids)
        self.input_ids += list(ids)
        self.loss_mask += [1 if generated else 0] * n
        self.step_ids += [step if generated else -1] * n
        self.stage_ids += [stage if generated else -1] * n
        self.sampled_logprobs += list(logprobs) if logprobs is not None else [0.0] * n

    def truncate(self, max_len: int) -> Sample:
        """Keep the first ``max_len`` tokens (generated tokens past the cut are simply not trained)."""
        if len(self) <= max_len:
            return self
        cut = slice(0, max_len)
        return Sample(
            self.rollout,
            self.input_ids[cut],
            self.loss_mask[cut],
            self.step_ids[cut],
            self.stage_ids[cut],
            self.sampled_logprobs[cut],
            self.advantages[cut],
            self.guided,
        )


def build_samples(
    rollout: int, turns: Sequence[TurnLike], step_stages: Sequence[int], merge: bool = True, plain: bool = False
) -> list[Sample]:
    """Sequences for one rollout: turn t is step t, labelled with stage index ``step_stages[t]``.

    ``merge`` joins consecutive turns into one sequence when the next prompt extends the sequence so far.
    ``plain`` lays a guided rollout's completions on the prompts without the hint (``Turn.plain_prompt_ids``)
    and marks its samples ``guided``: they are trained as the policy's answer to the task it will face.
    """
    if len(step_stages) < len(turns):
        raise ValueError(f"{len(turns)} turns but only {len(step_stages)} step stages: one label per turn")
    samples: list[Sample] = []
    current: Sample | None = None
    for t, turn in enumerate(turns):
        if len(turn.logprobs) != len(turn.completion_ids):
            raise ValueError(
                f"turn {t}: {len(turn.completion_ids)} completion tokens but {len(turn.logprobs)} logprobs"
            )
        stage = step_stages[t]
        prompt: list[int] | None = getattr(turn, "plain_prompt_ids", None) if plain else turn.prompt_ids
        if prompt is None:
            raise ValueError(f"turn {t} of a guided rollout has no plain_prompt_ids (the prompt without the hint)")
        if merge and current is not None and prompt[: len(current)] == current.input_ids:
            current.extend(prompt[len(current) :], False, t, stage)
        else:
            current = Sample(rollout, guided=plain)
            samples.append(current)
            current.extend(prompt, False, t, stage)
        # a greedy turn's behaviour policy is deterministic: its sampler log-probs are unknown (NaN), not trained on
        lps = [float("nan")] * len(turn.logprobs) if getattr(turn, "greedy", False) else turn.logprobs
        current.extend(turn.completion_ids, True, t, stage, lps)
    return samples


def assign_advantages(
    sample: Sample,
    *,
    rollout_advantage: float | None = None,
    stage_advantages: Sequence[float] | None = None,
    step_advantages: Sequence[float] | None = None,
) -> Sample:
    """Fill ``sample.advantages`` per token from exactly one of the three granularities (0 off the mask)."""
    given = [x is not None for x in (rollout_advantage, stage_advantages, step_advantages)]
    if sum(given) != 1:
        raise ValueError("give exactly one of rollout_advantage, stage_advantages, step_advantages")
    mask = np.asarray(sample.loss_mask, dtype=float)
    if rollout_advantage is not None:
        values = mask * rollout_advantage
    else:
        ids = np.asarray(sample.stage_ids if stage_advantages is not None else sample.step_ids)
        table = np.asarray(stage_advantages if stage_advantages is not None else step_advantages, dtype=float)
        values = np.where(ids >= 0, table[np.clip(ids, 0, None)], 0.0) if len(table) else np.zeros(len(ids))
    sample.advantages = values.tolist()
    return sample


@dataclass
class Batch:
    """Right-padded tensors for a list of samples (``torch`` tensors, shape (B, T))."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    advantages: torch.Tensor
    sampled_logprobs: torch.Tensor
    guided: torch.Tensor
    """(B, 1) bool: the row is a guided sample (``Sample.guided``)."""

    def to(self, device: torch.device | str) -> Batch:
        """Move every tensor to ``device`` in place (a no-op on the CPU)."""
        for name in ("input_ids", "attention_mask", "loss_mask", "advantages", "sampled_logprobs", "guided"):
            setattr(self, name, getattr(self, name).to(device))
        return self


def collate(samples: Sequence[Sample], pad_id: int) -> Batch:
    """Pad ``samples`` on the right into one batch; labels are shifted by the model code, not here."""
    import torch

    width = max(len(s) for s in samples)

    def pad(rows: list[list], value: float, dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor([r + [value] * (width - len(r)) for r in rows], dtype=dtype)

    return Batch(
        input_ids=pad([s.input_ids for s in samples], pad_id, torch.long),
        attention_mask=pad([[1] * len(s) for s in samples], 0, torch.long),
        loss_mask=pad([s.loss_mask for s in samples], 0, torch.float32),
        advantages=pad([s.advantages for s in samples], 0.0, torch.float32),
        sampled_logprobs=pad([s.sampled_logprobs for s in samples], 0.0, torch.float32),
        guided=torch.tensor([[s.guided] for s in samples], dtype=torch.bool),
    )
