"""One episode as the viewer shows it: each turn with the criteria judged there, the trajectory-level criteria
and the aggregation that produced the total, with hidden task data redacted unless asked for.

Verdicts come from, in order: the run's stored verdicts (``scores.jsonl``, ``rubricgym score``); else the env's
programmatic checks run now on this one episode (criteria that need an LLM judge are then shown as not judged);
else the per-criterion scores the trainer stored on each step (no rationale).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rubricgym.core.rubric import Rubric
from rubricgym.core.types import Trajectory
from rubricgym.viewer.index import MET_AT, outcome_of

MASK = "‹hidden›"


def _leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


class Redactor:
    """Masks a task's ``hidden`` values in what a judge wrote (rationales, quotes, citations, errors), where the
    expected answer is typically stated; a no-op when ``show`` is set. ``task.hidden`` itself is never rendered
    without ``show``. What the agent and the env said is shown as it was: the agent never saw ``hidden``."""

    def __init__(self, hidden: dict[str, Any] | None, show: bool = False):
        self.show = show
        strings: set[str] = set()
        numbers: set[str] = set()
        for leaf in _leaves(hidden or {}):
            if isinstance(leaf, bool) or leaf is None:
                continue
            if isinstance(leaf, int | float):
                if isinstance(leaf, float) and not math.isfinite(leaf):
                    continue
                numbers.add(str(leaf))
                if isinstance(leaf, float) and leaf.is_integer():
                    numbers.add(str(int(leaf)))
            else:
                text = str(leaf).strip()
                if len(text) >= 2:
                    strings.add(text)
        self._all = self._pattern(strings, numbers)

    @staticmethod
    def _pattern(strings: set[str], numbers: set[str]) -> re.Pattern[str] | None:
        alts = [re.escape(s) for s in sorted(strings, key=len, reverse=True)]
        alts += [rf"(?<![\d.]){re.escape(n)}(?![\d])" for n in sorted(numbers, key=len, reverse=True)]
        return re.compile("|".join(alts), re.IGNORECASE) if alts else None

    @staticmethod
    def text(value: Any) -> str:
        """Agent or env text, as it was."""
        return "" if value is None else str(value)

    def judged(self, value: Any) -> str:
        """A judge's words: every hidden value masked."""
        s = "" if value is None else str(value)
        return s if self.show or self._all is None else self._all.sub(MASK, s)


def verdict_label(v: dict[str, Any]) -> str:
    """``error``, ``n/a``, ``met``, ``unmet`` or ``partial`` (a score strictly between 0 and 1)."""
    if v.get("error"):
        return "error"
    if not v.get("applicable", True) or v.get("met") is None and v.get("score") is None:
        return "n/a"
    score = v.get("score")
    if isinstance(score, int | float) and 0.0 < score < 1.0:
        return "partial"
    return "met" if v.get("met") else "unmet"


def _criteria(rubric: Rubric | None) -> dict[str, dict[str, Any]]:
    if rubric is None:
        return {}
    return {
        c.id: {"text": c.text, "level": c.level, "weight": c.resolved_weight, "scope": c.scope, "stage": c.stage}
        for c in rubric.criteria
    }


def rubric_of(traj: dict[str, Any], meta: dict[str, Any]) -> Rubric | None:
    """The rubric this episode is scored with (task's own, the run's for its env, else the env's default)."""
    from rubricgym.rewards.path import choose_rubric
    from rubricgym.rewards.rubric import load_rubric

    try:
        task = Trajectory.model_validate(traj).task
        entry = (meta.get("rubrics") or {}).get(task.env_id)
        return choose_rubric(task, entry=load_rubric(entry) if entry else None)
    except Exception:  # noqa: BLE001 (an env that is not installed here, a rubric that no longer loads: shown without)
        return None


def _run(coro: Any) -> Any:
    """Run ``coro`` to completion, also from code already inside an event loop (a notebook, a sync Playwright)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def check_scores(traj: dict[str, Any], meta: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """This episode scored now with the env's programmatic checks: ``(breakdown JSON, None)``, or ``(None, why
    not)`` where that cannot run here (the env is not installed, its rubric no longer loads)."""
    from rubricgym.rewards.judges import CheckJudge
    from rubricgym.rewards.path import RewardPath
    from rubricgym.rewards.rubric import load_rubric

    try:
        t = Trajectory.model_validate(traj)
        entry = (meta.get("rubrics") or {}).get(t.task.env_id)
        path = RewardPath([CheckJudge()], entry=load_rubric(entry) if entry else None)
        breakdown = _run(path.score(t))
    except Exception as e:  # noqa: BLE001 (the page falls back to the stored step scores and says why)
        return None, f"{type(e).__name__}: {e}"
    return json.loads(breakdown.model_dump_json()), None


def _verdict(v: dict[str, Any], crit: dict[str, dict[str, Any]], red: Redactor) -> dict[str, Any]:
    ev = v.get("evidence") or {}
    c = crit.get(v.get("criterion_id", ""), {})
    return {
        "criterion": v.get("criterion_id", "?"),
        "text": c.get("text", ""),
        "level": c.get("level", ""),
        "weight": c.get("weight"),
        "label": verdict_label(v),
        "score": v.get("score"),
        "rationale": red.judged(v.get("rationale")),
        "error": red.judged(v.get("error")) if v.get("error") else None,
        "steps": list(ev.get("steps") or []),
        "quotes": [red.judged(q) for q in ev.get("quotes") or []],
        "citations": [red.judged(q) for q in ev.get("citations") or []],
        "judge": v.get("judge") or "",
        "cached": bool(v.get("cached")),
    }


def _stored_step_verdicts(step: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-criterion scores a trainer stored on a step (``rubric/<criterion>``), as verdicts without rationale."""
    out = []
    for k, v in (step.get("rewards") or {}).items():
        if k.startswith("rubric/") and k.count("/") == 1 and isinstance(v, int | float):
            out.append(
                {
                    "criterion_id": k.removeprefix("rubric/"),
                    "step": step.get("index"),
                    "score": v,
                    "met": v >= MET_AT,
                    "rationale": "(score stored at training time; run `rubricgym score` for the verdict's rationale)",
                }
            )
    return out


def episode_view(
    traj: dict[str, Any], score: dict[str, Any] | None, meta: dict[str, Any], show_hidden: bool
) -> dict[str, Any]:
    """Everything the episode page renders (hidden values already masked)."""
    task = traj.get("task") or {}
    red = Redactor(task.get("hidden"), show=show_hidden)
    rubric = rubric_of(traj, meta)
    crit = _criteria(rubric)
    source = "stored verdicts (scores.jsonl)"
    why_not = None
    if score is None:
        score, why_not = check_scores(traj, meta)
        source = (
            "the env's programmatic checks, run now by the viewer "
            "(no stored verdicts: `rubricgym score RUN` stores them)"
        )
    steps = traj.get("steps") or []
    verdicts = (score or {}).get("verdicts") or []
    if score is None:
        source = (
            f"per-criterion scores stored at training time, no rationale (the env's checks could not run: {why_not})"
        )
        verdicts = [v for s in steps for v in _stored_step_verdicts(s)]
    by_step: dict[int, list[dict[str, Any]]] = {}
    whole: list[dict[str, Any]] = []
    for v in verdicts:
        (whole if v.get("step") is None else by_step.setdefault(int(v["step"]), [])).append(_verdict(v, crit, red))
    step_rewards = (score or {}).get("step_rewards") or []
    turns = []
    for k, s in enumerate(steps):
        action = s.get("action") or {}
        call = action.get("tool_call")
        obs = s.get("observation") or {}
        reward = step_rewards[k] if k < len(step_rewards) else (s.get("rewards") or {}).get("rubric")
        turns.append(
            {
                "index": s.get("index", k),
                "stage": s.get("stage", ""),
                "text": red.text(action.get("text")),
                "call": None
                if not call
                else {"name": call.get("name"), "arguments": red.text(json.dumps(call.get("arguments"), indent=1))},
                "parse_error": red.text(action.get("parse_error")) if action.get("parse_error") else None,
                "observations": [
                    {"role": m.get("role"), "content": red.text(m.get("content"))} for m in obs.get("messages") or []
                ],
                "tool_result": red.text(s.get("tool_result")) if s.get("tool_result") is not None else None,
                "tool_error": red.text(s.get("tool_error")) if s.get("tool_error") else None,
                "reward": reward,
                "verdicts": by_step.get(int(s.get("index", k)), []),
            }
        )
    outcome, solved = outcome_of(traj)
    o = traj.get("outcome") or {}
    agg = None
    if score is not None:
        agg = {
            k: score.get(k)
            for k in ("method", "total", "outcome", "process", "outcome_signal", "n_errors", "n_not_applicable")
        }
        agg["rubric"] = f"{score.get('rubric_id', '?')} v{score.get('rubric_version', '?')}"
        agg["per_stage"] = score.get("per_stage") or {}
        agg["per_criterion"] = [
            {"criterion": c, "score": v, "level": "", "weight": None, **crit.get(c, {})}
            for c, v in (score.get("per_criterion") or {}).items()
        ]
        agg["params"] = rubric.aggregation.model_dump(exclude_none=True) if rubric is not None else {}
    system = [m for m in traj.get("messages") or [] if m.get("role") == "system"]
    return {
        "id": traj.get("id"),
        "task_id": task.get("id"),
        "env_id": task.get("env_id"),
        "split": task.get("split"),
        "prompt": red.text(task.get("prompt")),
        "system": red.text(system[0].get("content")) if system else None,
        "hidden": json.dumps(task.get("hidden"), indent=1, default=str) if show_hidden else None,
        "has_hidden": bool(task.get("hidden")),
        "agent": traj.get("agent"),
        "model": traj.get("model"),
        "train_step": (traj.get("metrics") or {}).get("train_step"),
        "group_id": traj.get("group_id"),
        "outcome": outcome,
        "solved": solved,
        "answer": red.text(o.get("answer")) if o.get("answer") is not None else None,
        "env_reward": o.get("reward"),
        "total": (score or {}).get("total", (traj.get("rewards") or {}).get("rubric")),
        "turns": turns,
        "whole": whole,
        "aggregation": agg,
        "source": source,
        "duration_s": traj.get("duration_s"),
    }
