"""Simulation: how close does the bounded-staleness pipeline (trainers/pipeline.py) get to max(gen, train)?

No model runs here. Each step's costs are drawn from seeded long-tailed distributions and the real ``Pipeline``
is driven by fake produce/consume that ``asyncio.sleep`` for those costs:
- generation: a step plays ``--episodes`` episodes at once (tasks x group size) on one engine, each lasting a
  lognormal time (sigma ``--sigma``, a long tail of slow agents), so the step's generation time is their maximum;
- training: proportional to the step's tokens (the sum of its episode times) times lognormal noise (sigma 0.1),
  scaled so mean training time is ``train/gen`` times mean generation time (three scenarios).

The sleeps run on a virtual-clock event loop (time jumps to the next timer), so the table is exact for the draws
and does not depend on the machine's load; rounds are seeds. A shorter check then runs the same draws, scaled down
to milliseconds, on the ordinary event loop in interleaved rounds and reports real/virtual makespan, to show the
virtual clock stands for real asyncio scheduling.

Per scenario and max_staleness: mean step time (makespan / steps), the sum gen + train (synchronous cost), the
ideal max(gen, train) (means over the run's draws), the ratio to the ideal, mean/max staleness, and the share of
time the learner waited for a batch. Target (issue #27): staleness 1 within 1.15 x max(gen, train).

    .venv/bin/python bench/async_pipeline.py [--steps 64] [--seeds 10] [--wall-rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import selectors
import statistics
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubricgym.trainers.pipeline import Pipeline, StepTiming

SCENARIOS = {"generation-bound": 0.5, "balanced": 1.0, "training-bound": 2.0}  # mean train / mean gen
STALENESS = (0, 1, 2, 4)  # 4: beyond the issue's {0, 1, 2}, to see what a deeper buffer buys
TARGET = 1.15


class _Clock:
    now = 0.0


class _JumpSelector(selectors.DefaultSelector):
    """Never blocks: a wait for the next timer advances the virtual clock by the timeout instead."""

    def __init__(self, clock: _Clock) -> None:
        super().__init__()
        self.clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:  # nothing ready and no timer: in this simulation that is a deadlock
            raise RuntimeError("simulation deadlock: every task waits and no timer is set")
        self.clock.now += max(timeout, 0.0)
        return super().select(0)


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose time is virtual: ``asyncio.sleep(60)`` returns at once, 60 s later on ``time()``."""

    def __init__(self) -> None:
        self._clock = _Clock()
        super().__init__(_JumpSelector(self._clock))

    def time(self) -> float:
        return self._clock.now


@dataclass(frozen=True)
class Costs:
    gen: list[float]
    train: list[float]

    @property
    def ideal(self) -> float:
        return max(statistics.fmean(self.gen), statistics.fmean(self.train))

    @property
    def synchronous(self) -> float:
        return statistics.fmean(self.gen) + statistics.fmean(self.train)

    def scaled(self, k: float) -> Costs:
        return Costs([g * k for g in self.gen], [t * k for t in self.train])


def draw(seed: int, steps: int, episodes: int, sigma: float, train_over_gen: float) -> Costs:
    """Seeded step costs in model seconds (median episode 20 s)."""
    rng = np.random.default_rng(seed)
    ep = 20.0 * rng.lognormal(0.0, sigma, size=(steps, episodes))
    gen = ep.max(axis=1)
    tokens = ep.sum(axis=1)
    train = train_over_gen * gen.mean() * tokens / tokens.mean() * rng.lognormal(0.0, 0.1, size=steps)
    return Costs([float(g) for g in gen], [float(t) for t in train])


async def simulate(costs: Costs, max_staleness: int) -> tuple[float, list[StepTiming]]:
    """Run the real Pipeline with sleeps for the drawn costs; (makespan, timings) in loop time."""

    async def produce(step: int, version: int) -> int:
        await asyncio.sleep(costs.gen[step])
        return step

    async def consume(step: int, batch: int) -> None:
        await asyncio.sleep(costs.train[step])

    loop = asyncio.get_running_loop()
    t0 = loop.time()
    timings = await Pipeline(produce, consume, max_staleness=max_staleness, steps=len(costs.gen)).run()
    return loop.time() - t0, timings


def run_virtual(costs: Costs, max_staleness: int) -> tuple[float, list[StepTiming]]:
    with asyncio.Runner(loop_factory=VirtualClockLoop) as runner:
        return runner.run(simulate(costs, max_staleness))


def summary(costs: Costs, makespan: float, timings: list[StepTiming]) -> dict[str, float]:
    steps = len(timings)
    step_s = makespan / steps
    return {
        "step": step_s,
        "ratio": step_s / costs.ideal,
        "stale_mean": statistics.fmean(t.staleness for t in timings),
        "stale_max": max(t.staleness for t in timings),
        "idle": sum(t.consume_wait for t in timings) / makespan,
    }


def med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} [{min(xs):.3f}, {max(xs):.3f}]"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--seeds", type=int, default=10, help="virtual-clock rounds (one cost draw each)")
    p.add_argument("--episodes", type=int, default=16, help="episodes per step (tasks x group size)")
    p.add_argument("--sigma", type=float, default=1.0, help="lognormal sigma of episode times")
    p.add_argument("--wall-rounds", type=int, default=3, help="interleaved rounds of the real-time check (0: skip)")
    p.add_argument("--wall-gen-ms", type=float, default=8.0, help="mean generation time per step in the real check")
    args = p.parse_args()
    began = time.perf_counter()
    print(
        f"simulation: drawn costs, no model; the real Pipeline with asyncio.sleep on a virtual clock. {args.steps} "
        f"steps, {args.episodes} lognormal(sigma={args.sigma}) episodes per step (generation = their max), "
        f"training proportional to tokens; {args.seeds} seeds; medians [min, max] over seeds; times in model seconds"
    )
    verdicts: list[str] = []
    draws: dict[tuple[str, int], Costs] = {}
    for name, ratio in SCENARIOS.items():
        rows: dict[int, list[dict[str, float]]] = {s: [] for s in STALENESS}
        for seed in range(args.seeds):
            costs = draws[name, seed] = draw(seed, args.steps, args.episodes, args.sigma, ratio)
            for s in STALENESS:
                rows[s].append(summary(costs, *run_virtual(costs, s)))
        first = [draws[name, seed] for seed in range(args.seeds)]
        gen = statistics.median(statistics.fmean(c.gen) for c in first)
        train = statistics.median(statistics.fmean(c.train) for c in first)
        print(f"\n{name}: mean gen {gen:.1f} s, mean train {train:.1f} s per step (train/gen {ratio})")
        print(f"  gen + train {gen + train:.1f} s, ideal max(gen, train) {max(gen, train):.1f} s")
        print(f"  {'staleness':>9}  {'step s':>22}  {'ratio to ideal':>22}  {'stale mean/max':>14}  learner idle")
        for s in STALENESS:
            r = rows[s]
            stale = f"{statistics.median(x['stale_mean'] for x in r):.2f}/{max(x['stale_max'] for x in r):.0f}"
            print(
                f"  {s:>9}  {med([x['step'] for x in r]):>22}  {med([x['ratio'] for x in r]):>22}  {stale:>14}"
                f"  {statistics.median(x['idle'] for x in r):.0%}"
            )
            assert max(x["stale_max"] for x in r) <= s, "the pipeline exceeded its staleness bound"
        one = statistics.median(x["ratio"] for x in rows[1])
        ok = "met" if one <= TARGET else "NOT met"
        verdicts.append(f"{name}: staleness 1: <= {TARGET} x max(gen, train): {ok} (median ratio {one:.3f})")
    print("\ntarget (issue #27)")
    for v in verdicts:
        print(f"  {v}")
    tail_sweep(args)
    if args.wall_rounds:
        wall_check(args, draws)
    print(f"\n(bench ran in {time.perf_counter() - began:.1f} s)")


def tail_sweep(args: Any) -> None:
    """Balanced scenario over the tail's weight: under staleness 1 step k+1 generates while step k trains and
    each step waits for the slower, so the step costs about mean(max(gen[k+1], train[k])), which exceeds
    max(mean gen, mean train) by the spread of the two."""
    print(
        "\nwhy (balanced, train/gen 1.0): ratio to ideal over the episode-time sigma; 'predicted' is "
        "mean(max(gen[k+1], train[k])) / ideal from the same draws (medians over seeds)"
    )
    print(f"  {'sigma':>5}  {'staleness 1':>11}  {'predicted':>9}  {'staleness 2':>11}  {'staleness 4':>11}")
    for sigma in (0.0, 0.25, 0.5, 0.75, 1.0, 1.5):
        cols: dict[str, list[float]] = {"1": [], "pred": [], "2": [], "4": []}
        for seed in range(args.seeds):
            c = draw(seed, args.steps, args.episodes, sigma, 1.0)
            for s in (1, 2, 4):
                cols[str(s)].append(run_virtual(c, s)[0] / args.steps / c.ideal)
            cols["pred"].append(statistics.fmean(map(max, zip(c.gen[1:], c.train[:-1], strict=True))) / c.ideal)
        m = {k: statistics.median(v) for k, v in cols.items()}
        print(f"  {sigma:>5}  {m['1']:>11.3f}  {m['pred']:>9.3f}  {m['2']:>11.3f}  {m['4']:>11.3f}")


def wall_check(args: Any, draws: dict[tuple[str, int], Costs]) -> None:
    """The same draws, scaled to milliseconds, on the ordinary event loop: does the speedup over staleness 0 that
    the virtual clock shows survive real scheduling (timer overshoot, other processes)?"""
    seeds = list(range(min(args.seeds, args.wall_rounds)))
    scale = {name: args.wall_gen_ms / 1000 / statistics.fmean(draws[name, 0].gen) for name in SCENARIOS}
    real: dict[tuple[str, int, int], float] = {}
    virtual: dict[tuple[str, int, int], float] = {}
    for seed in seeds:  # rounds: every (scenario, staleness) once per round, interleaved
        for name in SCENARIOS:
            for s in STALENESS:
                costs = draws[name, seed].scaled(scale[name])
                virtual[name, s, seed] = run_virtual(costs, s)[0]
                real[name, s, seed] = asyncio.run(simulate(costs, s))[0]
    print(
        f"\nreal-time check: the same draws scaled to {args.wall_gen_ms:.0f} ms mean generation per step on the "
        f"ordinary event loop ({len(seeds)} interleaved rounds, loaded shared machine): speedup over staleness 0, "
        "real median [min, max] vs virtual median; then real/virtual makespan at staleness 0 (timer overshoot)"
    )
    for name in SCENARIOS:
        cells = []
        for s in STALENESS[1:]:
            r = [real[name, 0, x] / real[name, s, x] for x in seeds]
            v = statistics.median(virtual[name, 0, x] / virtual[name, s, x] for x in seeds)
            cells.append(f"s={s}: {med(r)} vs {v:.3f}")
        over = statistics.median(real[name, 0, x] / virtual[name, 0, x] for x in seeds)
        print(f"  {name:>16}  {'  '.join(cells)}  | {over:.3f}")


if __name__ == "__main__":
    main()
