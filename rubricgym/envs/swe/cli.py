"""``rubricgym swe build`` (bug-injection tasks from a package), ``swe import`` (SWE-bench records) to a portable
tasks file, and ``swe record`` (a SWE-bench record from a bug-fix commit).

Added to the main app by ``register(app)``. The tasks file (with its ``<stem>.data/`` folder) is what ``swe-v0``
takes as ``instances``::

    rubricgym swe build inflection==0.5.1 --n 4 --out tasks.jsonl
    rubricgym swe import records.jsonl --repos clones/ --out tasks.jsonl
    rubricgym swe record clones/project HEAD --out records.jsonl
    rubricgym run swe-v0 --env-arg instances=tasks.jsonl --agent oracle --tasks 4 --out runs/swe
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from rubricgym.core.bounds import MAX_SEED, bounded
from rubricgym.core.progress import progress

swe_app = typer.Typer(
    help="Software-engineering tasks: build them from your own package or import SWE-bench records.",
    no_args_is_help=True,
)
WheelhouseOption = Annotated[
    Path | None,
    typer.Option(help="folder of wheels to install test dependencies from (no index is used then)"),
]
IndexUrlOption = Annotated[str | None, typer.Option(help="package index for test dependencies (default: pip's own)")]
WithOption = Annotated[
    list[str] | None,
    typer.Option("--with", help="extra requirement to install for the tests (repeatable), e.g. --with 'attrs>=22'"),
]


@swe_app.command("build")
def build(
    package: Annotated[str, typer.Argument(help="PACKAGE[==VERSION] from PyPI, a project directory or an sdist")],
    out: Annotated[Path, typer.Option("--out", help="tasks file to write (JSONL of SWE-bench-format records)")],
    n: Annotated[
        int, typer.Option("--n", help="tasks wanted (fewer when fewer mutants are caught)", callback=bounded(1, 10_000))
    ] = 3,
    seed: Annotated[int, typer.Option(help="which mutants are tried first", callback=bounded(0, MAX_SEED))] = 0,
    max_tries: Annotated[int, typer.Option(help="mutants to try at most", callback=bounded(1, 100_000))] = 30,
    timeout_factor: Annotated[
        float, typer.Option(help="a mutant's test run may take this x the suite's time", callback=bounded(1.0, 1000.0))
    ] = 5.0,
    backend: Annotated[str, typer.Option(help="sandbox: bwrap | docker")] = "bwrap",
    docker_url: Annotated[str | None, typer.Option(help="Docker API URL for --backend docker")] = None,
    wheelhouse: WheelhouseOption = None,
    index_url: IndexUrlOption = None,
    with_: WithOption = None,
) -> None:
    """Inject bugs into PACKAGE's library code; keep those its own tests catch; write them as tasks."""
    from rubricgym.envs.swe.inject import BuildError, BuildProgress, build_tasks
    from rubricgym.envs.swe.pypi import SourceUnavailable
    from rubricgym.envs.swe.sandbox import SandboxError, get_backend
    from rubricgym.envs.swe.taskfile import save_instances

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
                    wheelhouse=wheelhouse,
                    index_url=index_url,
                    extra_requirements=with_,
                )
            )
        except (BuildError, SourceUnavailable, SandboxError, FileNotFoundError) as e:
            console.print(f"[bold red]error:[/] {e}", soft_wrap=True)
            raise typer.Exit(1) from None
    save_instances(tasks, out)
    short = f" (fewer than the {n} asked: raise --max-tries or try another --seed)" if len(tasks) < n else ""
    Console().print(
        f"wrote {len(tasks)} task(s) to {out}{short}\n"
        f"run them: rubricgym run swe-v0 --env-arg instances={out} --agent oracle --tasks {len(tasks)} "
        f"--out runs/swe",
        soft_wrap=True,
    )


@swe_app.command("import")
def import_(
    records: Annotated[Path, typer.Argument(help="SWE-bench records, one JSON object per line")],
    out: Annotated[Path, typer.Option("--out", help="tasks file to write (its snapshots go to <stem>.data/)")],
    repos: Annotated[
        Path | None,
        typer.Option(
            help="folder of git clones (owner/name, owner__name or name); nothing outside it is read. Without it, "
            "repo is a path inside the current directory"
        ),
    ] = None,
    wheelhouse: WheelhouseOption = None,
    index_url: IndexUrlOption = None,
    with_: WithOption = None,
    keep_rejected: Annotated[bool, typer.Option(help="also write records whose gold patch does not verify")] = False,
    timeout: Annotated[
        float, typer.Option(help="seconds a test run may take", callback=bounded(1.0, 86_400.0))
    ] = 300.0,
    backend: Annotated[str, typer.Option(help="sandbox: bwrap | docker")] = "bwrap",
    docker_url: Annotated[str | None, typer.Option(help="Docker API URL for --backend docker")] = None,
) -> None:
    """Import SWE-bench records over local clones: install each repository's test dependencies, check in the
    sandbox that the gold patch resolves FAIL_TO_PASS and that PASS_TO_PASS hold, write the verified tasks.

    Nothing of a repository runs on the host: git reads only its objects, dependencies install and build in the
    sandbox. A record that cannot be imported is reported and skipped; the rest are written, and the command
    then exits 1 listing the records left out."""
    from rubricgym.envs.swe.clones import RecordError
    from rubricgym.envs.swe.sandbox import SandboxError, get_backend
    from rubricgym.envs.swe.swebench import Imported, import_swebench
    from rubricgym.envs.swe.taskfile import save_instances

    console = Console(stderr=True)
    try:
        sandbox = get_backend(backend, **({"base_url": docker_url} if backend == "docker" else {}))
    except (ValueError, RuntimeError) as e:
        console.print(f"[bold red]error:[/] {e}", soft_wrap=True)
        raise typer.Exit(2) from None
    if not records.is_file():
        console.print(f"[bold red]error:[/] {records}: no such file (give a JSONL file of SWE-bench records)")
        raise typer.Exit(2)
    total = _count_records(records)
    with progress(console, f"swe import {records.name}", total, unit="records") as shown:

        def show(i: int, total: int, item: Imported) -> None:
            v = item.verdict
            shown.line(f"{'✓' if v.ok else '✗'} {v.line()}")
            shown.advance(status=f"last: {v.instance_id}")

        try:
            results = asyncio.run(
                import_swebench(
                    records,
                    repos,
                    wheelhouse=wheelhouse,
                    index_url=index_url,
                    extra_requirements=with_,
                    backend=sandbox,
                    timeout=timeout,
                    on_record=show,
                )
            )
        except (RecordError, SandboxError, FileNotFoundError) as e:
            console.print(f"[bold red]error:[/] {escape(str(e))}", soft_wrap=True)
            raise typer.Exit(1) from None
    kept = [r.instance for r in results if r.instance is not None and (r.verdict.ok or keep_rejected)]
    rejected = [r.verdict for r in results if not r.verdict.ok]
    left_out = [r.verdict for r in results if r.instance is None or not (r.verdict.ok or keep_rejected)]
    listing = "".join(f"\n  {escape(v.line())}" for v in left_out)
    if not kept:
        console.print(
            f"[bold red]error:[/] none of the {len(results)} record(s) verified; nothing written{listing}",
            soft_wrap=True,
        )
        raise typer.Exit(1)
    save_instances([k for k in kept if k is not None], out)
    dropped = f", {len(rejected)} rejected and {'kept (--keep-rejected)' if keep_rejected else 'dropped'}"
    Console().print(
        f"wrote {len(kept)} task(s) to {out}{dropped if rejected else ''}\n"
        f"run them: rubricgym run swe-v0 --env-arg instances={out} --agent oracle --tasks {len(kept)} --out runs/swe",
        soft_wrap=True,
    )
    if left_out:
        console.print(
            f"[bold red]error:[/] {len(left_out)} of {len(results)} record(s) not imported (the others were "
            f"written):{listing}",
            soft_wrap=True,
        )
        raise typer.Exit(1)


@swe_app.command("record")
def record(
    repo: Annotated[Path, typer.Argument(help="folder of a local git clone of the project")],
    commit: Annotated[
        str | None, typer.Argument(help="the bug-fix commit (hash, branch, tag or HEAD~N); its parent is the base")
    ] = None,
    fix: Annotated[
        str | None, typer.Option("--fix", help="a span A..B instead of COMMIT: A is the buggy commit, B the fixed one")
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="JSONL file the record is written to")] = Path("records.jsonl"),
    append: Annotated[bool, typer.Option(help="add the record to --out instead of replacing the file")] = False,
    problem: Annotated[
        Path | None, typer.Option(help="file holding the problem statement (default: the commit message)")
    ] = None,
    instance_id: Annotated[
        str | None, typer.Option("--id", help="the record's instance_id (default NAME-COMMIT)")
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="the record's repo (default: the clone folder's name, found by --repos PARENT)")
    ] = None,
    tests: Annotated[
        list[str] | None,
        typer.Option(
            "--tests", help="pytest selector to run (repeatable; default the whole suite), e.g. --tests tests/"
        ),
    ] = None,
    wheelhouse: WheelhouseOption = None,
    index_url: IndexUrlOption = None,
    with_: WithOption = None,
    timeout: Annotated[
        float, typer.Option(help="seconds a test run may take", callback=bounded(1.0, 86_400.0))
    ] = 300.0,
    backend: Annotated[str, typer.Option(help="sandbox: bwrap | docker")] = "bwrap",
    docker_url: Annotated[str | None, typer.Option(help="Docker API URL for --backend docker")] = None,
) -> None:
    """Turn a bug-fix commit of a local clone into a SWE-bench record: base commit, gold patch and test patch
    (split by path), FAIL_TO_PASS / PASS_TO_PASS from running the tests before and after the fix in the sandbox,
    the problem statement from the commit message or --problem FILE. `swe import` then verifies it."""
    import json

    from rubricgym.envs.swe.clones import RecordError
    from rubricgym.envs.swe.commit import record_commit
    from rubricgym.envs.swe.sandbox import SandboxError, get_backend

    console = Console(stderr=True)
    if (commit is None) == (fix is None):
        console.print("[bold red]error:[/] give either COMMIT (a bug-fix commit) or --fix A..B, not both or neither")
        raise typer.Exit(2)
    statement = None
    if problem is not None:
        try:
            statement = problem.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as e:
            console.print(f"[bold red]error:[/] --problem {problem}: {e} (give a UTF-8 text file)", soft_wrap=True)
            raise typer.Exit(2) from None
    try:
        sandbox = get_backend(backend, **({"base_url": docker_url} if backend == "docker" else {}))
    except (ValueError, RuntimeError) as e:
        console.print(f"[bold red]error:[/] {e}", soft_wrap=True)
        raise typer.Exit(2) from None
    with progress(console, f"swe record {repo.name} {commit or fix}") as shown:
        try:
            made = asyncio.run(
                record_commit(
                    repo,
                    commit,
                    fix_range=fix,
                    problem=statement,
                    instance_id=instance_id,
                    repo=name,
                    tests=tests,
                    backend=sandbox,
                    wheelhouse=wheelhouse,
                    index_url=index_url,
                    extra_requirements=with_,
                    timeout=timeout,
                    on_stage=lambda what: shown.phase(f"swe record {repo.name}: {what}"),
                )
            )
        except (RecordError, SandboxError, OSError) as e:
            console.print(f"[bold red]error:[/] {escape(str(e))}", soft_wrap=True)
            raise typer.Exit(1) from None
    rec = made.record
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a" if append else "w", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")
    for note in made.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
    clones = Path(repo).expanduser().resolve().parent
    Console().print(
        f"recorded {rec['instance_id']}: base {rec['base_commit'][:12]}, FAIL_TO_PASS {len(rec['FAIL_TO_PASS'])}, "
        f"PASS_TO_PASS {len(rec['PASS_TO_PASS'])} (before the fix: {made.before.summary()}; after: "
        f"{made.after.summary()})\n{'added to' if append else 'wrote'} {out}\n"
        f"verify and import it: rubricgym swe import {out} --repos {clones} --out tasks.jsonl",
        soft_wrap=True,
        highlight=False,
    )


def _count_records(path: Path) -> int | None:
    """How many records (non-blank lines) the file holds, for the progress total; ``None`` when unreadable (the
    import then says why)."""
    try:
        with path.open("rb") as f:
            return sum(1 for line in f if line.strip())
    except OSError:
        return None


def register(app: typer.Typer) -> None:
    """Add the ``swe`` command group (``swe build``, ``swe import``, ``swe record``) to ``app``."""
    app.add_typer(swe_app, name="swe")
