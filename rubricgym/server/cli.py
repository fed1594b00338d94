"""``rubricgym serve ENV_ID``: serve an env over OpenEnv's protocol (added to the main app by ``register(app)``)."""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.console import Console

from rubricgym.core.bounds import bound_error, bounded
from rubricgym.server.protocol import (
    MAX_IDLE_S,
    MAX_ISSUED,
    MAX_MESSAGE_BYTES,
    MAX_SESSIONS,
    MAX_WORKERS,
    MIN_IDLE_S,
)

err = Console(stderr=True)
LOOPBACK = ("127.0.0.1", "::1", "localhost")
MAX_STEPS = 1_000_000


def _fail(message: str) -> None:
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(2)


def serve_cmd(
    env_id: Annotated[str, typer.Argument(help="registered env id, e.g. toy-calculator-v0")],
    host: Annotated[str, typer.Option(help="interface to listen on (loopback by default)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port (0 picks a free one)", callback=bounded(0, 65535))] = 8000,
    max_sessions: Annotated[
        int, typer.Option(help=f"concurrent sessions before CAPACITY_REACHED (at most {MAX_SESSIONS})")
    ] = 256,
    idle_timeout: Annotated[
        float,
        typer.Option(help="seconds a session may idle before it is closed", callback=bounded(MIN_IDLE_S, MAX_IDLE_S)),
    ] = 600.0,
    token: Annotated[
        str | None, typer.Option(help="require 'Authorization: Bearer TOKEN' (default: $RUBRICGYM_TOKEN)")
    ] = None,
    max_message_bytes: Annotated[
        int, typer.Option(help="largest message a client may send", callback=bounded(1024, MAX_MESSAGE_BYTES))
    ] = 1 << 20,
    max_steps: Annotated[int | None, typer.Option(help="override the env's step limit (at least 1)")] = None,
    max_tasks: Annotated[
        int, typer.Option(help="most tasks one `tasks` request may ask for", callback=bounded(1, MAX_ISSUED))
    ] = 1000,
    issued_tasks: Annotated[
        int,
        typer.Option(
            help="handed-out tasks the server remembers (room comes from closed sessions', never an open one's)",
            callback=bounded(1, MAX_ISSUED),
        ),
    ] = 10_000,
    issued_per_client: Annotated[
        int,
        typer.Option(
            help="handed-out tasks one session holds (more forgets its own oldest)", callback=bounded(1, MAX_ISSUED)
        ),
    ] = 2000,
    accept_client_tasks: Annotated[
        bool, typer.Option(help="play tasks clients send (never ones naming host paths); off: only this server's")
    ] = False,
    trusted: Annotated[
        bool, typer.Option(help="send clients hidden data (answers, gold patches) for client-side scoring")
    ] = False,
    isolation: Annotated[
        str, typer.Option(help="where each session's env runs: thread, or process (envs that compute in Python)")
    ] = "thread",
    workers: Annotated[
        int,
        typer.Option(
            help="server processes sharing the port (WS sessions stay on theirs, HTTP ones are routed)",
            callback=bounded(1, MAX_WORKERS),
        ),
    ] = 1,
    inline_steps: Annotated[
        bool, typer.Option(help="step and reset a session on the event loop while those are short (thread isolation)")
    ] = True,
    tasks_per_split: Annotated[
        int,
        typer.Option(
            help="numbered tasks per split in OpenEnv's Task API (reset(split, index))", callback=bounded(1, MAX_ISSUED)
        ),
    ] = 100,
    task_seed: Annotated[
        int, typer.Option(help="seed of the Task API's task lists", callback=bounded(0, 2**63 - 1))
    ] = 0,
    docker: Annotated[
        str | None, typer.Option(help="run the server inside this image (docker SDK; $DOCKER_HOST honoured)")
    ] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level")] = "info",
) -> None:
    """Serve ENV_ID over WebSocket /ws and HTTP (OpenEnv's protocol) until Ctrl-C."""
    from pydantic import ValidationError

    from rubricgym.server.app import ServerConfig

    if token is None:
        token = os.environ.get("RUBRICGYM_TOKEN")
        if token is not None and not token.strip():
            _fail("$RUBRICGYM_TOKEN is set but empty: unset it to serve without a token, or set a real token")
    elif not token.strip():
        _fail("--token is empty: give a real token, or leave --token out to serve without one (loopback only)")
    if max_steps is not None and (problem := bound_error(max_steps, 1, MAX_STEPS)):
        _fail(f"--max-steps {problem} (leave it out for the env's own limit)")
    try:
        config = ServerConfig(
            env_id=env_id,
            env_kwargs={"max_steps": max_steps} if max_steps is not None else {},
            host=host,
            port=port,
            max_sessions=max_sessions,
            idle_timeout_s=idle_timeout,
            token=token,
            max_message_bytes=max_message_bytes,
            max_tasks=max_tasks,
            issued_tasks=issued_tasks,
            issued_per_client=issued_per_client,
            accept_client_tasks=accept_client_tasks,
            trusted=trusted,
            isolation=isolation,
            workers=workers,
            inline_steps=inline_steps,
            tasks_per_split=tasks_per_split,
            task_seed=task_seed,
        )
    except ValidationError as e:
        _fail("; ".join(f"{'.'.join(map(str, x['loc'])) or 'options'}: {x['msg']}" for x in e.errors()))
    if docker:
        from rubricgym.server.docker import DockerProvider, ProviderError

        try:
            DockerProvider(docker).serve_forever(config)
        except ProviderError as e:
            _fail(str(e))
        return
    if trusted and host not in LOOPBACK:
        err.print(f"[yellow]warning:[/] --trusted on {host}: every client that can reach it sees answers and gold data")
    if host not in LOOPBACK and token is None:
        err.print(f"[yellow]warning:[/] listening on {host} without --token: anyone who can reach it can run episodes")
    from rubricgym.server.run import serve

    try:
        serve(config, log_level=log_level)
    except KeyboardInterrupt:
        return  # uvicorn re-raises Ctrl-C after its graceful shutdown (every env already closed)
    except KeyError as e:
        _fail(str(e.args[0]))
    except (ValueError, TypeError) as e:
        _fail(f"cannot build {env_id}: {e}")
    except OSError as e:
        _fail(f"cannot listen on {host}:{port}: {e}")
    except RuntimeError as e:  # --workers: a worker failed to start, or every worker died
        _fail(str(e))
