"""Env constructor arguments from the command line: ``--env-arg KEY=VALUE`` (repeatable) and ``--env-config FILE``.

Values are read as JSON when they parse (``n_docs=2000``, ``hops=3``, ``limits={"cpu_s": 5}``, ``flag=true``) and
as plain strings otherwise (``corpus=docs/``); a config file is a YAML, JSON or TOML mapping, and ``--env-arg``
pairs override it. ``env_kwargs`` checks the keys against the env's constructor so a typo fails before any work
starts, naming the arguments the env takes. Every command that takes an env id uses this (run, check, and the
training / evaluation configs through ``parse_env_args``).
"""

from __future__ import annotations

import inspect
import json
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from rubricgym.core.jsonl import read_text
from rubricgym.core.registry import spec

EnvArgOption = Annotated[
    list[str] | None,
    typer.Option(
        "--env-arg",
        help="env constructor argument KEY=VALUE (repeat; JSON values, else strings), "
        "e.g. --env-arg corpus=docs/ --env-arg questions=q.jsonl",
    ),
]
"""The ``--env-arg`` option of every command that takes an env id (``env_kwargs`` reads it)."""
EnvConfigOption = Annotated[
    Path | None, typer.Option("--env-config", help="YAML/JSON/TOML mapping of env arguments (--env-arg overrides)")
]
"""The ``--env-config FILE`` option beside it."""


class EnvArgError(ValueError):
    """An env argument or env config file is malformed or names an argument the env does not take."""


def parse_value(text: str) -> Any:
    """JSON if ``text`` parses as JSON, else the string itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def load_env_config(path: str | Path) -> dict[str, Any]:
    """The mapping in a YAML (``.yaml``/``.yml``), JSON or TOML env config file."""
    p = Path(path)
    if not p.is_file():
        raise EnvArgError(f"{p}: no such env config file")
    text = read_text(p, EnvArgError)
    try:
        if p.suffix == ".toml":
            data = tomllib.loads(text)
        elif p.suffix == ".json":
            data = json.loads(text)
        else:
            data = yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as e:
        raise EnvArgError(f"{p}: cannot parse env config: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise EnvArgError(f"{p}: an env config must be a mapping of argument names to values, e.g. 'n_docs: 2000'")
    return data


def parse_env_args(pairs: Sequence[str] = (), config: str | Path | None = None) -> dict[str, Any]:
    """``config``'s mapping updated with each ``KEY=VALUE`` of ``pairs``."""
    out = load_env_config(config) if config else {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise EnvArgError(
                f"--env-arg takes KEY=VALUE with KEY an argument name, got {pair!r} "
                f"(e.g. --env-arg corpus=docs/ --env-arg n_docs=2000)"
            )
        out[key] = parse_value(value)
    return out


def check_env_kwargs(env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` if env ``env_id``'s constructor takes every key; else an error listing what it takes."""
    cls = spec(env_id).load()
    params = inspect.signature(cls.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    accepted = [n for n, p in params.items() if n != "self" and p.kind is not inspect.Parameter.VAR_POSITIONAL]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise EnvArgError(
            f"{env_id} takes no argument {', '.join(map(repr, unknown))}; its arguments are: {', '.join(accepted)}"
        )
    return kwargs


def env_kwargs(env_id: str, pairs: Sequence[str] = (), config: str | Path | None = None) -> dict[str, Any]:
    """Parse ``--env-arg`` pairs and ``--env-config`` for ``env_id`` and check them against its constructor."""
    return check_env_kwargs(env_id, parse_env_args(pairs, config))
