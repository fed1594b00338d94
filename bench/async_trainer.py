"""The async pipeline in the real trainer: synchronous vs ``async: {enabled, max_staleness}`` on the embedded model.

Each variant is the demo's training config (``rubricgym/trainers/demo.py``: SmolLM2-135M-Instruct, GRPO, toy
calculator, same seed, tasks and number of steps); only the ``async`` section differs. Variants run one after the
other in their own processes, interleaved over ``--repeats`` rounds so machine drift hits each side alike. For each
it prints the steady-state step time (wall time from the end of step 1 to the end of the last step, per step: the
first step cannot overlap anything), generated and trained tokens per second over the same span, the mean
staleness and sampler/learner mismatch KL, and base vs trained held-out rubric reward with the paired gain and its
95 % bootstrap CI. This is the real model on a CPU (not a simulation: ``bench/async_pipeline.py`` is that); on two
cores the update and the generation share the same cores, so the overlap has little to win here.

    .venv/bin/python bench/async_trainer.py [--steps 5] [--repeats 1] [--staleness 0,1] [--out runs/bench-async]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import guidance  # bench/guidance.py: the demo config and its subprocess run (this folder is on sys.path)


def config(staleness: int | None, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """``bench/guidance.py``'s plain demo config (same seed, tasks, steps) with this variant's ``async`` section."""
    args.out, args.env, args.kwargs = str(out.parent), None, None
    data = guidance.config("plain", args)
    data["run_dir"] = str(out)
    if staleness is not None:
        data["async"] = {"enabled": True, "max_staleness": staleness}
    return data


def run_one(data: dict[str, Any]) -> dict[str, Any]:
    """Train one variant in a subprocess; the measures of its steps after the first and its held-out gain."""
    result = guidance.train(data)
    train, summary = result["train"], result["summary"]
    later = train[1:]
    span = train[-1]["elapsed_s"] - train[0]["elapsed_s"]
    rollouts = data["tasks_per_step"] * data["group_size"]
    generated = sum(r["response_tokens"] * rollouts for r in later)
    return {
        "step_s": span / len(later),
        "gen_tok_s": generated / span,
        "train_tok_s": sum(r["tokens"] for r in later) / span,
        "staleness": statistics.fmean(r.get("staleness", 0) for r in train),
        "mismatch_kl": statistics.fmean(r["mismatch_kl"] for r in train),
        "gain": summary["gain"],
        "ci": summary["gain_ci"],
        "base": summary["base"]["mean"],
        "trained": summary["trained"]["mean"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=5, help="training steps per run (>= 2)")
    ap.add_argument("--tasks", type=int, default=4, help="tasks per step")
    ap.add_argument("--eval-tasks", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=1, help="interleaved rounds")
    ap.add_argument("--staleness", default="0,1", help="async variants to run beside the synchronous trainer")
    ap.add_argument("--out", default="runs/bench-async")
    args = ap.parse_args()
    if args.steps < 2:
        ap.error("--steps must be at least 2: the first step is left out of the timing")
    variants: list[int | None] = [None, *(int(x) for x in args.staleness.split(","))]
    results: dict[str, list[dict[str, Any]]] = {}
    for rep in range(args.repeats):
        for s in variants:
            name = "sync" if s is None else f"async s={s}"
            out = Path(args.out) / f"{name.replace(' ', '-').replace('=', '')}-{rep}"
            results.setdefault(name, []).append(run_one(config(s, args, out)))
            print(name, json.dumps(results[name][-1]), flush=True)
    print(
        f"\nembedded model (SmolLM2-135M), CPU, {args.steps} steps x {args.tasks} tasks x group 6, "
        f"{args.repeats} interleaved round(s); medians [min, max]; steady state = steps 2..{args.steps}"
    )
    print("| variant | s/step | generated tok/s | trained tok/s | staleness | mismatch KL | gain [95% CI] |")
    print("|---|---|---|---|---|---|---|")
    sync_step = statistics.median(r["step_s"] for r in results["sync"])
    for name, rows in results.items():

        def cell(key: str, fmt: str, rows: list[dict[str, Any]] = rows) -> str:
            xs = [r[key] for r in rows]
            med = format(statistics.median(xs), fmt)
            return med if len(xs) == 1 else f"{med} [{format(min(xs), fmt)}, {format(max(xs), fmt)}]"

        last = rows[-1]
        print(
            f"| {name} | {cell('step_s', '.1f')} | {cell('gen_tok_s', '.1f')} | {cell('train_tok_s', '.1f')} | "
            f"{cell('staleness', '.2f')} | {cell('mismatch_kl', '.4f')} | "
            f"{last['gain']:+.3f} [{last['ci'][0]:+.3f}, {last['ci'][1]:+.3f}] |"
        )
    for name, rows in results.items():
        if name != "sync":
            ratio = sync_step / statistics.median(r["step_s"] for r in rows)
            print(f"{name}: {ratio:.2f}x the synchronous trainer's steps per second")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
