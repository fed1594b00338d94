"""Turning the ``--env-arg KEY=VALUE`` / ``--env-config FILE`` options every command that takes an env id shares
(``core.envargs.EnvArgOption``/``EnvConfigOption``) into kwargs, and the agent ``--agent teacher --base-url URL
--model NAME`` names on them (an endpoint as the env's teacher).

Use the options as parameters of a typer command and turn them into constructor kwargs with ``env_kwargs_or_exit``::

    def eval(env_id: str, env_arg: EnvArgOption = None, env_config: EnvConfigOption = None): ...
        kwargs = env_kwargs_or_exit(env_id, env_arg, env_config)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from rubricgym.core.agent import Agent
from rubricgym.core.envargs import EnvArgError, env_kwargs

TEACHER = "teacher"
"""The agent name of teacher data (``Trajectory.agent``): a scripted teacher's or an endpoint's (issue #38)."""


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


def endpoint_teacher(
    base_url: str, model: str, *, temperature: float = 0.7, native_tools: bool = False, seed: int | None = None
) -> Agent:
    """Any OpenAI-compatible endpoint as an env's teacher (distillation from a larger model, issue #38).

    It is an ``OpenAIAgent`` named ``teacher``: its trajectories are teacher data (``Trajectory.agent``) with the
    endpoint's model in ``Trajectory.model`` (a scripted teacher's is ``None``), and it sees only the chat and the
    tools, as every teacher must. ``rubricgym run ENV --agent teacher --base-url URL --model NAME`` plays it.
    """
    if not base_url.strip() or not model.strip():
        raise ValueError(
            "an endpoint teacher needs --base-url (e.g. http://127.0.0.1:8000/v1) and --model (the name the "
            "endpoint serves); without --base-url, --agent teacher is the env's scripted teacher"
        )
    from rubricgym.agents.openai import OpenAIAgent  # httpx and the client load only for a run that uses one

    agent = OpenAIAgent(base_url, model, temperature=temperature, native_tools=native_tools, seed=seed)
    agent.name = TEACHER  # its episodes (``OpenAIAgent.episode`` copies the instance) carry the name too
    return agent
