"""The trainable policy on the generation side: ``LocalAgent`` that keeps each episode's token records.

``rollout``/``rollout_group`` create an episode view per (task, seed) and drop it; ``TrainingPolicy``
remembers those views so the trainer can fetch exactly the tokens and sampling log-probs behind each
trajectory (``turns_for``). Seeds listed in ``greedy_seeds`` decode at temperature 0: ArenaRL's anchor.

``response_prefix`` prefills the start of every assistant turn (e.g. ``<tool_call>{"name": "``), a standard
way to make a small model's outputs parse: the prefix is part of the prompt (never trained on) and of the
action text the env sees.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rubricgym.agents.local import LocalAgent, Turn
from rubricgym.core.rollout import rollout_group
from rubricgym.core.types import Message, Task, ToolSpec, Trajectory


class TrainingPolicy(LocalAgent):
    """A ``LocalAgent`` whose episode views (and their ``turns``) stay reachable by (task id, seed)."""

    name = "policy"

    def __init__(self, *args: Any, response_prefix: str = "", **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.views: dict[tuple[str, int | None], LocalAgent] = {}
        self.greedy_seeds: set[int] = set()
        self.response_prefix = response_prefix

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        if not self.response_prefix:
            return await super().act(messages, tools)
        prefix_ids = self.tokenizer.encode(self.response_prefix, add_special_tokens=False)
        turn = await self.generate(self.prompt_ids(messages) + list(prefix_ids))
        turn.text = self.response_prefix + turn.text
        self.turns.append(turn)
        return turn.text

    def episode(self, task: Task, seed: int | None) -> LocalAgent:
        view = super().episode(task, seed)
        if seed is not None and seed in self.greedy_seeds:
            view.params = replace(self.params, temperature=0.0)
        self.views[(task.id, seed)] = view
        return view

    def turns_for(self, trajectory: Trajectory) -> list[Turn]:
        view = self.views.get((trajectory.task.id, trajectory.seed))
        if view is None:
            raise KeyError(f"no generation record for task {trajectory.task.id!r} seed {trajectory.seed}")
        return view.turns

    def forget(self) -> None:
        self.views.clear()
        self.greedy_seeds.clear()


async def collect_groups(
    env_id: str,
    policy: TrainingPolicy,
    tasks: Sequence[Task],
    group_size: int,
    seeds: Sequence[int],
    *,
    env_kwargs: dict[str, Any] | None = None,
    anchor_greedy: bool = False,
) -> list[list[Trajectory]]:
    """One group of ``group_size`` rollouts per task, all in flight together (the policy batches them).

    Group j uses seeds ``seeds[j] .. seeds[j] + group_size - 1``; with ``anchor_greedy`` the first is greedy.
    """
    if anchor_greedy:
        policy.greedy_seeds.update(seeds)
    return list(
        await asyncio.gather(
            *(
                rollout_group(env_id, policy, task, group_size, seed=s, env_kwargs=env_kwargs)
                for task, s in zip(tasks, seeds, strict=True)
            )
        )
    )
