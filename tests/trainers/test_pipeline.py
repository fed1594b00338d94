"""The bounded-staleness pipeline (trainers/pipeline.py): order, versions, pacing, errors. Checked on event order
and logical clocks (counts of finished updates), never on elapsed times."""

from __future__ import annotations

import asyncio
import random

import pytest

from rubricgym.trainers.pipeline import Pipeline, StepTiming


class Boom(Exception):
    pass


class Recorder:
    """Fake produce/consume with seeded random costs that log every call as an event and check invariants on a
    logical clock: ``updates`` counts finished consumes (the learner's true version)."""

    def __init__(self, seed: int, *, start: int = 0, max_cost: float = 0.001) -> None:
        self.rng = random.Random(seed)
        self.max_cost = max_cost
        self.events: list[tuple[str, int, int]] = []
        self.updates = start
        self.in_flight = 0  # production started, consumption not finished
        self.max_in_flight = 0
        self.produced_under: dict[int, int] = {}

    async def cost(self) -> None:
        await asyncio.sleep(self.rng.choice([0.0, 0.0, self.rng.uniform(0, self.max_cost)]))

    async def produce(self, step: int, version: int) -> tuple[int, int]:
        assert version == self.updates, "produce is told the learner's version at its start"
        self.events.append(("produce_start", step, version))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.produced_under[step] = version
        await self.cost()
        self.events.append(("produce_end", step, version))
        return step, version

    async def consume(self, step: int, batch: tuple[int, int]) -> None:
        self.events.append(("consume_start", step, batch[1]))
        await self.cost()
        self.updates += 1
        self.in_flight -= 1
        self.events.append(("consume_end", step, batch[1]))


async def sequential(rec: Recorder, steps: int, start: int = 0) -> None:
    """Today's synchronous trainer: for each step, produce under the current weights, then update."""
    for k in range(start, steps):
        await rec.consume(k, await rec.produce(k, rec.updates))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("start", [0, 3])
async def test_staleness_zero_is_the_sequential_loop(seed: int, start: int) -> None:
    plain, piped = Recorder(seed, start=start), Recorder(seed, start=start)
    await sequential(plain, 12, start)
    timings = await Pipeline(piped.produce, piped.consume, max_staleness=0, steps=12, start_step=start).run()
    assert piped.events == plain.events  # the same calls, in the same order, under the same versions
    assert [t.step for t in timings] == list(range(start, 12))
    assert all(t.version == t.step and t.staleness == 0 for t in timings)
    assert piped.max_in_flight == 1


@pytest.mark.parametrize("max_staleness", [1, 2, 3])
@pytest.mark.parametrize("seed", range(8))
async def test_staleness_bound_pacing_and_order(max_staleness: int, seed: int) -> None:
    rec = Recorder(seed)
    pipe: Pipeline[tuple[int, int]] = Pipeline(rec.produce, rec.consume, max_staleness=max_staleness, steps=16)
    timings = await pipe.run()
    starts = [(k, v) for e, k, v in rec.events if e == "produce_start"]
    consumed = [k for e, k, _ in rec.events if e == "consume_start"]
    assert [k for k, _ in starts] == list(range(16)) and consumed == list(range(16))  # each step once, in order
    assert all(k - v <= max_staleness for k, v in starts)  # pacing: never produced staler than the bound
    assert rec.max_in_flight <= max_staleness + 1
    assert [t.step for t in timings] == list(range(16))
    for t in timings:
        assert t.version == rec.produced_under[t.step]  # the batch carries the version it was produced under
        assert t.learner_version == t.step and 0 <= t.staleness <= max_staleness
        assert t.produce_ready <= t.produce_start <= t.produce_end <= t.consume_start <= t.consume_end
    assert pipe.version == 16


@pytest.mark.parametrize("max_staleness", [1, 2, 4])
async def test_generation_runs_ahead_until_paced(max_staleness: int) -> None:
    """Instant generation and a slow learner: production runs ahead exactly max_staleness steps and then waits for
    updates, so the in-flight bound is reached and never passed."""
    order: list[str] = []
    in_flight = peak = 0

    async def produce(step: int, version: int) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        order.append(f"p{step}@{version}")
        return step

    async def consume(step: int, batch: int) -> None:
        nonlocal in_flight
        await asyncio.sleep(0.001)
        in_flight -= 1
        order.append(f"c{step}")

    timings = await Pipeline(produce, consume, max_staleness=max_staleness, steps=8).run()
    assert peak == max_staleness + 1
    # steps 0..s are produced under version 0 before the first update ends; then one production per update
    assert order[: max_staleness + 1] == [f"p{k}@0" for k in range(max_staleness + 1)]
    for k in range(max_staleness + 1, 8):
        assert order.index(f"p{k}@{k - max_staleness}") == order.index(f"c{k - max_staleness - 1}") + 1
    assert [t.staleness for t in timings] == [min(k, max_staleness) for k in range(8)]


async def test_production_overlaps_the_update() -> None:
    """With max_staleness 1, step 1 is generated while step 0 trains (the point of the pipeline)."""
    rec = Recorder(0, max_cost=0.0)
    await Pipeline(rec.produce, rec.consume, max_staleness=1, steps=4).run()
    assert rec.events.index(("produce_start", 1, 0)) < rec.events.index(("consume_end", 0, 0))


def only_this_task_left() -> bool:
    return asyncio.all_tasks() == {asyncio.current_task()}


@pytest.mark.parametrize("max_staleness", [0, 1, 3])
async def test_produce_error_surfaces_in_step_order_and_stops_production(max_staleness: int) -> None:
    consumed: list[int] = []
    produced: list[int] = []

    async def produce(step: int, version: int) -> int:
        produced.append(step)
        await asyncio.sleep(0)
        if step == 3:
            raise Boom("step 3")
        return step

    async def consume(step: int, batch: int) -> None:
        await asyncio.sleep(0.001)
        consumed.append(step)

    with pytest.raises(Boom, match="step 3"):
        await asyncio.wait_for(Pipeline(produce, consume, max_staleness=max_staleness, steps=10).run(), timeout=5)
    assert consumed == [0, 1, 2]  # the steps before the failure, as the sequential loop would have done
    assert produced == [0, 1, 2, 3]  # nothing is produced after a failure
    assert only_this_task_left()


@pytest.mark.parametrize("max_staleness", [0, 2])
async def test_consume_error_cancels_production_in_flight(max_staleness: int) -> None:
    cancelled: list[int] = []

    async def produce(step: int, version: int) -> int:
        if step >= 2:
            try:
                await asyncio.sleep(3600)  # would hang the test without cancellation
            except asyncio.CancelledError:
                cancelled.append(step)
                raise
        return step

    async def consume(step: int, batch: int) -> None:
        await asyncio.sleep(0)
        if step == 1:
            raise Boom("update failed")

    with pytest.raises(Boom, match="update failed"):
        await asyncio.wait_for(Pipeline(produce, consume, max_staleness=max_staleness, steps=10).run(), timeout=5)
    assert cancelled == ([2] if max_staleness >= 1 else [])  # s=0: step 2 never started
    assert only_this_task_left()


async def test_stop_ends_after_the_current_step() -> None:
    cancelled: list[int] = []
    produced: list[int] = []

    async def produce(step: int, version: int) -> int:
        produced.append(step)
        try:
            await asyncio.sleep(0.001 if step < 3 else 3600)
        except asyncio.CancelledError:
            cancelled.append(step)
            raise
        return step

    async def consume(step: int, batch: int) -> None:
        if step == 2:
            pipe.stop()  # e.g. the time budget ran out

    pipe: Pipeline[int] = Pipeline(produce, consume, max_staleness=2, steps=10)
    timings = await asyncio.wait_for(pipe.run(), timeout=5)
    assert [t.step for t in timings] == [0, 1, 2] and pipe.version == 3
    assert cancelled == [3] and produced == [0, 1, 2, 3]  # steps 4.. were paced and never started
    assert only_this_task_left()


async def test_stop_under_staleness_zero_starts_nothing_more() -> None:
    produced: list[int] = []

    async def produce(step: int, version: int) -> int:
        produced.append(step)
        return step

    async def consume(step: int, batch: int) -> None:
        if step == 1:
            pipe.stop()

    pipe: Pipeline[int] = Pipeline(produce, consume, max_staleness=0, steps=10)
    assert len(await pipe.run()) == 2 and produced == [0, 1]


async def noop_produce(step: int, version: int) -> int:
    return step


async def noop_consume(step: int, batch: int) -> None:
    return None


@pytest.mark.parametrize("bad", [-1, 1.5, True, None])
def test_bad_max_staleness_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="max_staleness must be an integer >= 0"):
        Pipeline(noop_produce, noop_consume, max_staleness=bad, steps=3)  # type: ignore[arg-type]


def test_bad_step_range_is_refused() -> None:
    with pytest.raises(ValueError, match="start_step <= steps"):
        Pipeline(noop_produce, noop_consume, max_staleness=0, steps=3, start_step=4)


async def test_a_pipeline_runs_once() -> None:
    pipe: Pipeline[int] = Pipeline(noop_produce, noop_consume, max_staleness=1, steps=3)
    timings = await pipe.run()
    assert all(isinstance(t, StepTiming) for t in timings) and len(timings) == 3
    with pytest.raises(RuntimeError, match="runs once"):
        await pipe.run()
