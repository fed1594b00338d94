"""The training run: the base policy evaluated on held-out tasks, the steps (``step.StepTrainer``: one after the
other, or pipelined under ``async`` so the next steps' rollouts are produced while the current update trains),
evaluation every ``eval_every`` steps and at the end, ``metrics.jsonl`` per step, checkpoints every ``save_every``
steps (``resume=True`` continues exactly), then the summary, plots and HTML report.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.markup import escape

from rubricgym.core.jsonl import set_aside_lines, unreadable_lines
from rubricgym.core.safeio import atomic_write
from rubricgym.trainers.algo.estimate import reward_of
from rubricgym.trainers.algo.rollouts import flatten
from rubricgym.trainers.config import dump_config
from rubricgym.trainers.data import CURRICULUM_LOG
from rubricgym.trainers.display import LiveDisplay
from rubricgym.trainers.engine.backends import LocalBackend
from rubricgym.trainers.engine.checkpoint import resume_checkpoint, save_checkpoint
from rubricgym.trainers.engine.distributed import any_rank, is_main
from rubricgym.trainers.engine.sampler_copy import PoolWeights, SamplerCopy
from rubricgym.trainers.evaluation import EvalResult, gain_lines, paired_difference, paired_outcome_difference
from rubricgym.trainers.pipeline import Pipeline
from rubricgym.trainers.report import per_env_plot, write_html, write_plots
from rubricgym.trainers.sft import warm_start
from rubricgym.trainers.step import StepBatch, StepTrainer


class Trainer(StepTrainer):
    """Trains ``cfg.model`` on ``cfg.env`` (one env, or a suite's entries: ``trainers/data.py``) with the estimator
    ``cfg.advantage.estimator``. A suite run also logs each step's ``env/<entry>/...`` and ``curriculum/<entry>/...``
    fields and ``curriculum.jsonl``, evaluates per entry (``kind: eval_env``) and overall, and plots
    ``plots/per_env.png``."""

    # ---- evaluation -----------------------------------------------------------------------------------------

    async def evaluate(self, tag: str, step: int) -> EvalResult:
        """One rollout per held-out task at ``generation.eval_temperature`` (greedy by default), in full precision
        even when training generates under bf16 autocast (bf16 greedy decoding of a 135M model flips answers)."""
        tasks = list(self.eval_tasks)
        seeds = [10_000_019 + 97 * i for i in range(len(tasks))]
        temperature = self.cfg.generation.eval_temperature
        with self.gathered():
            groups = await self.backend.collect(tasks, seeds, 1, temperature=temperature, full_precision=True)
        await self.score(groups)
        rollouts = flatten(groups)
        return EvalResult.of(
            tag,
            step,
            [r.trajectory.task.id for r in rollouts],
            [reward_of(r.breakdown) for r in rollouts],
            [float(r.trajectory.outcome.succeeded) for r in rollouts],
        )

    def _log_eval(self, result: EvalResult) -> None:
        self.metrics.write(
            {
                "kind": "eval",
                "step": result.step,
                "tag": result.tag,
                "eval_mean": result.mean,
                "eval_ci_low": result.ci[0],
                "eval_ci_high": result.ci[1],
                "eval_success": result.success_mean,
            }
        )
        if self.data.suite is None:
            return
        for name, r in self.data.per_entry(result).items():
            self.metrics.write(
                {
                    "kind": "eval_env",
                    "step": result.step,
                    "tag": result.tag,
                    "entry": name,
                    "eval_mean": r.mean,
                    "eval_ci_low": r.ci[0],
                    "eval_ci_high": r.ci[1],
                    "eval_success": r.success_mean,
                }
            )

    # ---- the run ------------------------------------------------------------------------------------------

    def resume(self) -> bool:
        """Continue from the newest usable checkpoint (rank 0 writes them for every rank; a damaged one is skipped
        for the one before it), after setting aside the lines of the run's JSONL logs a kill cut short; what was
        skipped or set aside is printed and kept in ``resume_notes``."""
        self.resume_notes = self.set_aside_torn_lines()
        found = resume_checkpoint(Path(self.cfg.run_dir), self.trained, self.optimizer)
        if found is not None:
            self.resume_notes += found[2]
        for note in self.resume_notes:
            (self.console or Console(stderr=True)).print(f"[yellow]resume:[/] {escape(note)}", soft_wrap=True)
        if found is None:
            return False
        self.state = found[1]
        if self.state.base_eval:
            self.base_eval = EvalResult.model_validate(self.state.base_eval)
        self.metrics.truncate_after(self.state.step)
        if self.rollout_log is not None:
            self.rollout_log.truncate_after(self.state.step)
        saved = self.state.entries or {}
        for name, entry in self.entries.items():
            entry.load_state_dict(saved.get(name, saved.get("*", {})))  # "*": a checkpoint from before entries
        if self.guide is not None:
            self.guide.load_state_dict(self.state.guidance or {})
        self.backend.push_weights(self.model)
        if self.data.sampler is not None:  # a suite's curriculum as it was after the checkpoint's step
            path = self.run_dir / CURRICULUM_LOG
            lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []
            at = [rec["q"] for rec in lines if rec["step"] == self.state.step]
            if at:
                self.data.sampler.load_state_dict(at[-1])
        return True

    def set_aside_torn_lines(self) -> list[str]:
        """Move the lines of the run's JSONL logs (``metrics.jsonl``, ``trajectories.jsonl``, ...) that are not JSON
        (a write a kill cut short) to ``FILE.removed``: one note per file."""
        notes = []
        for path in sorted(self.run_dir.glob("*.jsonl")):
            torn = unreadable_lines(path)
            aside = set_aside_lines(path, torn)
            if aside is not None:
                where = ", ".join(map(str, torn[:5])) + (" ..." if len(torn) > 5 else "")
                notes.append(
                    f"{path}: {len(torn)} line(s) cut short by an interrupted write (line {where}) moved to {aside}"
                )
        return notes

    def checkpoint(self) -> Path:
        self.state.base_eval = self.base_eval.model_dump(mode="json") if self.base_eval else None
        self.state.entries = {name: entry.state_dict() for name, entry in self.entries.items()}
        guide = self.guide.state_dict() if self.guide is not None else None
        # under async the producer may have guided later steps already: keep the levels of the last step trained
        self.state.guidance = guide if self.sampler_copy is None else self.consumed_guide_state
        return save_checkpoint(Path(self.cfg.run_dir), self.trained, self.tokenizer, self.optimizer, self.state)

    async def arun(self, resume: bool = False) -> dict[str, Any]:
        cfg = self.cfg
        self.run_dir.mkdir(parents=True, exist_ok=True)
        dump_config(cfg, self.run_dir / "config.yaml")
        resumed = self.resume() if resume else False
        if not resumed:
            if cfg.warm_start is not None:  # behaviour cloning first: reused when RUN/warm_start holds it finished
                self.warm_start_summary = await warm_start(self)
            random.seed(cfg.seed)  # after the warm start: a reused one leaves GRPO's random stream as a fresh one
            np.random.seed(cfg.seed)
            torch.manual_seed(cfg.seed)
            if self.metrics.path.exists():
                self.metrics.path.unlink()
            if self.rollout_log is not None:
                self.rollout_log.truncate_after(0)
        if self.rollout_log is not None:
            meta: dict[str, Any] = {"trainer": cfg.advantage.estimator, "reward_key": cfg.advantage.reward_key}
            meta["judge"] = cfg.judge.model_dump(mode="json") if cfg.judge is not None else None
            self.rollout_log.store.write_meta(meta | {"rubrics": self.entry_rubrics()})
        display = LiveDisplay(cfg, self.console, enabled=cfg.live and is_main())
        started = time.perf_counter() - self.state.elapsed_s
        with display:
            if self.base_eval is None:
                display.evaluating("base policy", len(self.eval_tasks))
                self.base_eval = await self.evaluate("base", 0)
                self._log_eval(self.base_eval)
                display.eval(self.base_eval)
            if not self.out_of_time(started, display):
                await self.run_steps(started, display)
            display.evaluating("trained policy", len(self.eval_tasks))
            final = await self.evaluate("trained", self.state.step)
            self._log_eval(final)
            display.eval(final)
        if cfg.save_every and self.writes_checkpoints:
            self.checkpoint()
        return self.finish(final)

    async def run_steps(self, started: float, display: LiveDisplay) -> None:
        """Steps ``state.step .. steps-1``: one after the other, or pipelined under ``async.enabled`` (the producer
        runs ahead of the learner by up to ``async.max_staleness`` steps)."""
        a = self.cfg.async_
        if not a.enabled:
            while self.state.step < self.cfg.steps:
                if await self.end_step(await self.train_step(self.state.step), started, display):
                    return
            return
        if self.cfg.ray:  # the actors sample: each collection starts by pushing them the last staged weights
            self.sampler_copy, self.sampler_backend = (
                PoolWeights(self.backend, self.model, self.state.step),
                self.backend,
            )
        else:
            local = SamplerCopy(self.policy, self.model, version=self.state.step)
            self.sampler_copy, self.sampler_backend = (
                local,
                LocalBackend.of(self.cfg, local.policy, self.env_of),
            )

        async def consume(step: int, batch: StepBatch) -> None:
            if await self.end_step(await self.consume(step, batch), started, display):
                pipeline.stop()

        async def produce(step: int, learner_version: int) -> StepBatch:
            return await self.produce(step)  # tagged with the version the sampler holds (>= learner_version)

        pipeline = Pipeline(
            produce, consume, max_staleness=a.max_staleness, steps=self.cfg.steps, start_step=self.state.step
        )
        try:
            await pipeline.run()
            if self.cfg.ray:  # the actors hold the sampler's last version: evaluations use the learner's weights
                self.backend.push_weights(self.model)
        finally:
            self.sampler_copy = self.sampler_backend = None

    async def end_step(self, record: dict[str, Any], started: float, display: LiveDisplay) -> bool:
        """Log a finished step, evaluate and checkpoint when due; whether the run stops here (a hacking monitor,
        the time budget)."""
        cfg = self.cfg
        self.state.step, self.state.cursor = record["step"], record["cursor"]
        self.state.elapsed_s = time.perf_counter() - started
        record["elapsed_s"] = self.state.elapsed_s
        self.metrics.write(record)
        display.step(record)
        if self.stop_reason:
            display.status(f"hacking monitor stopped the run: {self.stop_reason}")
            return True
        if cfg.eval_every and self.state.step % cfg.eval_every == 0 and self.state.step < cfg.steps:
            display.evaluating(f"policy at step {self.state.step}", len(self.eval_tasks))
            result = await self.evaluate(f"step {self.state.step}", self.state.step)
            self._log_eval(result)
            display.eval(result)
        if cfg.save_every and self.state.step % cfg.save_every == 0 and self.writes_checkpoints:
            self.checkpoint()
        return self.state.step < cfg.steps and self.out_of_time(started, display)

    def out_of_time(self, started: float, display: LiveDisplay) -> bool:
        """Whether ``time_budget_s`` has run out (agreed by every data-parallel rank)."""
        cfg = self.cfg
        over = bool(cfg.time_budget_s and time.perf_counter() - started > cfg.time_budget_s)
        if any_rank(over):  # data-parallel ranks stop together, or one would wait forever in all_reduce
            display.status(f"time budget of {cfg.time_budget_s:.0f}s reached at step {self.state.step}")
            return True
        return False

    def checked_envs(self) -> str:
        """The envs a summary's warning sends to ``rubricgym check`` when rubric reward and outcome moved apart
        (a suite's, each once: ``rubricgym check`` takes one at a time)."""
        return " / ".join(dict.fromkeys(e.env for e in self.data.entries.values()))

    def finish(self, final: EvalResult) -> dict[str, Any]:
        assert self.base_eval is not None
        diff, ci = paired_difference(final, self.base_eval)
        gains = gain_lines(final, self.base_eval, env=self.checked_envs())
        lines = [
            self.base_eval.line(),
            final.line(),
            f"    {gains[0]} (paired over tasks) after {self.state.step} steps of {self.cfg.advantage.estimator}",
            *(f"    {w}" for w in gains[1:]),
        ]
        for name, entry in self.entries.items():
            if entry.monitor is not None:
                lines += [f"  {name}:"] if len(self.entries) > 1 else []
                lines += entry.monitor.summary_lines()
        per_env = self.per_entry_summary(final, lines) if self.data.suite is not None else None
        records = self.metrics.read()
        plots = write_plots(records, self.run_dir / "plots") if self.cfg.plots else []
        if self.cfg.plots and self.data.suite is not None:
            plots.append(per_env_plot(records, self.data.names, self.run_dir / "plots" / "per_env.png"))
        html = write_html(self.run_dir, self.cfg.model_dump(mode="json"), records, sorted(set(plots)), lines)
        odiff, oci = paired_outcome_difference(final, self.base_eval)
        summary = {
            "base": self.base_eval.model_dump(mode="json"),
            "trained": final.model_dump(mode="json"),
            "gain": diff,
            "gain_ci": list(ci),
            "success_gain": odiff,
            "success_gain_ci": list(oci),
            "gain_lines": lines[2 : 2 + len(gains)],
            "steps": self.state.step,
            "lines": lines,
            "html": str(html),
            "estimator": self.cfg.advantage.estimator,
        }
        if self.data.suite is not None:
            summary.update(per_env=per_env, suite=self.data.suite.name)
        atomic_write(self.run_dir / "summary.json", json.dumps(summary, indent=2, default=str))
        self.metrics.close()
        self.backend.close()
        if self.guide is not None:
            self.guide.close()
        return summary

    def per_entry_summary(self, final: EvalResult, lines: list[str]) -> dict[str, Any]:
        """A suite's base vs trained per entry (appending each entry's gain lines to ``lines``): ``per_env``."""
        assert self.base_eval is not None and self.data.suite is not None
        base, trained = self.data.per_entry(self.base_eval), self.data.per_entry(final)
        per_env = {}
        for name, entry in self.data.entries.items():
            if name in base and name in trained:
                b, t = base[name], trained[name]
                diff, ci = paired_difference(t, b)
                odiff, oci = paired_outcome_difference(t, b)
                per_env[name] = {
                    "base": b.mean,
                    "trained": t.mean,
                    "gain": diff,
                    "gain_ci": list(ci),
                    "success_base": b.success_mean,
                    "success_trained": t.success_mean,
                    "success_gain": odiff,
                    "success_gain_ci": list(oci),
                    "weight": entry.weight,
                }
                gains = gain_lines(t, b, env=entry.env, prefix="", levels=True)
                lines += [f"  {name}: {x}" for x in gains]
        return per_env

    def run(self, resume: bool = False) -> dict[str, Any]:
        return asyncio.run(self.arun(resume=resume))
