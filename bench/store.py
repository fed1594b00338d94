"""Trajectory store throughput: appends (each flushed and fsynced) and loads, vs plain ``json.dumps`` lines.

The peer writes the same records as ``json.dumps(record)`` lines with the same flush+fsync per record and loads
them with ``json.loads``; the store also validates every record into a ``Trajectory`` on load.

    .venv/bin/python bench/store.py [--n 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import rubricgym
from rubricgym.core.store import TrajectoryStore
from rubricgym.envs.toy.agents import CalculatorOracle


def plain_append(path: Path, records: list[dict]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
            f.flush()
            os.fsync(f.fileno())


def plain_load(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=500)
    args = parser.parse_args()
    tasks = rubricgym.TaskSet.generate("toy-calculator-v0", args.n, seed=0)
    trajs = asyncio.run(
        rubricgym.rollout_many("toy-calculator-v0", CalculatorOracle(), tasks, progress=False)
    ).trajectories
    records = [t.model_dump(mode="json") for t in trajs]
    size = sum(len(json.dumps(r)) for r in records) / len(records)
    with tempfile.TemporaryDirectory() as tmp:
        store = TrajectoryStore(Path(tmp) / "store")
        plain = Path(tmp) / "plain.jsonl"

        def append_each() -> None:
            for t in trajs:
                store.append(t)

        t_store = timed(append_each)
        t_plain = timed(lambda: plain_append(plain, records))
        t_batch = timed(lambda: TrajectoryStore(Path(tmp) / "batch").extend(trajs))
        t_store_load = timed(lambda: store.load())
        t_plain_load = timed(lambda: plain_load(plain))
    n = len(trajs)
    print(f"{n} trajectories, {size / 1024:.1f} KiB each")
    print(
        f"append, fsync each : store {n / t_store:8.0f}/s   plain json.dumps {n / t_plain:8.0f}/s   "
        f"ratio store/plain {t_plain / t_store:.2f}x"
    )
    print(f"append, one fsync  : store.extend {n / t_batch:8.0f}/s")
    print(
        f"load               : store {n / t_store_load:8.0f}/s (validated Trajectory objects)   "
        f"plain json.loads {n / t_plain_load:8.0f}/s (dicts)   ratio store/plain {t_plain_load / t_store_load:.2f}x"
    )


if __name__ == "__main__":
    main()
