"""Weight push to Ray rollout actors: ``generation.ray_weight_sync`` ``collective`` vs ``object_store``, in one run.

The learner (this process) holds SmolLM2-135M-Instruct in fp32, as the trainer does. Two ``RayBackend`` pools of
``--workers`` actors each (one per transport) run on one local Ray; each actor holds its own fp32 copy. Each push
is ``RayBackend.push_weights`` as the trainer calls it after an update, timed from the call to its return (every
actor has written the weights):

- **object_store**: ``ray.put`` of the state dict, then every actor's ``set_weights`` (``load_state_dict``);
- **collective**: every actor's ``receive_weights`` (``WeightSync.receive``) submitted, then the learner's
  ``WeightSync.send``: gloo broadcast over loopback in 256 MiB buckets.

Before every push the learner changes one weight (a new policy version). The two transports alternate, the order
rotating every repeat, ``--repeats`` times each after one untimed warm-up push each; after the warm-up and at the
end every actor's weights must equal the learner's, bit for bit, or the run fails.

    .venv/bin/python bench/ray_weight_sync.py [--repeats 7] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Any

import torch

MODEL = "smollm2-135m-instruct"
TRANSPORTS = ("collective", "object_store")


def check(pool: Any, lm: torch.nn.Module, transport: str) -> None:
    """Every actor's weights equal the learner's, bit for bit."""
    import ray

    want = lm.state_dict()
    for i, w in enumerate(pool.workers):
        got = ray.get(w.weights.remote())
        bad = [k for k, t in want.items() if not torch.equal(got[k], t)]
        if bad:
            raise SystemExit(f"{transport}: rollout worker {i} holds other weights than the learner at {bad[:3]}")


def run(repeats: int, workers: int) -> tuple[dict[str, list[float]], float]:
    import ray

    from rubricgym.trainers.config import EnvConfig, GenerationConfig, ModelConfig
    from rubricgym.trainers.engine.policy import TrainingPolicy
    from rubricgym.trainers.engine.ray_backend import RayBackend

    torch.set_num_threads(1)
    ray.init(address="local", num_cpus=2 * workers, include_dashboard=False, log_to_driver=False)
    load_start = os.getloadavg()[0]
    pools: dict[str, Any] = {}
    try:
        for t in TRANSPORTS:
            pools[t] = RayBackend(
                ModelConfig(name=MODEL, threads=1), GenerationConfig(ray_weight_sync=t), EnvConfig(), workers=workers
            )
        for p in pools.values():
            p.placement()  # every actor started and loaded its model
        lm = TrainingPolicy(MODEL).load().lm  # fp32, the trainer's default
        times: dict[str, list[float]] = {t: [] for t in TRANSPORTS}
        for r in range(-1, repeats):  # round -1: one untimed warm-up push per transport
            for t in TRANSPORTS[r % 2 :] + TRANSPORTS[: r % 2]:
                with torch.no_grad():
                    lm.model.norm.weight[0] += 0.5  # a new policy version: one weight changed
                start = time.perf_counter()
                pools[t].push_weights(lm)
                took = time.perf_counter() - start
                if r < 0:
                    check(pools[t], lm, t)
                else:
                    times[t].append(took)
                print(f"  {f'repeat {r + 1}/{repeats}' if r >= 0 else 'warm-up':<12} {t:<13} {took:6.2f} s", flush=True)
        for t in TRANSPORTS:  # the last push of each pool; the learner's weights moved on since one of them
            with torch.no_grad():
                lm.model.norm.weight[0] += 0.5
            pools[t].push_weights(lm)
            check(pools[t], lm, t)
        print(f"load average: {load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
        return times, sum(p.numel() * p.element_size() for p in lm.parameters())
    finally:
        for p in pools.values():
            p.close()
        ray.shutdown()


def report(times: dict[str, list[float]], nbytes: float, workers: int) -> None:
    from rich.console import Console
    from rich.table import Table

    n = len(times["collective"])
    table = Table(
        title=f"RayBackend.push_weights of {MODEL} (fp32, {nbytes / 1e6:.0f} MB) to {workers} actors: seconds per "
        f"push, {n} interleaved repeats",
        caption=f"{os.cpu_count()}-core CPU ({platform.machine()}), one local Ray, gloo over loopback; shared machine "
        f"(load average {os.getloadavg()[0]:.1f} at the end), so noisy.",
    )
    for col in ("generation.ray_weight_sync", "push s: median [min-max]", "vs collective"):
        table.add_column(col, justify="left" if col.startswith("generation") else "right")
    base = statistics.median(times["collective"])
    for t in TRANSPORTS:
        xs = times[t]
        table.add_row(
            t, f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]", f"{statistics.median(xs) / base:.2f}x"
        )
    Console().print(table)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    print(
        f"{MODEL}, 2 pools of {args.workers} Ray actors, {args.repeats} interleaved repeats per transport", flush=True
    )
    times, nbytes = run(args.repeats, args.workers)
    report(times, nbytes, args.workers)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
