"""``rubricgym proxy``: the recording proxy in front of the local policy, added to the main app by ``register``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from rubricgym.core.bounds import MAX_SEED, bounded

console = Console()


def register(app: typer.Typer) -> None:
    @app.command()
    def proxy(
        model: Annotated[
            str, typer.Option(help="the policy: a known model name or a model directory")
        ] = "smollm2-135m-instruct",
        out: Annotated[Path, typer.Option(help="where calls.jsonl and rewards.jsonl are written")] = Path("runs/proxy"),
        host: Annotated[str, typer.Option(help="interface to listen on (loopback by default)")] = "127.0.0.1",
        port: Annotated[int, typer.Option(callback=bounded(1, 65535))] = 8010,
        temperature: Annotated[float, typer.Option(callback=bounded(0.0, 5.0))] = 0.7,
        max_new_tokens: Annotated[int, typer.Option(callback=bounded(1, 32768))] = 256,
        seed: Annotated[int, typer.Option(callback=bounded(0, MAX_SEED))] = 0,
    ) -> None:
        """Serve the policy as an OpenAI-compatible model that records every call (prompt and completion token
        ids, log-probs, policy version), grouped into sessions: point any agent's OpenAI client at
        http://HOST:PORT/v1 with api_key 'rgs-<episode>' (or the X-Rubricgym-Session header), then POST
        /v1/sessions/<key>/reward {"reward": ...} to end an episode. To train an agent program, set
        generation.agent_program in a training config instead."""
        import uvicorn

        from rubricgym.agents.local import LocalAgent
        from rubricgym.proxy.app import PolicyGenerator, create_app
        from rubricgym.proxy.sessions import SessionLog

        agent = LocalAgent(model, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed).load()
        gen = PolicyGenerator(agent, SessionLog(out), seed=seed)
        console.print(
            f"recording proxy for [bold]{gen.model}[/] on http://{host}:{port}/v1 (calls: {out / 'calls.jsonl'})",
            highlight=False,
        )
        uvicorn.run(create_app(gen), host=host, port=port, log_level="warning")
