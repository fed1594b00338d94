"""Bounded-staleness pipelining of rollout production and learner updates (issue #27).

A training step splits into a *produce* part (collect rollouts, score, estimate advantages) and a *consume* part
(the policy update and pushing the new weights to the samplers). ``Pipeline`` runs the produce part of later steps
while the learner consumes the current one, within a bound on how stale the sampled policy may be.

Versions: the policy version ``v`` is the number of updates the learner has applied, so at step ``k`` of
synchronous training the samples come from version ``k``. The learner starts at version ``start_step`` and each
``consume`` advances it by one.

Semantics, for ``max_staleness = s``:
- *Pacing*: production of step ``k`` starts only when the learner's version is ``>= k - s``. Generation waits
  rather than producing samples that would be too stale to use, so nothing is ever discarded for staleness.
- At most ``s + 1`` batches are in flight (being produced, or produced and not yet consumed), because the steps
  ``version .. k`` are the unconsumed ones and pacing keeps ``k <= version + s``.
- One production at a time, in step order: generation shares one rollout engine, and the parallelism within a step
  (groups, episodes) is the backend's business.
- Consumption is strictly in step order. Each batch records the version it was produced under; its staleness is
  the learner's version when it is consumed (``k``) minus that version, always in ``0 .. s``.
- ``s = 0`` is the synchronous trainer: produce(k) starts only after consume(k-1) has returned, so the calls and
  their versions are exactly those of ``for k: consume(k, await produce(k, k))``.
- Errors surface in step order, as in the sequential loop: a failed produce(k) is raised when the learner reaches
  step ``k`` (after the earlier steps it already holds are consumed) and no further production starts; a failed
  consume cancels production in flight. Nothing is left running when ``run`` returns or raises.
- ``stop()`` (say from ``consume``, when a time budget runs out) ends the run after the current step; production
  in flight for later steps is cancelled and its batches dropped.

The update must not block the event loop (run CPU/GPU work in ``asyncio.to_thread`` or another process), or
production cannot overlap it. Produce must not depend on state that consume changes other than the weights (a data
cursor, say: derive it from the step number).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

B = TypeVar("B")

Produce = Callable[[int, int], Awaitable[B]]  # (step, version) -> batch
Consume = Callable[[int, B], Awaitable[None]]  # (step, batch) -> None; the learner's version then advances by one


@dataclass(frozen=True)
class StepTiming:
    """One step's schedule in event-loop time (seconds): when its producer and learner were free to start
    (``*_ready``), and when each part started and ended."""

    step: int
    version: int  # the policy version the batch was produced under
    learner_version: int  # the learner's version when it consumed the batch (= step: one update per step)
    produce_ready: float
    produce_start: float
    produce_end: float
    consume_ready: float
    consume_start: float
    consume_end: float

    @property
    def staleness(self) -> int:
        """How many updates behind the learner the batch's policy was when the batch was consumed."""
        return self.learner_version - self.version

    @property
    def produce_wait(self) -> float:
        """Time generation was held back by pacing (waiting for the learner)."""
        return self.produce_start - self.produce_ready

    @property
    def consume_wait(self) -> float:
        """Time the learner sat idle waiting for this step's batch."""
        return self.consume_start - self.consume_ready


@dataclass(frozen=True)
class _Batch(Generic[B]):
    step: int
    version: int
    batch: B
    ready: float
    start: float
    end: float


@dataclass(frozen=True)
class _Failed:
    step: int
    error: BaseException


class Pipeline(Generic[B]):
    """Runs steps ``start_step .. steps-1``: ``produce(step, version)`` ahead of ``consume(step, batch)`` within
    ``max_staleness`` (see the module docstring for the exact semantics)."""

    def __init__(
        self,
        produce: Produce[B],
        consume: Consume[B],
        *,
        max_staleness: int,
        steps: int,
        start_step: int = 0,
    ) -> None:
        if isinstance(max_staleness, bool) or not isinstance(max_staleness, int) or max_staleness < 0:
            raise ValueError(
                f"max_staleness must be an integer >= 0 (0 is synchronous training), got {max_staleness!r}"
            )
        if not 0 <= start_step <= steps:
            raise ValueError(f"need 0 <= start_step <= steps, got start_step={start_step}, steps={steps}")
        self.produce, self.consume = produce, consume
        self.max_staleness, self.steps, self.start_step = max_staleness, steps, start_step
        self._version = start_step
        self._stopping = False
        self._ran = False

    @property
    def version(self) -> int:
        """The learner's policy version now: the number of updates applied (a producer may read it to tag turns
        generated after weights were pushed mid-collection)."""
        return self._version

    def stop(self) -> None:
        """End the run once the step being consumed is done (call it from ``consume``); production of later
        steps does not start, and production in flight is cancelled."""
        self._stopping = True

    async def run(self) -> list[StepTiming]:
        """Run the steps; returns each consumed step's timing, in step order. Runs once."""
        if self._ran:
            raise RuntimeError("a Pipeline runs once; make a new one to run again")
        self._ran = True
        loop = asyncio.get_running_loop()
        advanced = asyncio.Condition()
        queue: asyncio.Queue[_Batch[B] | _Failed] = asyncio.Queue()  # pacing bounds it to max_staleness + 1
        producer = asyncio.create_task(self._produce_all(queue, advanced, loop))
        timings: list[StepTiming] = []
        try:
            for step in range(self.start_step, self.steps):
                if self._stopping:
                    break
                ready = loop.time()
                item = await queue.get()
                if isinstance(item, _Failed):
                    raise item.error
                assert item.step == step, f"batch of step {item.step} arrived for step {step}"
                learner, start = self._version, loop.time()
                await self.consume(step, item.batch)
                end = loop.time()
                timings.append(
                    StepTiming(step, item.version, learner, item.ready, item.start, item.end, ready, start, end)
                )
                async with advanced:
                    self._version += 1
                    advanced.notify_all()
        finally:
            producer.cancel()
            await asyncio.gather(producer, return_exceptions=True)
        return timings

    def _may_produce(self, step: int) -> bool:
        """Pacing: step may be produced once the learner's version is within max_staleness of it."""
        return self._version >= step - self.max_staleness or self._stopping

    async def _produce_all(
        self, queue: asyncio.Queue[_Batch[B] | _Failed], advanced: asyncio.Condition, loop: asyncio.AbstractEventLoop
    ) -> None:
        for step in range(self.start_step, self.steps):
            ready = loop.time()
            async with advanced:
                await advanced.wait_for(functools.partial(self._may_produce, step))
            if self._stopping:
                return
            version, start = self._version, loop.time()
            try:
                batch = await self.produce(step, version)
            except Exception as e:  # raised by the learner when it reaches this step, as the sequential loop would
                queue.put_nowait(_Failed(step, e))
                return
            queue.put_nowait(_Batch(step, version, batch, ready, start, loop.time()))
