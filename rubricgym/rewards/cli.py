"""``rubricgym score`` and ``rubricgym audit-judge``: added to the main app by ``register(app)``.

``score RUN_DIR`` reads ``RUN_DIR/trajectories.jsonl``, scores every trajectory with a rubric (``--rubric``,
else the task's own rubric, else the env's default rubric) using the env's checks plus an optional LLM judge
or panel, writes ``RUN_DIR/scores.jsonl`` (one ``Breakdown`` per line, every verdict kept) and
``RUN_DIR/scores_summary.json``, and prints a per-criterion table. Verdicts are cached in
``RUN_DIR/judge_cache.sqlite`` so re-scoring unchanged trajectories makes no endpoint calls.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rubricgym.core.bounds import bounded
from rubricgym.core.fmt import fit_table, fmt_number
from rubricgym.core.safeio import atomic_write
from rubricgym.core.store import TrajectoryStore
from rubricgym.core.types import Trajectory
from rubricgym.rewards.cache import JudgeCache
from rubricgym.rewards.judges import Judge
from rubricgym.rewards.panel import PanelJudge
from rubricgym.rewards.path import Endpoint, JudgeSettings, RewardPath, choose_rubric
from rubricgym.rewards.path import build_judges as judges_of
from rubricgym.rewards.prm import Breakdown
from rubricgym.rewards.rubric import Rubric, RubricError, load_rubric

SCORES = "scores.jsonl"
SUMMARY = "scores_summary.json"
CACHE = "judge_cache.sqlite"
MAX_TIMEOUT_S = 3600.0
"""Longest a single judge request may be given (an hour)."""


def rubric_for(traj: Trajectory, override: Rubric | None, entries: Mapping[str, Rubric] | None = None) -> Rubric:
    """``override``, else the task's own rubric, else the run's rubric for its env (``entries``: what a training
    run recorded), else the env's default rubric (``rewards.path.choose_rubric``)."""
    return choose_rubric(traj.task, entry=(entries or {}).get(traj.task.env_id), override=override)


def run_rubrics(meta: Mapping[str, Any]) -> dict[str, Rubric]:
    """The rubric per env id a training run scored its rollouts with (``run.json``'s ``rubrics``)."""
    return {env_id: load_rubric(r) for env_id, r in (meta.get("rubrics") or {}).items()}


def trained_totals(trajs: Sequence[Trajectory], key: str = "rubric") -> list[float | None]:
    """The total the trainer gave each rollout it trained on (``metrics.train_step``; ``rewards[key]``), else
    ``None``; also ``None`` for a rollout masked for a failed verdict (``rewards[key/errors]``), which did not train
    and whose failed verdicts are judged afresh. Read them before scoring: scoring writes new totals onto them."""
    return [
        t.rewards.get(key) if "train_step" in t.metrics and not t.rewards.get(f"{key}/errors") else None for t in trajs
    ]


def reproduced(trained: Sequence[float | None], breakdowns: Sequence[Breakdown]) -> dict[str, Any]:
    """How many trained rollouts get the same total now: the check that what ``score`` reports is what training
    optimised."""
    diffs = [
        abs(a - b.total) if b.total is not None else math.inf
        for a, b in zip(trained, breakdowns, strict=True)
        if a is not None
    ]
    return {"trained": len(diffs), "identical": sum(d < 1e-9 for d in diffs), "max_abs_diff": max(diffs, default=0.0)}


def run_judge(meta: Mapping[str, Any]) -> JudgeSettings | None:
    """The judge a training run scored with (``run.json``'s ``judge``), so ``score`` asks it the same questions
    (its settings are part of every verdict's cache key) and reuses the run's verdict cache."""
    recorded = meta.get("judge")
    return JudgeSettings.model_validate({**recorded, "cache": None}) if recorded else None


def check_names(
    trajs: list[Trajectory], override: Rubric | None, entries: Mapping[str, Rubric] | None = None
) -> list[str]:
    """Every check name a rubric used for ``trajs`` gives that its env does not have (empty when all exist)."""
    from rubricgym.core.registry import spec
    from rubricgym.rewards.validate import unknown_checks

    seen: set[tuple[str, str]] = set()
    problems: list[str] = []
    for t in trajs:
        rubric = rubric_for(t, override, entries)
        if (t.task.env_id, rubric.hash) in seen:
            continue
        seen.add((t.task.env_id, rubric.hash))
        problems += unknown_checks(rubric, spec(t.task.env_id).load().checks(), t.task.env_id)
    return problems


def build_judges(
    judge_url: str | None,
    judge_model: str | None,
    panel: list[str],
    panel_method: str,
    cache: JudgeCache | None,
    timeout_s: float = 60.0,
    max_retries: int = 3,
    concurrency: int = 8,
) -> list[Judge]:
    """``CheckJudge`` first, then an ``LLMJudge`` (``--judge``) or a ``PanelJudge`` of them (``--panel``): the
    command-line face of ``rewards.path.build_judges``, which training configs use too."""
    members = []
    for item in panel:
        url, sep, model = item.rpartition("=")
        if not sep or not url or not model:
            raise typer.BadParameter(f"--panel takes URL=MODEL, got {item!r}")
        members.append(Endpoint(base_url=url, model=model))
    if judge_url and not judge_model:
        raise typer.BadParameter("--judge needs --judge-model (the model name the server serves)")
    if panel_method not in ("mean", "majority"):
        raise typer.BadParameter(f"--panel-method takes majority or mean, got {panel_method!r}")
    settings = JudgeSettings(
        base_url=judge_url,
        model=judge_model if judge_url else None,
        panel=members,
        panel_method=panel_method,
        timeout_s=timeout_s,
        max_retries=max_retries,
        concurrency=concurrency,
        cache=None,
    )
    return judges_of(settings, cache=cache)


async def score_run(
    trajs: list[Trajectory],
    rubric: Rubric | None,
    judges: list[Judge],
    concurrency: int = 8,
    entries: Mapping[str, Rubric] | None = None,
) -> list[Breakdown]:
    """Score ``trajs`` (each with the rubric ``choose_rubric`` picks, ``entries`` giving an env's run rubric) and
    return breakdowns in input order."""
    entries = entries or {}
    by_env: dict[str, list[int]] = {}
    for i, t in enumerate(trajs):
        by_env.setdefault(t.task.env_id, []).append(i)
    out: dict[int, Breakdown] = {}
    try:
        for env_id, idx in by_env.items():
            path = RewardPath(judges, entry=entries.get(env_id), override=rubric, concurrency=concurrency)
            for i, b in zip(idx, await path.score_many([trajs[i] for i in idx]), strict=True):
                out[i] = b
    finally:
        await RewardPath(judges).aclose()  # the judges every env's path shared, closed once
    return [out[i] for i in range(len(trajs))]


def summarise(breakdowns: list[Breakdown], rubrics: dict[str, Rubric]) -> dict[str, Any]:
    """Per-criterion means, met rates and error counts over a run, plus the total's mean."""
    rows: dict[str, dict[str, Any]] = {}
    for bd in breakdowns:
        rubric = rubrics[bd.rubric_hash]
        for v in bd.verdicts:
            c = next((c for c in rubric.criteria if c.id == v.criterion_id), None)
            row = rows.setdefault(
                v.criterion_id,
                {
                    "criterion": v.criterion_id,
                    "level": c.level if c else "-",
                    "scope": c.scope if c else "-",
                    "judged_by": c.judged_by if c else "llm",
                    "scores": [],
                    "met": 0,
                    "not_applicable": 0,
                    "errors": 0,
                    "cached": 0,
                },
            )
            if v.ok and not v.applicable:
                row["not_applicable"] += 1
            elif v.ok:
                row["scores"].append(float(v.score or 0.0))
                row["met"] += bool(v.met)
                row["cached"] += v.cached
            else:
                row["errors"] += 1
    criteria = []
    for row in rows.values():
        scores = row.pop("scores")
        n = len(scores)
        criteria.append(
            {**row, "n": n, "mean": sum(scores) / n if n else None, "met_rate": row["met"] / n if n else None}
        )
    totals = [b.total for b in breakdowns if b.total is not None]
    return {
        "trajectories": len(breakdowns),
        "total_mean": sum(totals) / len(totals) if totals else None,
        "valid": sum(b.valid for b in breakdowns),
        "errors": sum(b.n_errors for b in breakdowns),
        "rubrics": [
            {"id": r.id, "version": r.version, "hash": h, "method": r.aggregation.method} for h, r in rubrics.items()
        ],
        "criteria": criteria,
    }


def criterion_table(summary: dict[str, Any], title: str = "rubric scores") -> Table:
    table = Table(title=title)
    for col, just in (
        ("criterion", "left"),
        ("level", "left"),
        ("scope", "left"),
        ("judged by", "left"),
        ("n", "right"),
        ("mean", "right"),
        ("met", "right"),
        ("n/a", "right"),
        ("errors", "right"),
        ("cached", "right"),
    ):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in summary["criteria"]:
        table.add_row(
            r["criterion"],
            r["level"],
            r["scope"],
            r["judged_by"],
            str(r["n"]),
            fmt_number(r["mean"]),
            fmt_number(r["met_rate"]),
            str(r.get("not_applicable", 0)),
            f"[red]{r['errors']}[/red]" if r["errors"] else "0",
            str(r["cached"]),
        )
    return table


def _write_atomic(path: Path, text: str) -> None:
    atomic_write(path, text)  # a fresh temporary renamed over: never written through a link


def score_command(
    run_dir: Annotated[Path, typer.Argument(help="run directory holding trajectories.jsonl")],
    rubric: Annotated[Path | None, typer.Option(help="rubric file (.yaml/.json/.toml); default: the env's")] = None,
    judge: Annotated[
        str | None,
        typer.Option(help="OpenAI-compatible base URL of an LLM judge, e.g. http://127.0.0.1:8000/v1"),
    ] = None,
    judge_model: Annotated[str | None, typer.Option(help="model name the judge server serves")] = None,
    panel: Annotated[list[str] | None, typer.Option(help="panel member URL=MODEL (repeat)")] = None,
    panel_method: Annotated[str, typer.Option(help="majority or mean")] = "majority",
    cache: Annotated[Path | None, typer.Option(help=f"verdict cache (default RUN_DIR/{CACHE})")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="judge everything afresh")] = False,
    concurrency: Annotated[int, typer.Option(help="trajectories scored at once", callback=bounded(1, 1024))] = 8,
    timeout: Annotated[
        float, typer.Option(help="seconds per judge request", callback=bounded(0.1, MAX_TIMEOUT_S))
    ] = 60.0,
    max_retries: Annotated[int, typer.Option(help="judge request retries", callback=bounded(0, 100))] = 3,
) -> None:
    """Score a run's trajectories with a rubric; write scores.jsonl + scores_summary.json; print a table."""
    console = Console()
    if not (Path(run_dir) / "trajectories.jsonl").is_file():  # never create a misspelled directory
        console.print(
            f"[red]{run_dir} has no trajectories.jsonl[/red]: is it a run directory written by `rubricgym run`?",
            soft_wrap=True,
        )
        raise typer.Exit(1)
    store = TrajectoryStore(run_dir)
    trajs = store.load()
    if not trajs:
        console.print(f"[red]no trajectories in {store.path}[/red] ({store.report})")
        raise typer.Exit(1)
    try:
        override = Rubric.load(rubric) if rubric else None
    except RubricError as e:
        console.print(f"[red]{e}[/red]", soft_wrap=True)
        raise typer.Exit(2) from None
    meta = store.meta()  # what a training run recorded: its rubrics, judge and reward key
    try:
        entries = run_rubrics(meta)
        problems = check_names(trajs, override, entries)
    except RubricError as e:
        problems = [str(e)]
    if problems:  # before anything is scored or scores.jsonl is touched
        console.print("[red]" + escape("\n".join(problems)) + "[/red]", soft_wrap=True)
        raise typer.Exit(2)
    recorded = run_judge(meta) if not (judge or panel) else None
    run_cache = (meta["judge"].get("cache") if recorded else None) or CACHE
    judge_cache = None if no_cache else JudgeCache(cache or Path(run_dir) / run_cache)
    if recorded is not None:
        console.print(f"judging with the run's own judge ({', '.join(e.model for e in recorded.endpoints())})")
        judges = judges_of(recorded, cache=judge_cache)
    else:
        judges = build_judges(judge, judge_model, panel or [], panel_method, judge_cache, timeout, max_retries)
    trained = trained_totals(trajs, meta.get("reward_key", "rubric"))
    breakdowns = asyncio.run(score_run(trajs, override, judges, concurrency, entries))
    rubrics = {}
    for t in trajs:
        r = rubric_for(t, override, entries)
        rubrics[r.hash] = r
    _write_atomic(Path(run_dir) / SCORES, "".join(b.model_dump_json() + "\n" for b in breakdowns))
    summary = summarise(breakdowns, rubrics)
    if judge_cache is not None:
        summary["cache"] = {
            "path": str(judge_cache.path),
            "hits": judge_cache.hits,
            "misses": judge_cache.misses,
        }
    for j in judges:
        if isinstance(j, PanelJudge):
            summary["panel_agreement"] = j.agreement().__dict__
    again = reproduced(trained, breakdowns)
    if again["trained"]:
        summary["training_totals"] = again
    _write_atomic(Path(run_dir) / SUMMARY, json.dumps(summary, indent=2))
    _report(console, run_dir, summary, breakdowns, override is not None)


def _report(
    console: Console, run_dir: Path, summary: dict[str, Any], breakdowns: list[Breakdown], overridden: bool
) -> None:
    """Print what ``score`` found: the criterion table, mean totals per agent, whether training-time totals came
    out the same, failed verdicts."""
    table = criterion_table(summary, f"{run_dir}: {summary['trajectories']} trajectories")
    console.print(fit_table(console, table, ["criterion"]))
    by_agent: dict[str, list[float]] = defaultdict(list)
    for b in breakdowns:
        if b.total is not None:
            by_agent[b.agent].append(b.total)
    for agent, totals in sorted(by_agent.items()):
        console.print(f"agent [bold]{agent}[/bold]: mean total {sum(totals) / len(totals):.3f} over {len(totals)}")
    again = summary.get("training_totals")
    if again:
        same = again["identical"] == again["trained"]
        console.print(
            f"training-time totals reproduced: [{'green' if same else 'yellow'}]{again['identical']} of "
            f"{again['trained']}[/] trained rollouts (largest difference {again['max_abs_diff']:.3g})"
            + ("" if same or not overridden else "; --rubric replaces the rubric they were trained on")
        )
    if summary["errors"]:
        console.print(
            f"[yellow]{summary['errors']} verdict(s) failed[/yellow]: they are left out of the totals "
            f"({summary['trajectories'] - summary['valid']} trajectories need masking); see {SCORES}"
        )
    console.print(f"wrote {Path(run_dir) / SCORES} and {Path(run_dir) / SUMMARY}")


def register(app: typer.Typer) -> None:
    """Add ``score``, ``audit-judge`` and ``rubric-versions`` to ``app``."""
    from rubricgym.rewards.audit_cli import audit_command
    from rubricgym.rewards.versions_cli import versions_command

    app.command("score")(score_command)
    app.command("audit-judge")(audit_command)
    app.command("rubric-versions")(versions_command)
