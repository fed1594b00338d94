"""The training loop: roll out groups, score them with the process reward model, estimate advantages, update.

One step: ``tasks_per_step`` tasks from the training split (a seeded, epoch-shuffled stream whose position is
the checkpointed data cursor), ``group_size`` rollouts each through ``rollout_group``, rubric scores from the
``ProcessRewardModel`` (and, for the tournament estimator, ranks from a ``PairwiseJudge``), advantages, one
PPO-clip update. Held-out evaluation runs before training, every ``eval_every`` steps and at the end; every
step appends to ``metrics.jsonl``; checkpoints every ``save_every`` steps make ``resume=True`` continue exactly.
"""

from __future__ import annotations

import asyncio
import copy
import math
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rubricgym.core.registry import spec
from rubricgym.core.tasks import TaskSet
from rubricgym.core.types import Task, Trajectory
from rubricgym.trainers.checkpoint import TrainState, latest_checkpoint, load_checkpoint, save_checkpoint
from rubricgym.trainers.config import TrainConfig, dump_config
from rubricgym.trainers.display import LiveDisplay
from rubricgym.trainers.distributed import any_rank, init_from_env, is_main, rank_world, shard
from rubricgym.trainers.estimate import estimate
from rubricgym.trainers.evaluation import EvalResult, paired_difference
from rubricgym.trainers.policy import TrainingPolicy, collect_groups
from rubricgym.trainers.report import MetricsLog, write_html, write_plots
from rubricgym.trainers.tournament import TournamentResult, run_tournament
from rubricgym.trainers.update import UpdateSettings, policy_update


def unique_tasks(env_id: str, n: int, seed: int, split: str, env_kwargs: dict[str, Any]) -> TaskSet:
    """``n`` generated tasks of ``split`` without repeats (small task spaces repeat problems)."""
    from rubricgym.core.registry import make

    seen: dict[str, Task] = {}
    for t in make(env_id, **env_kwargs).task_set(n, seed=seed, split=split):
        seen.setdefault(t.id, t)
    return TaskSet(seen.values(), source=f"{env_id}(seed={seed}, split={split})")


class Trainer:
    """Trains ``cfg.model`` on ``cfg.env`` with the estimator ``cfg.advantage.estimator``."""

    def __init__(self, cfg: TrainConfig, *, console: Any = None):
        self.cfg = cfg
        self.console = console
        init_from_env()  # under torchrun (WORLD_SIZE > 1): join the data-parallel process group
        self.run_dir = Path(cfg.run_dir)
        if not is_main():  # other data-parallel ranks keep their own metrics apart
            self.run_dir = self.run_dir / f"rank{rank_world()[0]}"
        self.metrics = MetricsLog(self.run_dir / "metrics.jsonl")
        self.env_cls = spec(cfg.env.id).load()
        self.stages = list(self.env_cls.stages) or ["act"]
        kw = cfg.env.kwargs
        seed = cfg.env.task_seed
        self.train_tasks = unique_tasks(cfg.env.id, cfg.env.train_tasks, seed, "train", kw)
        self.eval_tasks = unique_tasks(cfg.env.id, cfg.env.eval_tasks, seed + 1, "test", kw)
        from rubricgym.rewards.prm import ProcessRewardModel

        rubric = cfg.env.rubric if cfg.env.rubric is not None else self.env_cls.default_rubric()
        self.prm = ProcessRewardModel(rubric, name=cfg.advantage.reward_key)
        self.pairwise = None
        if cfg.advantage.estimator == "tournament":
            from rubricgym.rewards.pairwise import PairwiseJudge

            self.pairwise = PairwiseJudge.from_rubric(rubric, path_weight=cfg.advantage.path_weight)
        if cfg.model.threads:
            torch.set_num_threads(cfg.model.threads)
        g = cfg.generation
        self.policy = TrainingPolicy(
            cfg.model.name,
            temperature=g.temperature,
            top_p=g.top_p,
            max_new_tokens=g.max_new_tokens,
            dtype=cfg.model.dtype,
            max_batch=g.max_batch,
            response_prefix=g.response_prefix,
            bf16_autocast=cfg.model.bf16_autocast,
            device=cfg.model.device,
        )
        self.model = self.policy.model_obj
        self.tokenizer = self.policy.tokenizer
        if cfg.model.gradient_checkpointing:
            (getattr(self.model, "activation_checkpointing_enable", None) or self.model.gradient_checkpointing_enable)()
        self.ref_model = None
        if cfg.loss.beta > 0:
            self.ref_model = copy.deepcopy(self.model).eval().requires_grad_(False)
        o = cfg.optim
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=o.lr, betas=o.betas, weight_decay=o.weight_decay)
        lo = cfg.loss
        self.settings = UpdateSettings(
            clip_low=lo.clip_low,
            clip_high=lo.clip_high,
            beta=lo.beta,
            entropy_coef=lo.entropy_coef,
            aggregation=lo.aggregation,
            ppo_epochs=lo.ppo_epochs,
            micro_batch=o.micro_batch,
            max_grad_norm=o.max_grad_norm,
            temperature=g.temperature if g.temperature > 0 else 1.0,
            bf16_autocast=cfg.model.bf16_autocast,
            off_policy=lo.off_policy,
            tis_cap=lo.tis_cap,
        )
        self.backend: Any = None  # a VLLMBackend or RayBackend: collect / push_weights / close
        if g.backend == "vllm":
            from rubricgym.trainers.vllm_backend import VLLMBackend

            self.backend = VLLMBackend.for_policy(self.policy, g)
        elif cfg.ray:
            from rubricgym.trainers.ray_backend import RayBackend

            self.backend = RayBackend(cfg, address=cfg.ray_address, workers=cfg.ray_workers)
        self.state = TrainState(step=0, cursor=0)
        self.base_eval: EvalResult | None = None
        from rubricgym.rewards.evolve import build_buffer
        from rubricgym.trainers.monitors import build_monitor

        self.monitor = build_monitor(cfg.monitor, self.prm, self.policy, cfg.advantage.reward_key)
        self.buffer = build_buffer(
            cfg.rubric_buffer,
            self.prm.rubric,
            self.env_cls,
            key=cfg.advantage.reward_key,
            record=self.run_dir / "rubric_versions.jsonl",
        )

    # ---- data -------------------------------------------------------------------------------------------

    def tasks_at(self, cursor: int, n: int) -> list[Task]:
        """Tasks ``cursor .. cursor+n-1`` of the endless stream: each epoch is a seeded shuffle of the split."""
        size = len(self.train_tasks)
        out = []
        for pos in range(cursor, cursor + n):
            epoch, i = divmod(pos, size)
            order = np.random.default_rng([self.cfg.seed, epoch]).permutation(size)
            out.append(self.train_tasks[int(order[i])])
        return out

    def seeds_for(self, step: int, n: int) -> list[int]:
        return [self.cfg.seed * 1_000_003 + step * 10_007 + j * 101 for j in range(n)]

    # ---- one step -----------------------------------------------------------------------------------------

    async def rank_groups(self, groups: list[list[Trajectory]]) -> list[TournamentResult]:
        judge = self.pairwise
        assert judge is not None

        async def one(group: list[Trajectory]) -> TournamentResult:
            async def compare(i: int, j: int) -> tuple[float, float] | None:
                r = await judge.compare(group[i], group[j])
                return None if not r.ok or r.score_a is None else (float(r.score_a), float(r.score_b or 0.0))

            return await run_tournament(self.cfg.advantage.topology, len(group), compare)

        return list(await asyncio.gather(*(one(g) for g in groups)))

    async def generate(
        self,
        tasks: list[Task],
        seeds: list[int],
        group_size: int,
        greedy_anchor: bool,
        temperature: float | None = None,
        full_precision: bool = False,
    ) -> list[list[Trajectory]]:
        """Groups of rollouts; ``temperature`` and ``full_precision`` (no bf16 autocast) override the policy's
        settings for this call only."""
        if self.backend is not None:
            return await self.backend.collect(self, tasks, seeds, group_size, greedy_anchor, temperature)
        policy = self.policy
        saved, autocast = policy.params, policy.bf16_autocast
        if temperature is not None:
            from dataclasses import replace

            policy.params = replace(saved, temperature=temperature)
        policy.bf16_autocast = autocast and not full_precision
        try:
            return await self.collect(tasks, seeds, group_size, greedy_anchor)
        finally:
            policy.params, policy.bf16_autocast = saved, autocast

    async def collect(
        self, tasks: list[Task], seeds: list[int], group_size: int, greedy_anchor: bool
    ) -> list[list[Trajectory]]:
        """Groups of rollouts of ``tasks`` by the local policy (a suite trainer routes each task to its entry)."""
        return await collect_groups(
            self.cfg.env.id,
            self.policy,
            tasks,
            group_size,
            seeds,
            env_kwargs=self.cfg.env.kwargs,
            anchor_greedy=greedy_anchor,
        )

    async def train_step(self, step: int) -> dict[str, Any]:
        cfg = self.cfg
        t0 = time.perf_counter()
        all_tasks = self.tasks_at(self.state.cursor, cfg.tasks_per_step)
        tasks = shard(all_tasks)  # data parallel: this rank's groups (all of them when single-process)
        self.policy.forget()
        anchor = cfg.advantage.estimator == "tournament" and cfg.advantage.anchor_greedy
        groups = await self.generate(tasks, shard(self.seeds_for(step, len(all_tasks))), cfg.group_size, anchor)
        t_gen = time.perf_counter()
        await self.prm.score_many([t for g in groups for t in g], concurrency=8)
        tournaments = await self.rank_groups(groups) if self.pairwise is not None else None
        t_score = time.perf_counter()
        est = estimate(
            groups,
            self.policy.turns_for,
            self.stages,
            cfg.advantage,
            tournaments=tournaments,
            max_seq_len=cfg.optim.max_seq_len,
        )
        stats = policy_update(
            self.model,
            self.optimizer,
            est.samples,
            self.settings,
            pad_id=self.tokenizer.pad_token_id,
            ref_model=self.ref_model,
        )
        if self.backend is not None:
            self.backend.push_weights(self.model)
        t_upd = time.perf_counter()
        self.state.cursor += len(all_tasks)
        flat = [t for g in groups for t in g]
        key = cfg.advantage.reward_key
        rewards = [r for r in est.per_rollout if math.isfinite(r)]
        record: dict[str, Any] = {
            "kind": "train",
            "step": step + 1,
            "cursor": self.state.cursor,
            "reward_mean": float(np.mean(rewards)) if rewards else math.nan,
            "reward_std": float(np.std(rewards)) if rewards else math.nan,
            "success_mean": float(np.mean([t.outcome.reward for t in flat])),
            "masked": est.masked_rollouts,
            "comparisons": est.comparisons,
            "response_tokens": float(
                np.mean([sum(len(x.completion_ids) for x in self.policy.turns_for(t)) for t in flat])
            ),
            "turns": float(np.mean([len(t.steps) for t in flat])),
            "samples": len(est.samples),
            "tokens": int(stats.get("tokens", 0)),
            "gen_s": t_gen - t0,
            "score_s": t_score - t_gen,
            "update_s": t_upd - t_score,
            "step_s": t_upd - t0,
        }
        for s in self.stages:
            vals = [t.rewards[f"{key}/stage/{s}"] for t in flat if f"{key}/stage/{s}" in t.rewards]
            record[f"stage/{s}"] = float(np.mean(vals)) if vals else None
        record.update({k: v for k, v in stats.items() if k != "tokens"})
        if self.monitor is not None:  # hacking monitors (rewards.monitor), every monitor.every steps
            record.update(await self.monitor.observe(step + 1, flat))
        record["rubric_hash"] = self.prm.rubric.hash  # the version these scores came from
        if self.buffer is not None and (evolved := await self.buffer.update(step + 1, groups)) is not None:
            self.prm.rubric = evolved  # RubricEM's stage rubric buffer: the next step scores with it
        return record

    # ---- evaluation -----------------------------------------------------------------------------------------

    async def evaluate(self, tag: str, step: int) -> EvalResult:
        """One rollout per held-out task at ``generation.eval_temperature`` (greedy by default), in full precision
        even when training generates under bf16 autocast (bf16 greedy decoding of a 135M model flips answers)."""
        tasks = list(self.eval_tasks)
        seeds = [10_000_019 + 97 * i for i in range(len(tasks))]
        self.policy.forget()
        groups = await self.generate(
            tasks, seeds, 1, False, temperature=self.cfg.generation.eval_temperature, full_precision=True
        )  # judge the fp32 weights as they are
        flat = [g[0] for g in groups]
        await self.prm.score_many(flat, concurrency=8)
        from rubricgym.trainers.estimate import reward_of

        return EvalResult.of(
            tag,
            step,
            [t.task.id for t in flat],
            [reward_of(t, self.cfg.advantage.reward_key) for t in flat],
            [float(t.outcome.reward) for t in flat],
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

    # ---- the run ------------------------------------------------------------------------------------------

    def resume(self) -> bool:
        ckpt = latest_checkpoint(Path(self.cfg.run_dir))  # rank 0 writes them for every rank
        if ckpt is None:
            return False
        self.state = load_checkpoint(ckpt, self.model, self.optimizer)
        if self.state.base_eval:
            self.base_eval = EvalResult.model_validate(self.state.base_eval)
        self.metrics.truncate_after(self.state.step)
        if self.backend is not None:
            self.backend.push_weights(self.model)
        return True

    def checkpoint(self) -> Path:
        self.state.base_eval = self.base_eval.model_dump(mode="json") if self.base_eval else None
        return save_checkpoint(Path(self.cfg.run_dir), self.model, self.tokenizer, self.optimizer, self.state)

    async def arun(self, resume: bool = False) -> dict[str, Any]:
        cfg = self.cfg
        self.run_dir.mkdir(parents=True, exist_ok=True)
        dump_config(cfg, self.run_dir / "config.yaml")
        resumed = self.resume() if resume else False
        if not resumed:
            random.seed(cfg.seed)
            np.random.seed(cfg.seed)
            torch.manual_seed(cfg.seed)
            if self.metrics.path.exists():
                self.metrics.path.unlink()
        display = LiveDisplay(cfg, self.console, enabled=cfg.live and is_main())
        started = time.perf_counter() - self.state.elapsed_s
        with display:
            if self.base_eval is None:
                display.status("evaluating the base policy on held-out tasks")
                self.base_eval = await self.evaluate("base", 0)
                self._log_eval(self.base_eval)
                display.eval(self.base_eval)
            while self.state.step < cfg.steps:
                over = bool(cfg.time_budget_s and time.perf_counter() - started > cfg.time_budget_s)
                if any_rank(over):  # data-parallel ranks stop together, or one would wait forever in all_reduce
                    display.status(f"time budget of {cfg.time_budget_s:.0f}s reached at step {self.state.step}")
                    break
                record = await self.train_step(self.state.step)
                self.state.step += 1
                self.state.elapsed_s = time.perf_counter() - started
                record["elapsed_s"] = self.state.elapsed_s
                self.metrics.write(record)
                display.step(record)
                if self.monitor is not None and self.monitor.stop_reason:
                    display.status(f"hacking monitor stopped the run: {self.monitor.stop_reason}")
                    break
                if cfg.eval_every and self.state.step % cfg.eval_every == 0 and self.state.step < cfg.steps:
                    result = await self.evaluate(f"step {self.state.step}", self.state.step)
                    self._log_eval(result)
                    display.eval(result)
                if cfg.save_every and self.state.step % cfg.save_every == 0 and is_main():
                    self.checkpoint()
            display.status("evaluating the trained policy on held-out tasks")
            final = await self.evaluate("trained", self.state.step)
            self._log_eval(final)
            display.eval(final)
        if cfg.save_every and is_main():
            self.checkpoint()
        return self.finish(final)

    def finish(self, final: EvalResult) -> dict[str, Any]:
        assert self.base_eval is not None
        diff, ci = paired_difference(final, self.base_eval)
        lines = [
            self.base_eval.line(),
            final.line(),
            f"    gain: {diff:+.3f} [95% CI {ci[0]:+.3f}, {ci[1]:+.3f}] (paired over tasks) after "
            f"{self.state.step} steps of {self.cfg.advantage.estimator}",
        ]
        lines += self.monitor.summary_lines() if self.monitor is not None else []
        records = self.metrics.read()
        plots = write_plots(records, self.run_dir / "plots") if self.cfg.plots else []
        html = write_html(self.run_dir, self.cfg.model_dump(mode="json"), records, plots, lines)
        summary = {
            "base": self.base_eval.model_dump(mode="json"),
            "trained": final.model_dump(mode="json"),
            "gain": diff,
            "gain_ci": list(ci),
            "steps": self.state.step,
            "lines": lines,
            "html": str(html),
            "estimator": self.cfg.advantage.estimator,
        }
        import json

        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
        if self.backend is not None:
            self.backend.close()
        return summary

    def run(self, resume: bool = False) -> dict[str, Any]:
        return asyncio.run(self.arun(resume=resume))
