"""Weight sync of the embedded model to a rollout worker process: by collective (gloo) vs the disk path, in one run.

The learner (this process) holds SmolLM2-135M-Instruct in fp32, as the trainer does; a rollout worker process
holds its own copy. Each sync moves the learner's current weights into the worker's model, three ways,
interleaved (the order rotates every repeat), ``--repeats`` times each after one untimed warm-up sync each:

- **collective fp32**: ``WeightSync.send`` / ``receive`` (``trainers/engine/weight_sync.py``): every parameter, exact;
- **collective bf16**: the same, with bf16 tensors on the wire (the bytes the disk path writes), cast back to fp32
  by the worker's ``copy_``;
- **disk**: what ``VLLMBackend.push_weights`` does today: ``untied_state_dict`` (bf16, explicit ``lm_head``)
  written with ``safetensors.save_file`` into a temp dir, then the worker reloads it (``load_file`` +
  ``load_state_dict``, as ``checkpoint.load_checkpoint`` does for a local model).

A sync's time runs from the learner starting it to the worker reporting its model written (command round trips
over the sync group's TCP store included, alike for all three). Before every sync the learner changes one weight
(the policy version), and after it the worker's weight checksum must equal the learner's (fp32, or bf16-rounded
for the bf16 paths): a sync that moved stale or partial weights fails the run.

    .venv/bin/python bench/weight_sync.py [--repeats 5] [--bucket-mb 256]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

MODEL = "smollm2-135m-instruct"
METHODS = ("collective fp32", "collective bf16", "disk")
_CMD, _DONE = "bench/cmd/", "bench/done/"


def load_policy() -> Any:
    from rubricgym.trainers.engine.policy import TrainingPolicy

    return TrainingPolicy(MODEL).load()  # fp32, the trainer's default


def checksum(lm: torch.nn.Module, bf16: bool = False) -> float:
    """The sum of every parameter (tied ones once) in float64, after rounding to bf16 when ``bf16``."""
    with torch.no_grad():
        return sum(float((p.to(torch.bfloat16) if bf16 else p).double().sum()) for p in lm.parameters())


def worker(address: str, bucket_mb: float) -> None:
    """The rollout worker: joins the sync group, then runs the learner's commands until ``quit``."""
    from safetensors.torch import load_file

    from rubricgym.trainers.engine.weight_sync import WeightSync

    torch.set_num_threads(1)
    policy = load_policy()
    sync = WeightSync.connect(address, 1, 2, timeout_s=600)
    for k in range(10**6):
        cmd = json.loads(sync.store.get(f"{_CMD}{k}"))
        if cmd["method"] == "quit":
            break
        if cmd["method"] == "disk":
            weights = load_file(cmd["path"])
            policy.lm.load_state_dict(weights, strict=False)  # as checkpoint.load_checkpoint does
            policy.release_packed()
            del weights
        else:
            sync.receive(policy)
        sync.store.set(f"{_DONE}{k}", json.dumps({"worker_s": time.perf_counter() - cmd["t"]}))
        sync.store.set(f"{_DONE}{k}/checksum", json.dumps(checksum(policy.lm)))
    sync.close()


def free_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def run(repeats: int, bucket_mb: float) -> tuple[dict[str, list[dict[str, float]]], dict[str, int]]:
    from safetensors.torch import save_file

    from rubricgym.trainers.engine.vllm_backend import untied_state_dict
    from rubricgym.trainers.engine.weight_sync import WeightSync, sync_tensors

    torch.set_num_threads(1)
    address = free_address()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, __file__, "--worker", address, "--bucket-mb", str(bucket_mb)], env=env)
    policy = load_policy()
    lm = policy.lm
    sync = WeightSync.connect(address, 0, 2, timeout_s=600)
    weights_dir = Path(tempfile.mkdtemp(prefix="rubricgym-bench-weights-"))  # where VLLMBackend writes, /tmp
    results: dict[str, list[dict[str, float]]] = {m: [] for m in METHODS}
    k = 0
    try:
        for r in range(-1, repeats):  # round -1: one untimed warm-up sync per method (first buffers, page cache)
            for method in METHODS[r % 3 :] + METHODS[: r % 3]:
                with torch.no_grad():
                    lm.model.norm.weight[0] += 0.5  # a new policy version: one weight changed
                t0 = time.perf_counter()
                cmd: dict[str, Any] = {"method": method, "t": t0}
                if method == "disk":
                    path = weights_dir / "model.safetensors"
                    save_file(untied_state_dict(lm), str(path), metadata={"format": "pt"})
                    cmd["path"] = str(path)
                    sync.store.set(f"{_CMD}{k}", json.dumps(cmd))
                else:
                    sync.store.set(f"{_CMD}{k}", json.dumps(cmd))
                    if method == "collective fp32":
                        sync.send(lm, k, bucket_mb=bucket_mb)
                    else:
                        wire = [(n, t.detach().to(torch.bfloat16)) for n, t in sync_tensors(lm, False)]
                        sync.send(wire, k, bucket_mb=bucket_mb)
                learner_s = time.perf_counter() - t0
                done = json.loads(sync.store.get(f"{_DONE}{k}"))
                total_s = time.perf_counter() - t0
                got = json.loads(sync.store.get(f"{_DONE}{k}/checksum"))
                want = checksum(lm, bf16=method != "collective fp32")
                if got != want:
                    raise SystemExit(f"{method} sync {k}: the worker's weights sum to {got}, the learner's to {want}")
                if r >= 0:
                    results[method].append({"total_s": total_s, "learner_s": learner_s, "worker_s": done["worker_s"]})
                print(f"  {f'repeat {r + 1}/{repeats}' if r >= 0 else 'warm-up':<12} {method:<16} {total_s:6.2f} s")
                k += 1
        sync.store.set(f"{_CMD}{k}", json.dumps({"method": "quit", "t": 0}))
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        sync.close()
        for f in weights_dir.iterdir():
            f.unlink()
        weights_dir.rmdir()
    return results, wire_bytes(lm)


def wire_bytes(lm: torch.nn.Module) -> dict[str, int]:
    from rubricgym.trainers.engine.vllm_backend import untied_state_dict

    fp32 = sum(p.numel() * p.element_size() for p in lm.parameters())
    disk = sum(t.numel() * t.element_size() for t in untied_state_dict(lm).values())
    return {"collective fp32": fp32, "collective bf16": fp32 // 2, "disk": disk}


def report(results: dict[str, list[dict[str, float]]], nbytes: dict[str, int], bucket_mb: float) -> None:
    from rich.console import Console
    from rich.table import Table

    def med(method: str, key: str) -> float:
        return statistics.median(x[key] for x in results[method])

    base = med("collective fp32", "total_s")
    n = len(results["disk"])
    table = Table(
        title=f"Weight sync of {MODEL} (fp32 learner) to 1 rollout worker process: seconds per sync, {n} repeats",
        caption=(
            f"{os.cpu_count()}-core CPU ({platform.machine()}), gloo over loopback TCP, {bucket_mb:g} MiB buckets; "
            "disk = safetensors in /tmp (a local disk, page cache warm). Interleaved on a shared machine (load "
            f"average {os.getloadavg()[0]:.1f} at the end), so noisy."
        ),
    )
    for col in ("method", "MB moved", "learner s", "worker s", "sync s: median [min-max]", "vs collective fp32"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for m in METHODS:
        totals = [x["total_s"] for x in results[m]]
        table.add_row(
            m,
            f"{nbytes[m] / 1e6:.0f}",
            f"{med(m, 'learner_s'):.2f}",
            f"{med(m, 'worker_s'):.2f}",
            f"{statistics.median(totals):.2f} [{min(totals):.2f}-{max(totals):.2f}]",
            f"{statistics.median(totals) / base:.2f}x",
        )
    Console().print(table)

    def low(method: str) -> float:
        return min(x["total_s"] for x in results[method])

    disk = med("disk", "total_s")
    Console().print(
        f"disk / collective fp32: [bold]{disk / base:.2f}x[/bold] the time per sync (medians; "
        f"{low('disk') / low('collective fp32'):.2f}x on the fastest syncs); disk / collective bf16: "
        f"[bold]{disk / med('collective bf16', 'total_s'):.2f}x[/bold] ({low('disk') / low('collective bf16'):.2f}x)"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--bucket-mb", type=float, default=256.0)
    p.add_argument("--worker", metavar="ADDRESS", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, args.bucket_mb)
        return 0
    print(f"learner + 1 rollout worker process, {MODEL}, {args.repeats} interleaved repeats per method", flush=True)
    results, nbytes = run(args.repeats, args.bucket_mb)
    report(results, nbytes, args.bucket_mb)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
