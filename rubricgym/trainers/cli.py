"""``rubricgym train`` and ``rubricgym sft``: the entry points of training (``register(app)`` adds them to the main
CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add the ``train`` and ``sft`` commands to ``app``."""

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
        from rubricgym.trainers.trainer import Trainer

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
        from rubricgym.trainers.engine.checkpoint import CheckpointError
        from rubricgym.trainers.engine.distributed import leave
        from rubricgym.trainers.engine.update import NonFiniteUpdate

        try:
            if cfg.ray and cfg.ray_learners > 1:  # the learner ranks placed by Ray too (trainers/ray_learners.py)
                from rubricgym.trainers.ray_learners import run_learners

                summary = run_learners(cfg, resume=resume)
            else:
                summary = Trainer(cfg, console=console).run(resume=resume)
        except CheckpointError as e:  # no checkpoint can be resumed safely: the message names every file
            console.print(f"[bold red]error:[/] {e}", soft_wrap=True, highlight=False)
            raise typer.Exit(2) from None
        except NonFiniteUpdate as e:
            console.print(f"[bold red]error:[/] {e}", soft_wrap=True, highlight=False)
            raise typer.Exit(3) from None
        # the live display already ends with the base and trained evaluations (Ray-placed learners show none)
        shown = 2 if cfg.live and cfg.ray_learners == 1 else 0
        for line in summary["lines"][shown:]:
            console.print(line)
        console.print(f"report: {summary['html']}")
        leave()  # under torchrun: every rank exits together (a rank leaving alone can abort)

    register_sft(app)


def register_sft(app: typer.Typer) -> None:
    """Add the ``sft`` command to ``app``."""

    @app.command()
    def sft(
        config: Annotated[
            Path | None, typer.Option("--config", "-c", help="YAML training config (its warm_start)")
        ] = None,
        out: Annotated[
            Path | None, typer.Option(help="output directory (default: the config's RUN/warm_start)")
        ] = None,
        env: Annotated[str | None, typer.Option(help="override: env id")] = None,
        model: Annotated[str | None, typer.Option(help="override: model name or directory")] = None,
        agent: Annotated[str | None, typer.Option(help="a scripted agent of the env (teacher) that plays now")] = None,
        data: Annotated[
            list[Path] | None, typer.Option(help="a `rubricgym run` directory or `export --format sft` file (repeat)")
        ] = None,
        tasks: Annotated[int | None, typer.Option(help="training tasks the agent plays")] = None,
        keep: Annotated[str | None, typer.Option(help="succeeded | rubric | all")] = None,
        min_rubric: Annotated[float | None, typer.Option(help="keep: rubric threshold")] = None,
        steps: Annotated[int | None, typer.Option(help="optimizer steps")] = None,
        train_layers: Annotated[int | None, typer.Option(help="train only the top K decoder layers")] = None,
        save_every: Annotated[int | None, typer.Option(help="checkpoint every N steps")] = None,
        allow_oracle: Annotated[
            bool, typer.Option("--allow-oracle", help="clone an oracle anyway (tests of the mechanics only)")
        ] = False,
        resume: Annotated[bool, typer.Option("--resume", help="continue from the newest checkpoint in --out")] = False,
        live: Annotated[bool | None, typer.Option("--live/--no-live", help="progress display")] = None,
    ) -> None:
        """Behaviour cloning (the warm start): fine-tune the policy on kept trajectories, loss on assistant tokens,
        prompts rendered as the sampler renders them; writes OUT/model, usable as model.name."""
        from rich.console import Console

        from rubricgym.trainers.config import ConfigError, TrainConfig, load_config, validate_config
        from rubricgym.trainers.engine.distributed import leave
        from rubricgym.trainers.engine.update import NonFiniteUpdate
        from rubricgym.trainers.sft import WARM_START_DIR, run_sft

        console = Console()
        flags = {
            "agent": agent,
            "data": [str(d) for d in data] if data else None,
            "tasks": tasks,
            "keep": keep,
            "min_rubric": min_rubric,
            "steps": steps,
            "train_layers": train_layers,
            "save_every": save_every,
            "allow_oracle": True if allow_oracle else None,
        }
        try:
            cfg = load_config(config) if config is not None else TrainConfig()
            raw = cfg.model_dump(mode="json", by_alias=True)
            raw["warm_start"] = (raw.get("warm_start") or {}) | {k: v for k, v in flags.items() if v is not None}
            if env is not None:
                raw["env"]["id"] = env
            if model is not None:
                raw["model"]["name"] = model
            if live is not None:
                raw["live"] = live
            cfg = validate_config(raw, str(config) if config is not None else "sft options")
            target = out if out is not None else cfg.run_dir / WARM_START_DIR
            summary = run_sft(cfg, target, resume=resume, console=console)
        except ConfigError as e:
            console.print(f"[bold red]error:[/] {e}", soft_wrap=True, highlight=False)
            raise typer.Exit(2) from None
        except NonFiniteUpdate as e:
            console.print(f"[bold red]error:[/] {e}", soft_wrap=True, highlight=False)
            raise typer.Exit(3) from None
        line = f"warm start: {summary['steps']} steps"
        if summary.get("first_loss") is not None:
            line += f", loss {summary['first_loss']:.4f} -> {summary['last_loss']:.4f}"
        if summary.get("heldout_accuracy_before") is not None:
            before, after = summary["heldout_accuracy_before"], summary["heldout_accuracy_after"]
            line += f", held-out token accuracy {before:.3f} -> {after:.3f}"
        if summary.get("heldout_decision_accuracy_before") is not None:
            before, after = summary["heldout_decision_accuracy_before"], summary["heldout_decision_accuracy_after"]
            line += f", decisions {before:.3f} -> {after:.3f}"
        console.print(line)
        console.print(f"model: {summary['model']} (use it as model.name, or `rubricgym run ENV --agent local --model`)")
        leave()
