"""A training step's group side by side: every rollout of one task with its reward and advantage, and where two
rollouts diverged and which criteria they were scored differently on (why one was pushed up, the other down).

Advantages are recomputed from the stored rewards with the run's estimator scale (``advantage.scale`` in
``config.yaml``, GRPO's group normalisation by default): the trainer stores rewards, not advantages.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import yaml

from rubricgym.trainers.algo.advantages import grpo_advantages
from rubricgym.viewer.episode import Redactor
from rubricgym.viewer.index import RunIndex, Summary


def run_scale(run_dir: Any) -> tuple[str, str]:
    """The run's advantage estimator and scale from ``config.yaml`` (``grpo``/``group`` when not recorded)."""
    try:
        cfg = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        cfg = {}
    adv = cfg.get("advantage") if isinstance(cfg, dict) else None
    adv = adv if isinstance(adv, dict) else {}
    return str(adv.get("estimator", "grpo")), str(adv.get("scale", "group"))


def members(index: RunIndex, store: int, group_id: str) -> list[Summary]:
    """The rollouts of group ``group_id`` in store ``store``, in file order."""
    return [s for s in index.stores[store].summaries() if s is not None and s.group_id == group_id]


def advantages(rewards: list[float | None], scale: str) -> list[float]:
    r = np.array([[math.nan if x is None else x for x in rewards]], dtype=float)
    how: Literal["group", "batch", "none"] = "batch" if scale == "batch" else "none" if scale == "none" else "group"
    return [float(x) for x in grpo_advantages(r, scale=how)[0]]


def _criteria(d: dict[str, Any]) -> dict[str, float]:
    return {
        k.removeprefix("rubric/criterion/"): float(v)
        for k, v in (d.get("rewards") or {}).items()
        if k.startswith("rubric/criterion/") and isinstance(v, int | float)
    }


def diff(a: dict[str, Any], b: dict[str, Any], red: Redactor) -> dict[str, Any]:
    """Where rollouts ``a`` and ``b`` first took different actions, and the criteria scored differently."""
    sa, sb = a.get("steps") or [], b.get("steps") or []
    texts_a = [(s.get("action") or {}).get("text", "") for s in sa]
    texts_b = [(s.get("action") or {}).get("text", "") for s in sb]
    first = next((k for k, (x, y) in enumerate(zip(texts_a, texts_b, strict=False)) if x != y), None)
    if first is None and len(texts_a) != len(texts_b):
        first = min(len(texts_a), len(texts_b))
    ca, cb = _criteria(a), _criteria(b)
    crits = [
        {"criterion": c, "a": ca.get(c), "b": cb.get(c)}
        for c in sorted(set(ca) | set(cb))
        if ca.get(c) is None or cb.get(c) is None or abs(ca[c] - cb[c]) > 1e-9
    ]
    rows = []
    for k in range(max(len(sa), len(sb))):
        rows.append(
            {
                "index": k,
                "a": red.text(texts_a[k]) if k < len(texts_a) else None,
                "b": red.text(texts_b[k]) if k < len(texts_b) else None,
                "same": k < len(texts_a) and k < len(texts_b) and texts_a[k] == texts_b[k],
            }
        )
    return {"first": first, "criteria": crits, "rows": rows, "same_prefix": first if first is not None else len(sa)}
