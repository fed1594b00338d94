"""``rubricgym init NAME``: scaffold an env package (added to the main app by ``register(app)``)."""

from __future__ import annotations

import functools
import importlib.metadata
import re
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

_PRINTABLE_NAME = re.compile(r"[a-z][a-z0-9-]*")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a new package the CLI writes, beyond ``Names.of``'s rules: a character a package name
    never holds (``re``'s ``$`` lets a trailing newline through), or the name of an installed distribution or
    importable top-level package, which the new package would replace or shadow once installed."""
    if not _PRINTABLE_NAME.fullmatch(name):
        shown = re.sub(r"[^a-z0-9-]+", "-", name.strip().lower()).strip("-") or "my-env"
        return (
            f"package name {name!r} holds characters a package name cannot (whitespace, a newline, upper case, "
            f"'_', ...): use lower-case letters, digits and '-', e.g. {shown!r}"
        )
    package = name.replace("-", "_")
    taken = _installed_names()
    if name in taken or package in taken:
        return (
            f"{name!r} is the name of an installed package ({package!r} is importable here): the new package would "
            f"shadow it once installed; pick another name, e.g. '{name}-env'"
        )
    return None


@functools.cache
def _installed_names() -> frozenset[str]:
    """Top-level import names and (normalised) distribution names installed in this environment."""
    names = set(importlib.metadata.packages_distributions())
    for dist in importlib.metadata.distributions():
        dist_name = dist.metadata["Name"] or ""
        normal = re.sub(r"[-_.]+", "-", dist_name).lower()
        names.update({normal, normal.replace("-", "_")})
    return frozenset(names)


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
        Names.of(name, chosen)  # its rules first: they say what to write
    except ScaffoldError as e:
        fail(str(e))
    problem = name_problem(name)
    if problem is not None:
        fail(problem)
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
