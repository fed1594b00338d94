"""``rubricgym arena``: agents play a suite, a pairwise judge compares them, ratings rank them.

1. ``preflight``: every agent entry can play every env (else fail before any episode, naming the entry).
2. Every agent plays every task of the suite with the same seeds (``OUT/trajectories/<agent>/<entry>/``,
   resumable).
3. A topology shared with the tournament trainer (round robin, Swiss, anchor, seeded single elimination,
   double elimination; the first agent is the anchor) picks the matches; a match judges every task both agents
   played with the entry's ``PairwiseJudge`` in both orders (programmatic from the env's rubric by default, an
   LLM or a panel on request). Verdicts are cached in ``OUT/verdicts.jsonl``.
4. Ratings from the judged games: Bradley-Terry with bootstrap CIs over tasks, online Elo beside it, the
   win-rate matrix, per-entry Bradley-Terry, mean position bias, panel agreement, unjudged games.
5. ``OUT/arena.json`` and the self-contained ``OUT/arena.html``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rubricgym.arena.agents import AgentFactory, preflight
from rubricgym.arena.evaluate import play_entry, rubric_judges
from rubricgym.arena.matches import VERDICTS, MatchRunner, VerdictCache
from rubricgym.arena.ratings import bootstrap_bt, bradley_terry, elo, to_elo_scale, win_matrix
from rubricgym.core.safeio import atomic_write
from rubricgym.core.types import Trajectory
from rubricgym.suites.suite import Suite
from rubricgym.suites.topology import run_tournament, topology_spec

ARENA_JSON = "arena.json"
ARENA_HTML = "arena.html"


def _steps(t: Trajectory, limit: int = 400) -> list[dict[str, Any]]:
    def cut(x: str | None) -> str | None:
        return None if x is None else (x if len(x) <= limit else x[:limit] + " …")

    return [
        {
            "index": s.index,
            "stage": s.stage,
            "action": cut(s.action.text),
            "error": cut(s.action.parse_error or s.tool_error),
            "result": cut(s.tool_result),
        }
        for s in t.steps
    ]


def _example(log: Any, trajs: dict, order: list[int], agents: list[str]) -> dict[str, Any] | None:
    """A decisive game between the best-placed pair of agents, with both trajectories and the judge's words."""
    if not log.examples:
        return None
    place = {a: k for k, a in enumerate(order)}

    def rank(ex: dict[str, Any]) -> tuple:
        pair = sorted((place[agents.index(ex["a"])], place[agents.index(ex["b"])]))
        return (ex["s"] == 0.5, pair)

    ex = min(log.examples, key=rank)
    a, b = trajs[ex["a"]][ex["entry"]][ex["task_id"]], trajs[ex["b"]][ex["entry"]][ex["task_id"]]
    result = ex["result"]
    if ex["swapped"]:  # present the verdict from a's side
        result = {
            **result,
            "score_a": result["score_b"],
            "score_b": result["score_a"],
            "winner": {"a": "b", "b": "a"}.get(result["winner"], result["winner"]),
            "orders": [
                {
                    **o,
                    "first": {"a": "b", "b": "a"}[o["first"]],
                    **{k: {"a": o[k].get("b"), "b": o[k].get("a")} for k in ("path", "answer", "combined")},
                }
                for o in result["orders"]
            ],
        }
    return {
        "entry": ex["entry"],
        "task_id": ex["task_id"],
        "prompt": a.task.prompt,
        "a": ex["a"],
        "b": ex["b"],
        "a_steps": _steps(a),
        "b_steps": _steps(b),
        "a_answer": a.outcome.answer,
        "b_answer": b.outcome.answer,
        "result": result,
    }


def _judges(
    suite: Suite, mode: str, judge_url: str | None, judge_model: str | None, panel: Sequence[str], out: Path
) -> dict[str, Any]:
    from rubricgym.rewards.pairwise import PairwiseJudge

    if mode not in ("rubric", "llm"):
        raise ValueError(f"unknown judge mode {mode!r}; use rubric or llm")
    if mode == "llm":
        if not judge_url or not judge_model:
            raise ValueError("--judge-mode llm needs --judge URL and --judge-model MODEL")
        judge = PairwiseJudge(base_url=judge_url, model=judge_model)
        return {e.name: judge for e in suite.entries}
    members = rubric_judges(judge_url, judge_model, panel, out / "judge_cache.sqlite")
    return {e.name: TaskRubricJudge(e.load_rubric(suite.base_dir), members) for e in suite.entries}


class TaskRubricJudge:
    """An entry's pairwise judge that compares two trajectories of a task under the rubric ``choose_rubric``
    picks for it (the task's own, else the entry's): the arena ranks by the rubric ``score`` and training use."""

    def __init__(self, entry_rubric: Any, members: Any):
        from rubricgym.rewards.pairwise import PairwiseJudge

        self.entry_rubric, self.members = entry_rubric, members
        entry = PairwiseJudge.from_rubric(entry_rubric, members)
        self._by_hash: dict[str, Any] = {entry.prm.rubric.hash: entry}  # type: ignore[union-attr]
        self.prm = entry.prm
        """The entry rubric's model (its judges report panel agreement)."""
        self.id = entry.id

    def for_task(self, task: Any) -> Any:
        from rubricgym.rewards.pairwise import PairwiseJudge
        from rubricgym.rewards.path import choose_rubric

        rubric = choose_rubric(task, entry=self.entry_rubric)
        if rubric.hash not in self._by_hash:
            self._by_hash[rubric.hash] = PairwiseJudge.from_rubric(rubric, self.members)
        return self._by_hash[rubric.hash]


def _ratings(n: int, games: list, resamples: int) -> dict[str, list[float]]:
    beta = bradley_terry(n, games)
    lo, hi = bootstrap_bt(n, games, resamples=resamples)
    return {"rating": list(to_elo_scale(beta)), "low": list(to_elo_scale(lo)), "high": list(to_elo_scale(hi))}


async def run_arena(
    suite: Suite,
    specs: list[Any],
    out: Path,
    *,
    topology: str = "round_robin",
    judge_mode: str = "rubric",
    judge_url: str | None = None,
    judge_model: str | None = None,
    panel: Sequence[str] = (),
    concurrency: int = 4,
    resamples: int = 300,
    progress: bool = True,
    source: str = "agents",
) -> dict[str, Any]:
    """Run (or resume, or extend) an arena in ``out``; returns what ``arena.json`` holds."""
    topology_spec(topology)  # an unknown name fails before any agent runs
    await preflight(specs, [e.env for e in suite.entries], source)
    out.mkdir(parents=True, exist_ok=True)
    names = [s.name for s in specs]
    factory = AgentFactory(specs)
    trajs: dict[str, dict[str, dict[str, Trajectory]]] = {}
    failed: list[dict[str, str]] = []
    try:
        for name in names:
            trajs[name] = {}
            for entry in suite.entries:
                played, bad = await play_entry(
                    suite,
                    entry,
                    factory,
                    name,
                    out / "trajectories" / name / entry.name,
                    concurrency=concurrency,
                    progress=progress,
                )
                trajs[name][entry.name] = {t.task.id: t for t in played}
                failed += [{"agent": name, "entry": entry.name, "task_id": tid} for tid in bad]
    finally:
        await factory.aclose()
    judges = _judges(suite, judge_mode, judge_url, judge_model, panel, out)
    runner = MatchRunner(names, trajs, judges, VerdictCache(out / VERDICTS), concurrency=8)
    result = await run_tournament(topology, len(names), runner.compare)
    log, n = runner.log, len(names)
    overall = _ratings(n, log.games, resamples)
    elo_r = elo(n, log.games)
    rate, count = win_matrix(n, log.games)
    per_entry = {}
    for entry in suite.entries:
        sub = [g for g, e in zip(log.games, log.game_entries, strict=True) if e == entry.name]
        if sub:
            per_entry[entry.name] = {names[k]: float(v) for k, v in enumerate(to_elo_scale(bradley_terry(n, sub)))}
    order = sorted(range(n), key=lambda k: -overall["rating"][k])
    agents = []
    for k in order:
        mine = [g for g in log.games if k in (g.i, g.j)]
        score = [g.s if g.i == k else 1 - g.s for g in mine]
        agents.append(
            {
                "name": names[k],
                "kind": specs[k].kind,
                "tts": specs[k].tts.model_dump() if specs[k].tts is not None else None,
                "rating": overall["rating"][k],
                "ci": [overall["low"][k], overall["high"][k]],
                "elo": float(elo_r[k]),
                "games": len(mine),
                "wins": sum(x == 1 for x in score),
                "losses": sum(x == 0 for x in score),
                "ties": sum(x == 0.5 for x in score),
                "topology_rank": float(result.ranks[k]),
            }
        )
    panels = [m for j in judges.values() if j.prm is not None for m in j.prm.judges if hasattr(m, "agreement")]
    agreement = None
    if panels:
        ag = panels[0].agreement()
        agreement = {"items": ag.items, "percent_agreement": ag.percent_agreement, "fleiss_kappa": ag.fleiss_kappa}
    report = {
        "suite": suite.name,
        "suite_version": suite.version,
        "topology": topology,
        "judge_mode": judge_mode,
        "judges": {e: j.id for e, j in judges.items()},
        "agents": agents,
        "order": [names[k] for k in order],
        "names": names,
        "win_rate": [[None if np.isnan(x) else float(x) for x in row] for row in rate],
        "games_matrix": count.tolist(),
        "per_entry": per_entry,
        "games": len(log.games),
        "matches": len(log.matches),
        "judge_calls": log.judged_now,
        "cached_verdicts": log.cached,
        "position_bias": float(np.mean(log.position_bias)) if log.position_bias else None,
        "panel_agreement": agreement,
        "unjudged": log.unjudged,
        "verdict_cache_skipped": runner.cache.skipped,
        "failed_episodes": failed,
        "bootstrap_resamples": resamples,
        "example": _example(log, trajs, order, names),
    }
    atomic_write(out / ARENA_JSON, json.dumps(report, indent=2))
    from rubricgym.arena.report import arena_html

    atomic_write(out / ARENA_HTML, arena_html(report))
    return report
