"""``python -m rubricgym.viewer PATH [...]``: the viewer without the main CLI."""

import typer

from rubricgym.viewer.cli import register

app = typer.Typer(add_completion=False)
register(app)

if __name__ == "__main__":
    app()
