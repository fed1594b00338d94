"""The training dashboard: ``metrics.jsonl`` as panels (reward, solve rate, entropy, KL, clip fraction, skipped
samples, staleness, judge latency and cache hits, per suite entry, hacking monitors), each shown only when its
metric was logged, with the hacking-monitor alarms marked on every panel. Re-read on every request, so a live
run's page (which polls) follows the trainer without the trainer serving anything."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from rubricgym.viewer.charts import Series, line_chart

PANELS: list[tuple[str, str, list[tuple[str, str | None]]]] = [
    # (id, title, [(metric, band: "std" / "ci" / None)])
    ("reward", "Rubric reward (band: ±1 std; held-out: 95% CI)", [("reward_mean", "std"), ("eval_mean", "ci")]),
    ("solve", "Solve rate", [("success_mean", None), ("eval_success", None)]),
    ("entropy", "Entropy (nats/token)", [("entropy", None)]),
    ("kl", "KL to reference", [("kl", None)]),
    ("clip", "Clip fraction", [("clip_fraction", None)]),
    ("skipped", "Skipped and masked samples", [("skipped_samples", None), ("masked", None)]),
    ("staleness", "Staleness (steps behind the learner)", [("staleness", None)]),
    ("judge", "Judge latency (s)", [("judge/latency_s", None)]),
    (
        "cache",
        "Judge verdicts and cache hits",
        [("judge/verdicts", None), ("judge/cache_hits", None), ("judge/errors", None)],
    ),
    ("length", "Response length (tokens per rollout)", [("response_tokens", None)]),
]
LIVE_S = 120.0
"""A run whose metrics changed this recently is shown as live."""


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Every readable record (a torn last line of a live run is skipped)."""
    out = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    for line in text.splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict):
            out.append(r)
    return out


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def alarms(records: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """``(step, what)`` for each hacking-monitor alarm (``monitor/alarm`` or ``monitor/<entry>/alarm``)."""
    out = []
    for r in records:
        for k, v in r.items():
            if k.startswith("monitor/") and k.endswith("alarm") and v and isinstance(r.get("step"), int | float):
                out.append((int(r["step"]), f"{k}: {v}"))
    return out


def _series(records: list[dict[str, Any]], key: str, band: str | None) -> Series | None:
    pts, bands = [], []
    for r in records:
        y, step = _num(r.get(key)), r.get("step")
        if y is None or not isinstance(step, int | float):
            continue
        pts.append((int(step), y))
        if band == "std" and (sd := _num(r.get(key.replace("_mean", "_std")))) is not None:
            bands.append((int(step), y - sd, y + sd))
        if (
            band == "ci"
            and (lo := _num(r.get("eval_ci_low"))) is not None
            and (hi := _num(r.get("eval_ci_high"))) is not None
        ):
            bands.append((int(step), lo, hi))
    if not pts:
        return None
    return Series(key, pts, bands, dashed=key.startswith("eval_"))


def dashboard(run_dir: Path) -> dict[str, Any]:
    """Panels (SVG), the panels left out because their metric was never logged, alarms and a headline."""
    path = run_dir / "metrics.jsonl"
    records = read_metrics(path)
    train = [r for r in records if r.get("kind", "train") == "train"]
    evals = [r for r in records if r.get("kind") == "eval"]
    marks = alarms(train)
    panels, off = [], []
    for pid, title, keys in PANELS:
        series = [s for key, band in keys if (s := _series(evals if key.startswith("eval_") else train, key, band))]
        if series:
            panels.append({"id": pid, "title": title, "svg": line_chart(title, series, marks, f"chart-{pid}")})
        else:
            off.append(title.split(" (")[0])
    entries = sorted({k.split("/")[1] for r in train for k in r if k.startswith("env/") and k.count("/") == 2})
    for what in ("reward", "success"):
        series = [s for e in entries if (s := _series(train, f"env/{e}/{what}", None))]
        for s in series:
            s.label = s.label.split("/")[1]
        if series:
            title = f"Per suite entry: {'rubric reward' if what == 'reward' else 'solve rate'}"
            panels.append(
                {"id": f"entry-{what}", "title": title, "svg": line_chart(title, series, marks, f"chart-entry-{what}")}
            )
    monitor_keys = sorted(
        {
            k
            for r in train
            for k, v in r.items()
            if k.startswith("monitor/") and not k.endswith("alarm") and _num(v) is not None
        }
    )
    series = [s for k in monitor_keys[:8] if (s := _series(train, k, None))]
    if series:
        panels.append(
            {
                "id": "monitors",
                "title": "Hacking monitors",
                "svg": line_chart("Hacking monitors", series, marks, "chart-monitors"),
            }
        )
    try:
        age = time.time() - path.stat().st_mtime
    except OSError:
        age = math.inf
    last = train[-1] if train else {}
    return {
        "panels": panels,
        "off": off,
        "alarms": marks,
        "steps": len(train),
        "last_step": last.get("step"),
        "last": {k: last.get(k) for k in ("reward_mean", "success_mean", "loss", "step_s") if k in last},
        "evals": [
            {
                "tag": r.get("tag", ""),
                "step": r.get("step"),
                "mean": r.get("eval_mean"),
                "ci": (r.get("eval_ci_low"), r.get("eval_ci_high")),
                "solved": r.get("eval_success"),
            }
            for r in evals
        ],
        "live": age < LIVE_S,
    }
