"""The ``--env-arg KEY=VALUE`` / ``--env-config FILE`` options every command that takes an env id shares.

Use them as parameters of a typer command and turn them into constructor kwargs with ``env_kwargs_or_exit``::

    def eval(env_id: str, env_arg: EnvArgOption = None, env_config: EnvConfigOption = None): ...
        kwargs = env_kwargs_or_exit(env_id, env_arg, env_config)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from rubricgym.core.envargs import EnvArgError, env_kwargs

EnvArgOption = Annotated[
    list[str] | None,
    typer.Option(
        "--env-arg",
        help="env constructor argument KEY=VALUE (repeat; JSON values, else strings), "
        "e.g. --env-arg corpus=docs/ --env-arg questions=q.jsonl",
    ),
]
EnvConfigOption = Annotated[
    Path | None, typer.Option("--env-config", help="YAML/JSON/TOML mapping of env arguments (--env-arg overrides)")
]


def env_kwargs_or_exit(env_id: str, pairs: list[str] | None, config: Path | None) -> dict[str, Any]:
    """The env kwargs, or exit 2 with a message naming the bad argument, file or key."""
    try:
        return env_kwargs(env_id, pairs or [], config)
    except EnvArgError as e:
        Console(stderr=True).print(f"[bold red]error:[/] {e}", soft_wrap=True)
        raise typer.Exit(2) from None
    except KeyError as e:
        Console(stderr=True).print(f"[bold red]error:[/] {e.args[0]}", soft_wrap=True)
        raise typer.Exit(2) from None
