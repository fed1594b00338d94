"""``rubricgym suites``, ``suite show``, ``eval`` and ``arena``: added to the main app by ``register(app)``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from rubricgym.core.bounds import bounded
from rubricgym.core.fmt import fmt_number
from rubricgym.core.progress import progress

console = Console()
err = Console(stderr=True)


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


def _suite(name: str):  # noqa: ANN202
    from rubricgym.suites.suite import SuiteError, load_suite

    try:
        return load_suite(name)
    except SuiteError as e:
        _fail(str(e))


def _ci(ci, fmt: str = ".3f") -> str:  # noqa: ANN001
    return "–" if not ci else f"[{format(ci[0], fmt)}, {format(ci[1], fmt)}]"


def logged_phase(what: str, suite: Any, enabled: bool = True) -> Any:
    """Where output is a log (not a terminal), a line when ``what`` starts and a heartbeat while it runs (the judging
    phase counts nothing): the episodes' own progress comes from the rollouts; in a terminal their bars show."""
    tasks = sum(len(suite.tasks(e.name)) for e in suite.entries)
    return progress(
        console, f"{what} ({len(suite.entries)} entries, {tasks} tasks)", enabled=enabled and not console.is_terminal
    )


def with_solve_rates(rep: dict[str, Any], suite: Any, out: Path) -> list[str]:
    """Put each agent's solve rate (from the trajectories the arena stored) beside its rating in ``rep`` and in
    the arena's JSON and HTML; returns the warnings where a clearly higher-rated agent solves fewer tasks."""
    from rubricgym.arena.arena import ARENA_HTML, ARENA_JSON
    from rubricgym.arena.evaluate import stored_solve_rate
    from rubricgym.arena.report import arena_html, rank_warnings
    from rubricgym.core.safeio import atomic_write

    for a in rep["agents"]:
        solved, ci = stored_solve_rate(suite, out / "trajectories" / a["name"])
        a["solved"], a["solved_ci"] = solved, list(ci) if ci is not None else None
    rep["outcome_warnings"] = rank_warnings(rep["agents"], " / ".join(dict.fromkeys(e.env for e in suite.entries)))
    atomic_write(out / ARENA_JSON, json.dumps(rep, indent=2))
    atomic_write(out / ARENA_HTML, arena_html(rep))
    return rep["outcome_warnings"]


def register(app: typer.Typer) -> None:  # noqa: C901 (registers nested command functions)
    suite_app = typer.Typer(help="Env suites: named, versioned lists of envs with their tasks.", no_args_is_help=True)
    app.add_typer(suite_app, name="suite")

    @app.command("suites")
    def suites(as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False) -> None:
        """List the built-in suites (YAML files in rubricgym/suites/builtin/)."""
        from rubricgym.suites.suite import builtin_suites, load_suite

        rows: list[dict[str, Any]] = []
        for name in builtin_suites():
            s = load_suite(name, check_envs=False)
            rows.append(
                {
                    "name": s.name,
                    "version": s.version,
                    "entries": [e.name for e in s.entries],
                    "description": s.description,
                }
            )
        if as_json:
            print(json.dumps(rows, indent=2))
            return
        table = Table(title="rubricgym suites")
        for col in ("name", "version", "entries", "description"):
            table.add_column(col)
        for r in rows:
            table.add_row(r["name"], r["version"], ", ".join(r["entries"]), r["description"])
        console.print(table)

    @suite_app.command("show")
    def suite_show(
        name: Annotated[str, typer.Argument(help="a built-in suite name or a suite YAML file")],
        as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    ) -> None:
        """Print a suite's entries: env, kwargs, split, tasks, weight, rubric."""
        s = _suite(name)
        if as_json:
            print(json.dumps(s.model_dump(mode="json"), indent=2))
            return
        table = Table(title=f"suite {s.name} v{s.version}: {s.description}")
        for col in ("entry", "env", "kwargs", "split", "tasks", "seed", "weight", "rubric"):
            table.add_column(col)
        for e in s.entries:
            table.add_row(
                e.name,
                e.env,
                json.dumps(e.kwargs),
                e.split,
                str(e.tasks),
                str(e.seed),
                f"{e.weight:g}",
                "env default" if e.rubric is None else str(e.rubric)[:40],
            )
        console.print(table)

    @app.command("eval")
    def eval_cmd(
        suite: Annotated[str, typer.Option("--suite", help="built-in suite name or suite YAML file")],
        out: Annotated[Path, typer.Option("--out", help="output dir (resumed if it exists)")],
        agent: Annotated[str, typer.Option(help="a scripted agent name, local, openai or checkpoint:PATH")] = "oracle",
        base_url: Annotated[str | None, typer.Option(help="endpoint for --agent openai")] = None,
        model: Annotated[str | None, typer.Option(help="model name (openai) or model dir/name (local)")] = None,
        concurrency: Annotated[int, typer.Option(help="episodes in flight", callback=bounded(1, 4096))] = 4,
        judge: Annotated[str | None, typer.Option(help="OpenAI-compatible LLM judge for judge criteria")] = None,
        judge_model: Annotated[str | None, typer.Option(help="model name at --judge")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    ) -> None:
        """Evaluate one agent on every entry of a suite: per-entry and overall reward with bootstrap CIs."""
        from rubricgym.arena.agents import AgentFactory, AgentsFileError, preflight, spec_from_cli
        from rubricgym.arena.evaluate import REPORT_HTML, evaluate_suite, rubric_judges

        s = _suite(suite)
        try:
            spec = spec_from_cli(agent, base_url, model)
            asyncio.run(preflight([spec], [e.env for e in s.entries], "--agent"))
        except AgentsFileError as e:
            _fail(str(e))
        judges = rubric_judges(judge, judge_model, (), out / "judge_cache.sqlite")
        with logged_phase(f"eval: {spec.name} on suite {s.name}", s, enabled=not as_json):
            report = asyncio.run(
                evaluate_suite(
                    s,
                    AgentFactory([spec]),
                    spec.name,
                    out,
                    judges=judges,
                    concurrency=concurrency,
                    progress=not as_json,
                )
            )
        if as_json:
            print(json.dumps(report.model_dump(mode="json", exclude={"rows"}), indent=2))
        else:
            table = Table(title=f"{agent} on suite {s.name} v{s.version}")
            for col in ("entry", "scored", "solved", "95% CI", "rubric reward", "95% CI", "steps", "judge errors"):
                table.add_column(col, justify="left" if col == "entry" else "right")
            for row in report.entries:
                table.add_row(
                    row.entry,
                    f"{row.scored}/{row.tasks}",
                    fmt_number(row.success, ".1%", "–"),
                    _ci(row.success_ci, ".1%"),
                    fmt_number(row.reward, ".3f", "–"),
                    _ci(row.reward_ci),
                    fmt_number(row.steps, ".1f", "–"),
                    str(row.judge_errors),
                )
            table.add_row(
                "overall",
                "",
                fmt_number(report.success, ".1%", "–"),
                _ci(report.success_ci, ".1%"),
                fmt_number(report.reward, ".3f", "–"),
                _ci(report.reward_ci),
                "",
                str(report.judge_errors),
                style="bold",
            )
            console.print(table)
            console.print(f"report: {out / REPORT_HTML}")
        failed = sum(len(e.failed_tasks) for e in report.entries)
        if failed:
            _fail(f"{failed} episode(s) failed; finished work is kept, run again to retry them", code=1)

    @app.command("arena")
    def arena_cmd(
        suite: Annotated[str, typer.Option("--suite", help="built-in suite name or suite YAML file")],
        agents: Annotated[Path, typer.Option("--agents", help="agents YAML file")],
        out: Annotated[Path, typer.Option("--out", help="output dir (resumed and extended if it exists)")],
        topology: Annotated[
            str, typer.Option(help="a name in rubricgym.suites.topology.TOPOLOGIES: round_robin, swiss, anchor, ...")
        ] = "round_robin",
        judge_mode: Annotated[str, typer.Option(help="rubric (env checks; --judge for judge criteria) | llm")] = (
            "rubric"
        ),
        judge: Annotated[str | None, typer.Option(help="OpenAI-compatible judge endpoint")] = None,
        judge_model: Annotated[str | None, typer.Option(help="model name at --judge")] = None,
        panel: Annotated[list[str] | None, typer.Option(help="panel member URL=MODEL (repeat)")] = None,
        concurrency: Annotated[int, typer.Option(help="episodes in flight", callback=bounded(1, 4096))] = 4,
        resamples: Annotated[
            int, typer.Option(help="bootstrap resamples over tasks", callback=bounded(1, 100_000))
        ] = 300,
    ) -> None:
        """Rank agents on a suite: pairwise judged matches, Bradley-Terry + bootstrap CIs, Elo, HTML report."""
        from rubricgym.arena.agents import AgentsFileError, load_agents
        from rubricgym.arena.arena import ARENA_HTML, ARENA_JSON, run_arena

        s = _suite(suite)
        try:
            specs = load_agents(agents)
            with logged_phase(f"arena: {len(specs)} agents on suite {s.name}, {topology}", s):
                rep = asyncio.run(
                    run_arena(
                        s,
                        specs,
                        out,
                        topology=topology,
                        judge_mode=judge_mode,
                        judge_url=judge,
                        judge_model=judge_model,
                        panel=panel or (),
                        concurrency=concurrency,
                        resamples=resamples,
                        source=str(agents),
                    )
                )
        except (AgentsFileError, ValueError, OSError) as e:  # OSError: a run file that is a link (UnsafePathError)
            _fail(str(e))
        warnings = with_solve_rates(rep, s, out)
        table = Table(title=f"arena: suite {s.name} · {topology} · {rep['games']} games")
        for col in ("#", "agent", "kind", "solved", "95% CI", "Bradley-Terry", "95% CI", "Elo", "W-T-L"):
            table.add_column(col, justify="left" if col in ("agent", "kind") else "right")
        for k, a in enumerate(rep["agents"]):
            table.add_row(
                str(k + 1),
                a["name"],
                a["kind"],
                fmt_number(a["solved"], ".1%", "–"),
                _ci(a["solved_ci"], ".1%"),
                f"{a['rating']:.0f}",
                f"[{a['ci'][0]:.0f}, {a['ci'][1]:.0f}]",
                f"{a['elo']:.0f}",
                f"{a['wins']}-{a['ties']}-{a['losses']}",
            )
        console.print(table)
        for w in warnings:
            console.print(f"[yellow]{w}", highlight=False)
        bias = rep["position_bias"]
        console.print(
            f"judge calls {rep['judge_calls']} (cached {rep['cached_verdicts']}), position bias "
            f"{'–' if bias is None else f'{bias:+.3f}'}, unjudged {len(rep['unjudged'])}"
        )
        console.print(f"{out / ARENA_JSON} · {out / ARENA_HTML}")
        if rep.get("verdict_cache_skipped"):
            skipped = rep["verdict_cache_skipped"]
            err.print(
                f"[yellow]{len(skipped)} line(s) of {out / 'verdicts.jsonl'} skipped and their games judged again: "
                + "; ".join(skipped[:3]),
                highlight=False,
            )
        if rep["unjudged"]:
            first = rep["unjudged"][0]
            err.print(
                f"[yellow]{len(rep['unjudged'])} game(s) unjudged (not scored), e.g. {first['a']} v "
                f"{first['b']} on {first['entry']}/{first['task_id']}: {first['error']}",
                highlight=False,
            )
