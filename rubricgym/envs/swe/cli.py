"""``rubricgym swe build``: bug-injection tasks from a PyPI package (or a local project / sdist) to a JSONL file.

Added to the main app by ``register(app)``. The tasks file is what ``swe-v0`` takes as ``instances``::

    rubricgym swe build inflection==0.5.1 --n 4 --out tasks.jsonl
    rubricgym run swe-v0 --env-arg instances=tasks.jsonl --agent oracle --tasks 4 --out runs/swe
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

swe_app = typer.Typer(help="Software-engineering tasks: build them from your own package.", no_args_is_help=True)


@swe_app.command("build")
def build(
    package: Annotated[str, typer.Argument(help="PACKAGE[==VERSION] from PyPI, a project directory or an sdist")],
    out: Annotated[Path, typer.Option("--out", help="tasks file to write (JSONL of SWE-bench-format records)")],
    n: Annotated[int, typer.Option("--n", help="tasks wanted (fewer when fewer mutants are caught)")] = 3,
    seed: Annotated[int, typer.Option(help="which mutants are tried first")] = 0,
    max_tries: Annotated[int, typer.Option(help="mutants to try at most")] = 30,
    timeout_factor: Annotated[float, typer.Option(help="a mutant's test run may take this x the suite's time")] = 5.0,
    backend: Annotated[str, typer.Option(help="sandbox: bwrap | docker")] = "bwrap",
    docker_url: Annotated[str | None, typer.Option(help="Docker API URL for --backend docker")] = None,
) -> None:
    """Inject bugs into PACKAGE's library code; keep those its own tests catch; write them as tasks."""
    from rubricgym.envs.swe.inject import BuildError, BuildProgress, build_tasks
    from rubricgym.envs.swe.pypi import SourceUnavailable
    from rubricgym.envs.swe.sandbox import SandboxError, get_backend

    console = Console(stderr=True)
    if n < 1 or max_tries < 1 or timeout_factor <= 0:
        console.print("[bold red]error:[/] --n and --max-tries must be >= 1 and --timeout-factor > 0")
        raise typer.Exit(2)
    try:
        sandbox = get_backend(backend, **({"base_url": docker_url} if backend == "docker" else {}))
    except (ValueError, RuntimeError) as e:
        console.print(f"[bold red]error:[/] {e}", soft_wrap=True)
        raise typer.Exit(2) from None
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
    )

    with bar:
        task_id = bar.add_task(f"swe build {package}", total=max_tries, status="fetching and running the tests")

        def show(p: BuildProgress) -> None:
            bar.update(
                task_id,
                completed=p.tried if p.kept < p.n else max_tries,
                status=f"mutants tried {p.tried}/{p.max_tries} · kept {p.kept}/{p.n} · suite "
                f"{p.baseline_s:.1f} s, limit {p.mutant_timeout_s:.1f} s/mutant · {p.last}",
            )

        try:
            tasks = asyncio.run(
                build_tasks(
                    package,
                    n=n,
                    seed=seed,
                    max_tries=max_tries,
                    backend=sandbox,
                    timeout_factor=timeout_factor,
                    on_progress=show,
                )
            )
        except (BuildError, SourceUnavailable, SandboxError) as e:
            console.print(f"[bold red]error:[/] {e}", soft_wrap=True)
            raise typer.Exit(1) from None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(t.model_dump_json() + "\n" for t in tasks), encoding="utf-8")
    short = f" (fewer than the {n} asked: raise --max-tries or try another --seed)" if len(tasks) < n else ""
    Console().print(
        f"wrote {len(tasks)} task(s) to {out}{short}\n"
        f"run them: rubricgym run swe-v0 --env-arg instances={out} --agent oracle --tasks {len(tasks)} "
        f"--out runs/swe",
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    """Add the ``swe`` command group (``swe build``) to ``app``."""
    app.add_typer(swe_app, name="swe")
