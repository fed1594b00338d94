"""Run artefacts: each step's metrics record (``train_record``) as JSONL, PNG plots (reward, per-stage reward,
KL, entropy, response length, monitors) and an HTML summary page per run."""

from __future__ import annotations

import html
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from rubricgym.core.fmt import fmt_number
from rubricgym.core.safeio import append_lines, atomic_write
from rubricgym.core.store import TrajectoryStore
from rubricgym.core.types import Trajectory
from rubricgym.trainers.algo.estimate import Estimate
from rubricgym.trainers.algo.rollouts import Group, flatten


class Laps:
    """Wall time of a step's phases: ``lap("gen_s")`` closes the phase that began at the previous lap (a phase
    closed twice adds up: scoring before and after guidance is one ``score_s``)."""

    def __init__(self) -> None:
        self.start = self.last = time.perf_counter()
        self.times: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.times[name], self.last = self.times.get(name, 0.0) + now - self.last, now

    def record(self) -> dict[str, float]:
        return {**self.times, "step_s": self.last - self.start}


def _zero_variance(groups: Sequence[Group], est: Estimate) -> float:
    """The share of groups (as trained, guided rollouts included) whose scored rewards are all equal: no signal."""
    out, i = 0, 0
    for g in groups:
        values = [x for x in est.per_rollout[i : i + len(g)] if math.isfinite(x)]
        out += int(len(values) < 2 or max(values) - min(values) < 1e-9)
        i += len(g)
    return out / len(groups) if groups else 0.0


def _mean(xs: Sequence[float]) -> float | None:
    return float(np.mean(xs)) if len(xs) else None


def train_record(
    step: int,
    cursor: int,
    groups: Sequence[Group],
    est: Estimate,
    stats: dict[str, float],
    stages: Sequence[str],
    laps: Laps,
) -> dict[str, Any]:
    """The ``metrics.jsonl`` line of one training step: rewards (errored rollouts left out) and success of the
    unguided rollouts, lengths, per-stage rubric scores, the update's loss statistics and the phases' wall times."""
    rollouts = flatten(groups)
    own = [i for i, r in enumerate(rollouts) if not r.guidance]  # the policy's unguided attempts
    rewards = [x for i in own if math.isfinite(x := est.per_rollout[i])]
    record: dict[str, Any] = {
        "kind": "train",
        "step": step,
        "cursor": cursor,
        "reward_mean": float(np.mean(rewards)) if rewards else math.nan,
        "reward_std": float(np.std(rewards)) if rewards else math.nan,
        "success_mean": float(np.mean([rollouts[i].trajectory.outcome.reward for i in own])) if own else math.nan,
        "masked": est.masked_rollouts,
        "zero_variance": _zero_variance(groups, est),
        "comparisons": est.comparisons,
        "cut_tokens": est.cut_tokens,
        "response_tokens": float(np.mean([sum(len(t.completion_ids) for t in r.turns) for r in rollouts])),
        "turns": float(np.mean([len(r.trajectory.steps) for r in rollouts])),
        "samples": len(est.samples),
        "tokens": int(stats.get("tokens", 0)),
        **{k: v for k, v in laps.record().items()},
        **_episode_times([r.trajectory.duration_s for r in rollouts]),
        "tool_timeouts": sum(bool(s.info.get("timed_out")) for r in rollouts for s in r.trajectory.steps),
    }
    for s in stages:
        record[f"stage/{s}"] = _mean(
            [r.breakdown.per_stage[s] for r in rollouts if r.breakdown and s in r.breakdown.per_stage]
        )
    record.update({k: v for k, v in stats.items() if k != "tokens"})
    return record


def _episode_times(durations: list[float]) -> dict[str, float]:
    """The long tail of the step's episodes (env time plus generation): median, 99th percentile and slowest."""
    if not durations:
        return {}
    p50, p99 = np.percentile(durations, [50, 99])
    return {"episode_p50_s": float(p50), "episode_p99_s": float(p99), "episode_max_s": float(max(durations))}


class MetricsLog:
    """Append-only ``metrics.jsonl``: one JSON object per training step (and one per evaluation)."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: dict[str, Any]) -> None:
        append_lines(self.path, (json.dumps(_finite(record), sort_keys=True) + "\n").encode("utf-8"))

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()]

    def truncate_after(self, step: int) -> None:
        """Drop records of steps after ``step`` (a resumed run rewrites them)."""
        kept = [
            r
            for r in self.read()
            if r.get("step", 0) <= step and not (r.get("kind") == "eval" and r.get("step", 0) > step)
        ]
        atomic_write(self.path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))


class RolloutLog:
    """The run's scored training rollouts in ``trajectories.jsonl`` (a ``TrajectoryStore``), each tagged with the
    step that trained on it (``metrics.train_step``), so ``rubricgym score``, ``show`` and ``export`` read them."""

    def __init__(self, run_dir: Path):
        self.store = TrajectoryStore(run_dir)

    def write(self, step: int, trajectories: Sequence[Trajectory]) -> None:
        for t in trajectories:
            t.metrics["train_step"] = float(step)
        self.store.extend(list(trajectories))

    def truncate_after(self, step: int) -> None:
        """Drop the rollouts of steps after ``step`` (a resumed run plays them again); a fresh run (``step`` 0)
        starts an empty file."""
        path = self.store.path
        if not path.exists():
            return
        kept = [
            line
            for line in path.read_bytes().splitlines(keepends=True)
            if line.strip() and step > 0 and _train_step(line) <= step
        ]
        atomic_write(path, b"".join(kept).decode("utf-8"))


def _train_step(line: bytes) -> float:
    return float(json.loads(line).get("metrics", {}).get("train_step", math.inf))


def _finite(record: dict[str, Any]) -> dict[str, Any]:
    """JSON has no NaN: write ``None`` instead."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}


PLOTS = (
    ("reward", "Solve rate and rubric reward", ["success_mean", "reward_mean"], "eval_mean"),
    ("stages", "Per-stage reward", None, None),
    ("kl", "KL to reference (k3)", ["kl"], None),
    ("entropy", "Entropy (nats/token)", ["entropy"], None),
    ("length", "Response length (generated tokens per rollout)", ["response_tokens"], None),
    (
        "hacking",
        "Hacking monitors",
        [
            "monitor/master_key_share",
            "monitor/exploitation",
            "monitor/internalisation_gap",
            "monitor/credit_drift",
            "monitor/rubric_up_outcome_down",
        ],
        None,
    ),
    ("credit", "Share of credited rubric weight per criterion", "monitor/credit/", None),
)


def write_plots(records: Sequence[dict[str, Any]], out_dir: Path) -> list[Path]:
    """One PNG per plot in ``PLOTS`` whose metric was logged (no flat KL panel when KL is off); integer step
    ticks; held-out CIs drawn as bands. Returns the files written (a plot no longer drawn is removed)."""
    matplotlib.use("Agg")  # files only: no window, whatever backend the caller had
    from matplotlib.ticker import MaxNLocator

    steps = [r for r in records if r.get("kind") == "train"]
    evals = [r for r in records if r.get("kind") == "eval"]
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, title, keys, eval_key in PLOTS:
        if keys is None or isinstance(keys, str):  # a prefix: every logged key that starts with it
            prefix = keys or "stage/"
            keys = sorted({k for r in steps for k in r if k.startswith(prefix)})
        logged = [k for k in keys if any(_finite_number(r.get(k)) for r in steps)]
        ek = eval_key or ""
        has_evals = bool(ek) and any(_finite_number(r.get(ek)) for r in evals)
        path = out_dir / f"{name}.png"
        if not logged and not has_evals:  # metric off (KL with beta 0, no monitor): no flat panel
            path.unlink(missing_ok=True)
            continue
        fig, ax = plt.subplots(figsize=(6, 3.2), dpi=100)
        for key in logged:
            xs = [r["step"] for r in steps if _finite_number(r.get(key))]
            ys = [r[key] for r in steps if _finite_number(r.get(key))]
            ax.plot(xs, ys, marker=".", label=key)
        if has_evals:
            rows = [r for r in evals if _finite_number(r.get(ek))]
            xs = [r["step"] for r in rows]
            ys = [r[ek] for r in rows]
            (line,) = ax.plot(xs, ys, "o-", label="held-out")
            banded = [r for r in rows if _finite_number(r.get("eval_ci_low")) and _finite_number(r.get("eval_ci_high"))]
            if banded:
                ax.fill_between(
                    [r["step"] for r in banded],
                    [r["eval_ci_low"] for r in banded],
                    [r["eval_ci_high"] for r in banded],
                    color=line.get_color(),
                    alpha=0.2,
                    label="held-out 95% CI",
                )
            solved = [(r["step"], r["eval_success"]) for r in evals if _finite_number(r.get("eval_success"))]
            if solved:
                ax.plot(*zip(*solved, strict=True), "s--", label="held-out solved")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def _finite_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def write_html(
    run_dir: Path,
    config: dict[str, Any],
    records: Sequence[dict[str, Any]],
    plots: Sequence[Path],
    summary_lines: Sequence[str],
) -> Path:
    """``summary.html``: the headline (base vs trained), the plots, the last steps' metrics and the config."""
    steps = [r for r in records if r.get("kind") == "train"]
    keys = ["step", "success_mean", "reward_mean", "kl", "entropy", "loss", "response_tokens", "masked", "step_s"]
    rows = "".join(
        "<tr>" + "".join(f"<td>{_cell(r.get(k))}</td>" for k in keys) + f"<td>{html.escape(_alarms(r))}</td></tr>"
        for r in steps[-30:]
    )
    imgs = "".join(f'<img src="{p.relative_to(run_dir)}" alt="{p.stem}">' for p in plots)
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>rubricgym run {html.escape(run_dir.name)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1300px}}img{{width:48%;margin:.5%}}
table{{border-collapse:collapse;font-size:13px}}td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}
pre{{background:#f6f6f6;padding:1em}}</style></head><body>
<h1>rubricgym training run: {html.escape(run_dir.name)}</h1>
<pre>{html.escape(chr(10).join(summary_lines))}</pre>
<p>Every kept rollout with its per-step verdicts, each step's groups and the live dashboard:
<code>rubricgym view {html.escape(str(run_dir))}</code></p>
{imgs}
<h2>Last steps</h2><table><tr>{"".join(f"<th>{k}</th>" for k in [*keys, "monitor alarm"])}</tr>{rows}</table>
<h2>Config</h2><pre>{html.escape(json.dumps(config, indent=2, default=str))}</pre>
</body></html>"""
    path = run_dir / "summary.html"
    atomic_write(path, page)
    return path


def _alarms(record: dict[str, Any]) -> str:
    """The hacking-monitor alarms a step raised (``monitor/alarm``, or ``monitor/<entry>/alarm`` in a suite)."""
    return "; ".join(str(v) for k, v in record.items() if k.startswith("monitor/") and k.endswith("/alarm") and v)


def _cell(v: Any) -> str:
    return fmt_number(v, ".4g", "") if isinstance(v, float) or v is None else html.escape(str(v))


def per_env_plot(records: list[dict[str, Any]], entries: list[str], path: Path) -> Path:
    """Training reward per entry with held-out points, and the curriculum's draw probabilities."""
    matplotlib.use("Agg")  # files only
    steps = [r for r in records if r.get("kind") == "train"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.2), dpi=100)
    for name in entries:
        pts = [(r["step"], r[f"env/{name}/reward"]) for r in steps if r.get(f"env/{name}/reward") is not None]
        line = ax.plot(*zip(*pts, strict=True), marker=".", label=name) if pts else None
        ev = [
            (r["step"], r["eval_mean"])
            for r in records
            if r.get("kind") == "eval_env" and r["entry"] == name and r.get("eval_mean") is not None
        ]
        if ev:
            ax.plot(
                *zip(*ev, strict=True), "s--", color=line[0].get_color() if line else None, label=f"{name} held-out"
            )
        probs = [(r["step"], r[f"curriculum/{name}/p"]) for r in steps if f"curriculum/{name}/p" in r]
        if probs:
            bx.plot(*zip(*probs, strict=True), marker=".", label=name)
    ax.set_title("Rubric reward per entry")
    bx.set_title("Curriculum: P(entry)")
    for a in (ax, bx):
        a.set_xlabel("step")
        a.grid(alpha=0.3)
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
