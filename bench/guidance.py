"""Guidance and entropy modulation on the same budget and seeds: plain GRPO vs + guidance vs + AEM vs both.

Each variant is the demo's training config (``rubricgym/trainers/demo.py``: SmolLM2-135M-Instruct, GRPO, toy
calculator) with the same seed, tasks and number of steps; only ``guidance:`` and ``loss.entropy_modulation``
differ. ``--env`` / ``--kwargs`` train another env or level (e.g. two-operation problems, where the untrained model
solves almost nothing). For each variant it prints the mean share of zero-variance groups over the steps (groups
whose rewards are all equal: no gradient), the share of groups guided, the guided rollouts' success, the
guided tokens' mean importance weight, the policy entropy of the first and last step, and base vs trained held-out
rubric reward with the paired gain and its 95 % bootstrap CI. Runs are sequential (one process each); on two CPU
cores a variant of the default size takes ~10 minutes.

    .venv/bin/python bench/guidance.py [--steps 6] [--variants plain,guided,aem,both] [--out runs/bench-guidance]
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

VARIANTS: dict[str, dict[str, Any]] = {
    "plain": {},
    "guided": {"guidance": {"threshold": 0.5, "max_level": 2}},
    "aem": {"loss": {"beta": 0.0, "entropy_modulation": {"lam": 1.0}}},
    "both": {"guidance": {"threshold": 0.5, "max_level": 2}, "loss": {"beta": 0.0, "entropy_modulation": {"lam": 1.0}}},
}


def config(variant: str, args: argparse.Namespace) -> dict[str, Any]:
    from rubricgym.trainers.demo import DEMO_CONFIG

    data = copy.deepcopy(DEMO_CONFIG)
    data.update(
        run_dir=str(Path(args.out) / variant),
        steps=args.steps,
        tasks_per_step=args.tasks,
        save_every=0,
        live=False,
        plots=False,
        keep_rollouts=False,
    )
    data["env"] = {**data["env"], "eval_tasks": args.eval_tasks}
    if args.env:
        data["env"]["id"] = args.env
    if args.kwargs:
        data["env"]["kwargs"] = json.loads(args.kwargs)
    for key, value in VARIANTS[variant].items():
        data[key] = {**data.get(key, {}), **value}
    return data


def run_one(variant: str, args: argparse.Namespace) -> dict[str, Any]:
    """Train one variant in a subprocess (its own memory and threads); its metrics and summary."""
    return train(config(variant, args))


def train(data: dict[str, Any]) -> dict[str, Any]:
    """Train ``data`` (a training config) in a subprocess; its training records and summary."""
    code = (
        "import json, sys; from rubricgym.trainers.config import TrainConfig; "
        "from rubricgym.trainers.trainer import Trainer; "
        "Trainer(TrainConfig.model_validate(json.loads(sys.argv[1]))).run()"
    )
    subprocess.run([sys.executable, "-c", code, json.dumps(data)], check=True)
    run = Path(data["run_dir"])
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((run / "summary.json").read_text())
    return {"train": [r for r in records if r["kind"] == "train"], "summary": summary}


def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if isinstance(x, int | float) and math.isfinite(x)]
    return sum(xs) / len(xs) if xs else math.nan


def row(variant: str, result: dict[str, Any]) -> dict[str, Any]:
    train, s = result["train"], result["summary"]
    return {
        "variant": variant,
        "zero_variance": _mean([r.get("zero_variance", math.nan) for r in train]),
        "guided_share": _mean([r.get("guidance/share", 0.0) for r in train]),
        "guided_success": _mean([r.get("guidance/success", math.nan) for r in train]),
        "guided_weight": _mean([r.get("guided_weight_mean", math.nan) for r in train]),
        "entropy_first": train[0]["entropy"] if train else math.nan,
        "entropy_last": train[-1]["entropy"] if train else math.nan,
        "base": s["base"]["mean"],
        "trained": s["trained"]["mean"],
        "gain": s["gain"],
        "ci": s["gain_ci"],
        "train_s": sum(r.get("step_s", 0.0) for r in train),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--tasks", type=int, default=4, help="tasks per step")
    ap.add_argument("--eval-tasks", type=int, default=24)
    ap.add_argument("--variants", default="plain,guided,aem,both")
    ap.add_argument("--env", default=None)
    ap.add_argument("--kwargs", default=None, help="env kwargs as JSON (default: the demo's)")
    ap.add_argument("--out", default="runs/bench-guidance")
    args = ap.parse_args()
    rows = []
    for variant in args.variants.split(","):
        if variant not in VARIANTS:
            ap.error(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
        rows.append(row(variant, run_one(variant, args)))
        print(json.dumps(rows[-1]), flush=True)
    print(f"\n{args.steps} steps x {args.tasks} tasks x group 6, same seed; held-out: {args.eval_tasks} tasks, greedy")
    head = "| variant | zero-var groups | guided groups | guided success | guided weight | entropy first -> last |"
    print(head + " base -> trained | gain [95% CI] | train s |")
    print("|" + "---|" * 9)
    for r in rows:
        print(
            f"| {r['variant']} | {r['zero_variance']:.2f} | {r['guided_share']:.2f} | {r['guided_success']:.2f} | "
            f"{r['guided_weight']:.2f} | {r['entropy_first']:.3f} -> {r['entropy_last']:.3f} | "
            f"{r['base']:.3f} -> {r['trained']:.3f} | {r['gain']:+.3f} [{r['ci'][0]:+.3f}, {r['ci'][1]:+.3f}] | "
            f"{r['train_s']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
