"""``rubricgym serve``, added to the main app by ``register(app)`` (``export`` is ``rubricgym/cli_export.py``)."""

from __future__ import annotations

import typer

from rubricgym.server.cli import serve_cmd


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_cmd)
