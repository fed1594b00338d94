"""A learner of several ``torchrun`` ranks beside one Ray pool of rollout actors (``ray: true`` under torchrun).

Rank 0 holds the pool (``RayBackend``); the other ranks hold none. ``collect`` is a collective call: every rank calls
it in the same order with its own request (its shard of the step's tasks, or the whole held-out set for an
evaluation). Rank 0 gathers the requests, runs them as one pool collection (the actors share every rank's groups)
or once when every rank asked for the same thing, and hands each rank its groups back; each rank then scores its
groups and computes its gradient, and ranks sum gradients as in any data-parallel run. After the update every
rank's weights are equal, so rank 0 alone pushes them to the actors.

A failed collection on rank 0 (e.g. ``RolloutWorkerError``) reaches every rank as ``RankedCollectError`` instead of
leaving the others waiting. The waits are the process group's collectives, bounded by its timeout (torch's
default for gloo: 30 minutes): a collection that takes longer fails on the waiting ranks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch

from rubricgym.core.types import Task
from rubricgym.trainers.algo.rollouts import Group
from rubricgym.trainers.engine.distributed import rank_world
from rubricgym.trainers.engine.sampling import RolloutBackend


class RankedCollectError(RuntimeError):
    """Rank 0's pool collection failed: raised on every rank with rank 0's error."""


class _Request(NamedTuple):
    """One rank's ``collect`` call, as rank 0 gathers it."""

    tasks: list[Task]
    seeds: list[int]
    group_size: int
    options: dict[str, Any]  # anchor_greedy, temperature, full_precision
    hints: list[str | None] | None

    def same(self, other: _Request) -> bool:
        """Both ask for the same rollouts (the same task ids, seeds, group size, options and hints)."""
        return [t.id for t in self.tasks] == [t.id for t in other.tasks] and self[1:] == other[1:]


class RankedPool:
    """A ``RolloutBackend`` for every rank of a data-parallel learner: ``pool`` on rank 0, None elsewhere."""

    def __init__(self, pool: RolloutBackend | None):
        self.rank, self.world = rank_world()
        if (self.rank == 0) != (pool is not None):
            raise ValueError("RankedPool: rank 0 holds the rollout pool and no other rank does")
        self.pool = pool

    @property
    def restarts(self) -> int | None:
        """The pool's actor replacements so far (rank 0; None on the other ranks, which hold no pool)."""
        value = getattr(self.pool, "restarts", None)
        return value if isinstance(value, int) else None

    async def collect(
        self,
        tasks: Sequence[Task],
        seeds: Sequence[int],
        group_size: int,
        *,
        anchor_greedy: bool = False,
        temperature: float | None = None,
        full_precision: bool = False,
        hints: Sequence[str | None] | None = None,
    ) -> list[Group]:
        """See ``RolloutBackend.collect``; every rank must call it, in the same order."""
        options = {"anchor_greedy": anchor_greedy, "temperature": temperature, "full_precision": full_precision}
        request = _Request(list(tasks), list(seeds), group_size, options, list(hints) if hints is not None else None)
        gathered: list[Any] | None = [None] * self.world if self.rank == 0 else None
        torch.distributed.gather_object(request, gathered, dst=0)
        replies: list[Any] = [None] * self.world
        if gathered is not None:
            try:
                replies = await self._collect_all(gathered)
            except Exception as e:  # every rank learns of it instead of waiting for its groups
                replies = [RankedCollectError(f"rank 0's rollout pool failed: {type(e).__name__}: {e}")] * self.world
        mine: list[Any] = [None]
        torch.distributed.scatter_object_list(mine, replies if self.rank == 0 else None, src=0)
        if isinstance(mine[0], RankedCollectError):
            raise mine[0]
        return mine[0]

    async def _collect_all(self, requests: list[_Request]) -> list[list[Group]]:
        """Rank 0: every rank's groups from one pool collection (once when all ranks asked the same)."""
        assert self.pool is not None
        first = requests[0]
        if all(r.same(first) for r in requests):
            groups = await self.pool.collect(
                first.tasks, first.seeds, first.group_size, hints=first.hints, **first.options
            )
            return [groups] * self.world
        if any((r.group_size, r.options) != (first.group_size, first.options) for r in requests):
            raise ValueError("the ranks asked for rollouts with different group sizes or options in one collect")
        tasks = [t for r in requests for t in r.tasks]
        seeds = [s for r in requests for s in r.seeds]
        hinted = any(r.hints is not None for r in requests)
        hints = [h for r in requests for h in (r.hints or [None] * len(r.tasks))] if hinted else None
        groups = await self.pool.collect(tasks, seeds, first.group_size, hints=hints, **first.options)
        out, at = [], 0
        for r in requests:
            out.append(groups[at : at + len(r.tasks)])
            at += len(r.tasks)
        return out

    def push_weights(self, model: Any) -> None:
        """Rank 0 pushes its weights to the actors (every rank's are equal after the summed-gradient update)."""
        if self.pool is not None:
            self.pool.push_weights(model)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
