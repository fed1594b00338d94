"""``rubricgym train``: the general entry point of training (``register(app)`` adds it to the main CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add the ``train`` command to ``app``."""

    @app.command()
    def train(
        config: Annotated[Path | None, typer.Option("--config", "-c", help="YAML training config")] = None,
        advantage: Annotated[
            str | None, typer.Option(help="estimator: grpo | rloo | stage | tournament | step")
        ] = None,
        resume: Annotated[bool, typer.Option("--resume", help="continue from the run dir's newest checkpoint")] = False,
        steps: Annotated[int | None, typer.Option(help="override: training steps")] = None,
        run_dir: Annotated[Path | None, typer.Option(help="override: run directory")] = None,
        topology: Annotated[str | None, typer.Option(help="override: tournament topology")] = None,
        ray: Annotated[bool, typer.Option("--ray", help="roll out on a local Ray pool of actors")] = False,
        ray_address: Annotated[str | None, typer.Option(help="roll out on this Ray cluster")] = None,
        live: Annotated[
            bool | None, typer.Option("--live/--no-live", help="rich live display (default: the config's `live`)")
        ] = None,
    ) -> None:
        """Train a policy with GRPO, stage-structured GRPO or tournament-ranked GRPO on rubric rewards."""
        from rich.console import Console

        from rubricgym.trainers.config import ConfigError, TrainConfig, env_problems, load_config
        from rubricgym.trainers.suite_trainer import make_trainer

        console = Console()
        try:
            cfg = load_config(config) if config is not None else TrainConfig()
            cfg = cfg.with_overrides(
                **{
                    "advantage.estimator": advantage,
                    "steps": steps,
                    "run_dir": str(run_dir) if run_dir else None,
                    "advantage.topology": topology,
                    "ray": True if (ray or ray_address) else None,
                    "ray_address": ray_address,
                    "live": live,
                }
            )
            problems = env_problems(cfg)  # before the run directory exists
            if problems:
                raise ConfigError("\n".join(f"{config or 'config'}: field '{f}': {m}" for f, m in problems))
        except ConfigError as e:
            console.print(f"[bold red]error:[/] {e}", soft_wrap=True, highlight=False)
            raise typer.Exit(2) from None
        from rubricgym.trainers.update import NonFiniteUpdate

        try:
            if cfg.ray and cfg.ray_learners > 1:  # the learner ranks placed by Ray too (trainers/ray_learners.py)
                from rubricgym.trainers.ray_learners import run_learners

                summary = run_learners(cfg, resume=resume)
            else:
                summary = make_trainer(cfg, console=console).run(resume=resume)
        except NonFiniteUpdate as e:
            console.print(f"[bold red]error:[/] {e}", soft_wrap=True, highlight=False)
            raise typer.Exit(3) from None
        # the live display already ends with the base and trained evaluations (Ray-placed learners show none)
        shown = 2 if cfg.live and cfg.ray_learners == 1 else 0
        for line in summary["lines"][shown:]:
            console.print(line)
        console.print(f"report: {summary['html']}")
