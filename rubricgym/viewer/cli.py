"""``rubricgym view PATH``: added to the main app by ``register(app)``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from rubricgym.core.bounds import bounded

err = Console(stderr=True)


def view_command(
    path: Annotated[Path, typer.Argument(help="a run directory (run, score, train, eval, arena) or a folder of runs")],
    host: Annotated[str, typer.Option(help="interface to serve on (loopback by default: runs are not published)")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="port to serve on", callback=bounded(1, 65535))] = 8765,
    show_hidden: Annotated[
        bool, typer.Option("--show-hidden", help="show tasks' hidden data (answers, ground truth); off by default")
    ] = False,
    export: Annotated[
        Path | None, typer.Option(help="write the pages as static HTML into this directory instead of serving")
    ] = None,
) -> None:
    """Browse runs: episodes with per-step verdicts, training groups, the live dashboard, the arena."""
    from rubricgym.viewer.runs import ViewerError
    from rubricgym.viewer.site import Site

    try:
        site = Site(path, show_hidden=show_hidden)
    except ViewerError as e:
        err.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    if export is not None:
        from rubricgym.viewer.export import export as write

        try:
            counts = write(site, export)
        except NotADirectoryError as e:
            err.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        print(
            f"wrote {counts['runs']} run(s), {counts['episodes']} episode page(s), {counts['groups']} group(s) and "
            f"{counts['matches']} match(es) to {export}; open {export / 'index.html'}"
        )
        return
    import uvicorn

    from rubricgym.viewer.app import create_app

    if host not in ("127.0.0.1", "localhost", "::1"):
        err.print(f"[yellow]warning:[/] serving on {host}: anyone who can reach it can read these runs")
    print(f"rubricgym view: {len(site.runs)} run(s) at http://{host}:{port}/  (Ctrl-C to stop)")
    uvicorn.run(create_app(path, show_hidden=show_hidden), host=host, port=port, log_level="warning")


def register(app: typer.Typer) -> None:
    app.command("view")(view_command)
