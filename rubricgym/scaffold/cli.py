"""``rubricgym init NAME``: scaffold an env package (added to the main app by ``register(app)``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape


def register(app: typer.Typer) -> None:
    app.command("init")(init_cmd)


def init_cmd(
    name: Annotated[str, typer.Argument(help="package name, e.g. price-check (the env id becomes price-check-v0)")],
    family: Annotated[
        str,
        typer.Option(help="tools (an env class with @tools) | web (a page that scores itself) | corpus (deep search)"),
    ] = "tools",
    parent: Annotated[Path, typer.Option("--dir", help="parent folder of the new package folder")] = Path("."),
) -> None:
    """Write a pip-installable env package: env, tools, checks, rubric, scripted agents, tests, README, Dockerfile."""
    from rubricgym.cli import console, fail
    from rubricgym.scaffold import FAMILIES, Names, ScaffoldError, init_package

    chosen = next((f for f in FAMILIES if f == family), None)
    if chosen is None:
        fail(f"unknown --family {family!r}: choose one of {', '.join(FAMILIES)}")
    try:
        root = init_package(name, chosen, parent)
    except ScaffoldError as e:
        fail(str(e))
    names = Names.of(name, family)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    lines = [
        f"created {root}/ ({family} family, env id {names.env_id}): {', '.join(files)}",
        "next:",
        f"  cd {root} && pip install -e '.[server,test]' && pytest",
        f"  rubricgym check {names.env_id}",
        f"  rubricgym run {names.env_id} --agent oracle --tasks 5 --out runs/{name}-oracle",
        f"  rubricgym serve {names.env_id} --port 8000",
    ]
    console.print(escape("\n".join(lines)), highlight=False, soft_wrap=True)
