"""One training step: roll out groups, score them with the process reward model, estimate advantages, update.

``StepTrainer`` holds what a step needs (the policy and its optimizer, the tasks, the reward entries, the rollout
backend) and does a step in two halves: ``produce`` (``tasks_per_step`` tasks from the training split, a seeded,
epoch-shuffled stream whose position is the data cursor; ``group_size`` rollouts each; rubric scores from the
``ProcessRewardModel`` and, for the tournament estimator, ranks from a ``PairwiseJudge``; guidance re-rolls;
advantages) and ``consume`` (one PPO-clip update, the new weights to the sampler, monitors and rubric buffer).
``trainer.Trainer`` runs the steps, one after the other or pipelined (``async``), with evaluation and checkpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import hashlib
import json
import math
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console

from rubricgym.core.safeio import append_lines
from rubricgym.core.tasks import TaskSet
from rubricgym.core.types import Task, Trajectory
from rubricgym.rewards.judges import Judge
from rubricgym.rewards.pairwise import PairwiseJudge
from rubricgym.rewards.path import RewardPath, build_judges
from rubricgym.rewards.rubric import Rubric
from rubricgym.trainers.algo.entropy import modulate
from rubricgym.trainers.algo.estimate import Estimate, estimate, reward_of
from rubricgym.trainers.algo.guidance import Guide
from rubricgym.trainers.algo.rollouts import Group, Rollout, flatten
from rubricgym.trainers.algo.tournament import TournamentResult, run_tournament
from rubricgym.trainers.config import ConfigError, TrainConfig
from rubricgym.trainers.data import CURRICULUM_LOG, TrainingData, unique_tasks
from rubricgym.trainers.engine import sharding
from rubricgym.trainers.engine.backends import make_backend
from rubricgym.trainers.engine.checkpoint import TrainState, latest_checkpoint
from rubricgym.trainers.engine.distributed import (
    backend_for,
    init_from_env,
    is_main,
    local_device,
    rank_world,
    shard,
)
from rubricgym.trainers.engine.lora import add_adapters, trainable_parameters
from rubricgym.trainers.engine.optim import make_optimizer
from rubricgym.trainers.engine.policy import sampler_policy
from rubricgym.trainers.engine.sampler_copy import StagedWeights
from rubricgym.trainers.engine.sampling import RolloutBackend
from rubricgym.trainers.engine.update import NonFiniteUpdate, UpdateSettings, policy_update, turn_entropies
from rubricgym.trainers.entries import RewardEntry
from rubricgym.trainers.evaluation import EvalResult
from rubricgym.trainers.report import Laps, RolloutLog, train_record
from rubricgym.trainers.trackers import TrackedLog


@dataclass
class StepBatch:
    """What one step's rollout side hands the learner: the scored groups, their advantages and samples, the
    phase timings so far, the record fields of scoring and guidance, and the policy version the rollouts were
    sampled from (``Turn.version``); ``guide_state``: the guidance levels after this step's guidance."""

    groups: list[Group]
    est: Estimate
    laps: Laps
    extra: dict[str, Any]
    version: int
    guide_state: dict[str, Any] | None


EVAL_SEED = 10_000_019
"""The first held-out rollout's seed (task ``i``'s is ``EVAL_SEED + 97 * i``), apart from every training seed."""


def step_seeds(run_seed: int, step: int, n: int) -> list[int]:
    """The first rollout seed of each of the ``n`` groups of ``step`` in a run seeded ``run_seed`` (benches that replay
    a run's episodes draw them here too)."""
    return [run_seed * 1_000_003 + step * 10_007 + j * 101 for j in range(n)]


class StepTrainer:
    """What one training step needs and does (``produce`` then ``consume``); ``trainer.Trainer`` runs the steps."""

    def __init__(self, cfg: TrainConfig, *, console: Any = None):
        self.cfg = cfg
        self.console = console
        self.warned_cut = False  # the warning that generated tokens lie past optim.max_seq_len, once a run
        if cfg.ray and int(os.environ.get("WORLD_SIZE", "1")) > 1:
            why = None
            if cfg.guidance is not None:
                why = "guidance re-rolls only the groups that failed on each rank, so ranks would not collect together"
            elif cfg.async_.enabled:
                why = "async.enabled would collect while the update's gradient all_reduce runs on the same group"
            if why:
                raise ConfigError(
                    "ray: true under torchrun shares rank 0's rollout pool, and each collection is a collective of "
                    f"every rank; {why}. Drop it, or start `rubricgym train` without torchrun"
                )
        device = local_device(cfg.model.device)  # under torchrun: this rank's GPU (LOCAL_RANK) when on GPUs
        init_from_env(backend_for(device))  # under torchrun (WORLD_SIZE > 1): join the data-parallel process group
        self.run_dir = Path(cfg.run_dir)
        if not is_main():  # other data-parallel ranks keep their own metrics apart
            self.run_dir = self.run_dir / f"rank{rank_world()[0]}"
        # metrics.jsonl, each record also sent to the report_to trackers (rank 0's only)
        trackers = cfg.report_to if is_main() else []
        self.metrics = TrackedLog(self.run_dir / "metrics.jsonl", trackers, cfg.model_dump(mode="json"))
        self.setup_tasks()
        # the one reward path (rewards.path) per entry: each trajectory scored with the rubric choose_rubric picks
        # (its task's own, else the entry's, else the env default) by the configured judges, as `score`, eval and
        # the arena do; the judges (and their verdict cache) are shared by every entry
        judges = build_judges(cfg.judge, self.run_dir)
        self.entries: dict[str, RewardEntry] = self.reward_entries(judges)
        for name, entry in self.entries.items():
            try:
                entry.require_judges(self.entry_tasks(name))  # before any model loads
            except ValueError as e:
                where = f"suite entry {name!r}: " if len(self.entries) > 1 else ""
                raise ConfigError(f"judge: {where}{e}") from None
        self.rollout_log = RolloutLog(self.run_dir) if cfg.keep_rollouts else None
        if cfg.model.threads:
            torch.set_num_threads(cfg.model.threads)
        self.policy = sampler_policy(cfg, device)
        self.model = self.policy.lm  # the network the sampler holds: LoRA adapters are injected into it in place
        self.tokenizer = self.policy.tokenizer
        # under LoRA the PeftModel around self.model: what checkpoints save and the KL reference disables
        self.peft = None if cfg.model.lora is None else add_adapters(self.model, cfg.model.lora, cfg.seed)
        if cfg.model.train_layers is not None:  # the top k layers train, the rest stays the model it loaded
            sharding.select_layers(self.model, cfg.model.train_layers, "model.train_layers")
        if cfg.model.gradient_checkpointing:
            (getattr(self.model, "activation_checkpointing_enable", None) or self.model.gradient_checkpointing_enable)()
        self.ref_model: Any = None
        if cfg.loss.beta > 0:  # the frozen initial policy: under LoRA the same network with its adapters off
            self.ref_model = self.peft if self.peft is not None else self.frozen_copy()
        if cfg.model.parallel.strategy == "fsdp2":  # each rank keeps 1/world of the weights (engine/sharding.py)
            sharding.shard(self.model, cfg.model.parallel)
            if self.ref_model is not None and self.peft is None:
                sharding.shard(self.ref_model, cfg.model.parallel)
        self.optimizer = make_optimizer(
            trainable_parameters(self.model), cfg.optim, sharded=cfg.model.parallel.strategy == "fsdp2"
        )
        self.settings = UpdateSettings.of(cfg)
        self.backend: RolloutBackend = make_backend(cfg, self.policy, self.env_of)
        # under async.enabled, while steps run: the sampler's own copy of the weights and the backend over it
        self.sampler_copy: StagedWeights | None = None
        self.sampler_backend: RolloutBackend | None = None
        self.consumed_guide_state: dict[str, Any] | None = None
        self.state = TrainState(step=0, cursor=0)
        self.base_eval: EvalResult | None = None
        for name, entry in self.entries.items():
            entry.attach(cfg.monitor, cfg.rubric_buffer, self.policy, self.entry_dir(name))
        self.guide = None if cfg.guidance is None else Guide(cfg.guidance, self.env_of, self.rubric_of)

    # ---- what the run trains on: its entries (one env, or a suite's), their tasks and reward parts -----------

    def setup_tasks(self) -> None:
        """The run's entries, stages, training and held-out tasks (``trainers/data.py``)."""
        self.data = TrainingData(self.cfg)
        self.stages = self.data.stages
        self.train_tasks, self.eval_tasks = self.data.train_tasks, self.data.eval_tasks

    def held_out_tasks(self, split: str) -> TaskSet:
        """``env.eval_tasks`` tasks of another held-out ``split`` of the env, drawn as ``eval_tasks`` is (deep
        search's ``test-train-world``: unseen questions about the training world, beside ``test``'s fresh world).
        A split the env does not have fails with the env's own message."""
        if self.cfg.env.suite is not None:
            raise ConfigError(f"held-out split {split!r}: a suite's held-out tasks are its entries' own")
        cfg = self.cfg
        return unique_tasks(cfg.env.id, cfg.env.eval_tasks, cfg.env.task_seed + 1, split, cfg.env.kwargs)

    # ---- held-out evaluation -------------------------------------------------------------------------------------

    async def evaluate_on(
        self, tasks: Sequence[Task], tag: str, step: int, *, temperature: float, samples: int = 1
    ) -> tuple[EvalResult, list[Trajectory]]:
        """The policy now on ``tasks``: ``samples`` rollouts per task at ``temperature`` (0: greedy, one is
        enough), scored by each task's reward path, in full precision (bf16 greedy decoding of a 135M model flips
        answers). Per task the mean rubric reward and the share solved (``Outcome.succeeded``) over its samples,
        in the order of ``tasks``; the seeds depend only on the task's position, so two policies evaluated on the
        same tasks are compared on the same seeds. Returns the result and every scored trajectory."""
        tasks = list(tasks)
        seeds = [EVAL_SEED + 97 * i for i in range(len(tasks))]
        with self.gathered():
            groups = await self.backend.collect(
                tasks, seeds, max(1, samples), temperature=temperature, full_precision=True
            )
        await self.score(groups)
        rewards, success = [], []
        for group in groups:
            r = [reward_of(x.breakdown) for x in group]
            finite = [v for v in r if math.isfinite(v)]
            rewards.append(float(np.mean(finite)) if finite else math.nan)
            success.append(float(np.mean([float(x.trajectory.outcome.succeeded) for x in group])))
        result = EvalResult.of(tag, step, [g[0].trajectory.task.id for g in groups], rewards, success)
        return result, [x.trajectory for x in flatten(groups)]

    def reward_entries(self, judges: Sequence[Judge]) -> dict[str, RewardEntry]:
        """Per entry its rubric (the suite entry's own, else ``env.rubric``, else the env's default), pairwise judge,
        and later its monitor and rubric buffer."""
        return {e.name: self.reward_entry(e.name, e.env, e.rubric, judges) for e in self.data.entries.values()}

    def reward_entry(self, name: str, env_id: str, rubric: Rubric, judges: Sequence[Judge]) -> RewardEntry:
        a = self.cfg.advantage
        pairwise = PairwiseJudge.from_rubric(rubric, path_weight=a.path_weight) if a.estimator == "tournament" else None
        return RewardEntry(name, env_id, RewardPath(judges, entry=rubric, name=a.reward_key), pairwise=pairwise)

    def entry_rubrics(self) -> dict[str, Any]:
        """``run.json``'s ``rubrics``: the rubric each env's entry scores with (when a suite gives one env two
        rubrics, neither), so ``rubricgym score`` on the kept rollouts picks what the trainer did."""
        by_env: dict[str, set[str]] = {}
        for e in self.entries.values():
            by_env.setdefault(e.env_id, set()).add(e.rubric.hash)
        return {e.env_id: e.rubric.model_dump(mode="json") for e in self.entries.values() if len(by_env[e.env_id]) == 1}

    def entry_tasks(self, name: str) -> list[Task]:
        """The training and held-out tasks entry ``name`` scores (their rubrics need judges)."""
        entry = self.data.entries[name]
        return [*entry.train, *entry.held_out]

    def entry_for(self, task: Task) -> RewardEntry:
        """The entry whose reward path scores ``task``."""
        return self.entries[self.data.entry_name(task)]

    def env_of(self, task: Task) -> tuple[str, dict[str, Any]]:
        """The env id and keyword arguments ``task`` is played in (its entry's)."""
        return self.data.env_of(task)

    def rubric_of(self, task: Task) -> Rubric:
        """The rubric that scores ``task`` (its own, else its entry's)."""
        return self.entry_for(task).path.rubric_for(task)

    def entry_dir(self, name: str) -> Path:
        """Where entry ``name`` records its rubric versions (a suite's entries each in their own folder)."""
        return self.run_dir if self.data.suite is None else self.run_dir / "entries" / name

    @property
    def rubric_hash(self) -> str:
        """The entry rubric version now in use (a digest of every entry's for a suite)."""
        hashes = [f"{n}:{e.rubric.hash}" for n, e in self.entries.items()]
        if len(hashes) == 1:
            return next(iter(self.entries.values())).rubric.hash
        return hashlib.sha256("|".join(hashes).encode()).hexdigest()[:16]

    # ---- data -------------------------------------------------------------------------------------------

    def tasks_at(self, cursor: int, n: int) -> list[Task]:
        """Tasks ``cursor .. cursor+n-1`` of the endless stream (``TrainingData.tasks_at``)."""
        return self.data.tasks_at(cursor, n)

    def seeds_for(self, step: int, n: int) -> list[int]:
        return step_seeds(self.cfg.seed, step, n)

    # ---- one step: the algorithm -------------------------------------------------------------------------

    def cursor_at(self, step: int) -> int:
        """The data cursor at the start of ``step`` (each step takes ``tasks_per_step`` tasks), derived from the
        step so that a pipelined producer needs nothing the learner changes."""
        return self.state.cursor + (step - self.state.step) * self.cfg.tasks_per_step

    async def train_step(self, step: int) -> dict[str, Any]:
        """Roll out a group per task, score it with the rubric, estimate advantages, take one PPO-clip update."""
        return await self.consume(step, await self.produce(step))

    async def produce(self, step: int) -> StepBatch:
        """The rollout side of ``step``: a group per task from the sampler, scored by the reward path (guided
        re-rolls and tournaments included), advantages estimated."""
        cfg, laps = self.cfg, Laps()
        all_tasks = self.tasks_at(self.cursor_at(step), cfg.tasks_per_step)
        tasks, seeds = shard(all_tasks), shard(self.seeds_for(step, len(all_tasks)))  # this rank's groups
        anchor = cfg.advantage.estimator == "tournament" and cfg.advantage.anchor_greedy  # ArenaRL's greedy anchor
        version = step if self.sampler_copy is None else self.sampler_copy.publish()  # the weights it samples from
        extra: dict[str, Any] = {}
        with self.gathered():  # a sharded policy samples from whole weights until the update
            groups = await self.rollout_backend.collect(tasks, seeds, cfg.group_size, anchor_greedy=anchor)
            laps.lap("gen_s")
            extra |= await self.score(groups)
            if self.guide is not None:
                extra |= await self.guide_groups(step, groups, laps)
        for r in flatten(groups):
            for turn in r.turns:
                turn.version = version
        if self.rollout_log is not None:
            self.rollout_log.write(step + 1, [r.trajectory for r in flatten(groups)])
        tournaments = await self.rank_groups(groups) if cfg.advantage.estimator == "tournament" else None
        laps.lap("score_s")
        plain = cfg.guidance is None or cfg.guidance.correction == "tis"
        est = estimate(
            groups,
            self.stages,
            cfg.advantage,
            tournaments=tournaments,
            max_seq_len=cfg.optim.max_seq_len,
            plain_guided=plain,
        )
        guide_state = None if self.guide is None else self.guide.state_dict()
        return StepBatch(groups, est, laps, extra, version, guide_state)

    async def consume(self, step: int, batch: StepBatch) -> dict[str, Any]:
        """The learner side of ``step``: one PPO-clip update on the batch, the new weights to the sampler, the
        monitors and rubric buffer; returns the step's ``metrics.jsonl`` record."""
        cfg, laps, groups, est = self.cfg, batch.laps, batch.groups, batch.est
        if self.sampler_copy is not None:
            laps.lap("queued_s")  # produced ahead, waiting for the learner
        pad_id = self.tokenizer.pad_token_id
        self.policy.release_packed()  # stale after the update, and the update wants the memory
        extra: dict[str, Any] = {}
        aem = cfg.loss.entropy_modulation
        if aem is not None:
            ents = turn_entropies(self.model, est.samples, self.settings, pad_id=pad_id)
            group_of = [g for g, group in enumerate(groups) for _ in group]
            extra |= modulate(est.samples, ents, group_of, aem)
            laps.lap("aem_s")
        update = functools.partial(
            policy_update,
            self.model,
            self.optimizer,
            est.samples,
            self.settings,
            pad_id=pad_id,
            ref_model=self.ref_model,
        )
        try:
            # pipelined, the update runs in a thread so the producer's collection goes on meanwhile
            stats = update() if self.sampler_copy is None else await asyncio.to_thread(update)
        except NonFiniteUpdate as e:
            last = latest_checkpoint(Path(cfg.run_dir))
            kept = f"the last good checkpoint is {last}" if last else "no checkpoint was saved before it"
            raise NonFiniteUpdate(f"training stopped at step {step + 1}: {e}; {kept}") from None
        if self.sampler_copy is None:
            pushed = time.perf_counter()
            self.backend.push_weights(self.model)
            extra["weight_push_s"] = time.perf_counter() - pushed  # to vLLM / Ray workers; ~0 in-process
        else:
            self.sampler_copy.stage(self.model, step + 1)
            self.consumed_guide_state = batch.guide_state
            extra |= {"staleness": step - batch.version, "policy_version": batch.version}
        laps.lap("update_s")
        if isinstance(restarts := getattr(self.backend, "restarts", None), int):
            extra["ray_restarts"] = restarts  # rollout actors replaced so far (trainers/engine/ray_backend.py)
        cursor = self.cursor_at(step + 1)
        record = train_record(step + 1, cursor, groups, est, stats, self.stages, laps)
        if est.cut_tokens and not self.warned_cut and is_main():
            self.warned_cut = True
            (self.console or Console(stderr=True)).print(
                f"[yellow]warning:[/] step {step + 1}: {est.cut_tokens} generated tokens lie past optim.max_seq_len "
                f"({cfg.optim.max_seq_len}) and get no gradient (an episode's last turns, where the answer is); raise "
                "optim.max_seq_len to the longest episode (metrics.jsonl's cut_tokens counts them each step)",
                soft_wrap=True,
            )
        monitored = any(e.monitor is not None for e in self.entries.values())  # monitors may sample the policy
        with self.gathered() if monitored else contextlib.nullcontext():
            extra |= await self.after_step(step + 1, groups)
        return record | batch.extra | extra

    @property
    def rollout_backend(self) -> RolloutBackend:
        """Where training rollouts come from: the sampler's copy while an async run's steps run, else ``backend``
        (evaluation always uses ``backend``: the learner's own weights)."""
        return self.backend if self.sampler_backend is None else self.sampler_backend

    async def guide_groups(self, step: int, groups: list[Group], laps: Laps) -> dict[str, float]:
        """Re-roll part of every group that all failed with a hint (``trainers/algo/guidance.py``), in place."""
        assert self.guide is not None
        laps.lap("score_s")
        scored = [r.breakdown for r in flatten(groups) if r.breakdown is not None]
        rerolls = 0

        async def regenerate(tasks: Sequence[Task], hints: Sequence[str], n: int) -> list[Group]:
            nonlocal rerolls
            rerolls += 1
            seeds = [s + 7_919 * rerolls for s in self.seeds_for(step, len(tasks))]
            fresh = await self.rollout_backend.collect(tasks, seeds, n, hints=hints)
            await self.score(fresh)
            scored.extend(r.breakdown for r in flatten(fresh) if r.breakdown is not None)
            return fresh

        stats = await self.guide.guide(groups, regenerate)
        laps.lap("guide_s")
        return stats.record() | judge_stats(scored)  # every verdict of the step, discarded re-rolls included

    async def score(self, groups: Sequence[Group]) -> dict[str, float]:
        """Put the process reward model's breakdown on every rollout (it also writes the trajectories' rewards);
        returns the LLM verdicts' statistics (``judge_stats``)."""
        by_entry: dict[str, list[Rollout]] = {}
        for r in flatten(groups):
            by_entry.setdefault(self.entry_for(r.trajectory.task).name, []).append(r)
        for name, rollouts in by_entry.items():
            breakdowns = await self.entries[name].path.score_many([r.trajectory for r in rollouts], concurrency=8)
            for r, b in zip(rollouts, breakdowns, strict=True):
                r.breakdown = b
        return judge_stats([r.breakdown for r in flatten(groups) if r.breakdown is not None])

    async def rank_groups(self, groups: Sequence[Group]) -> list[TournamentResult]:
        """ArenaRL: each group's rollouts ranked by a tournament of pairwise judgements."""

        async def one(group: Group) -> TournamentResult:
            judge = self.entry_for(group[0].trajectory.task).pairwise
            assert judge is not None, "the tournament estimator builds a pairwise judge per entry"

            async def compare(i: int, j: int) -> tuple[float, float] | None:
                r = await judge.compare(group[i].trajectory, group[j].trajectory)
                return None if not r.ok or r.score_a is None else (float(r.score_a), float(r.score_b or 0.0))

            return await run_tournament(self.cfg.advantage.topology, len(group), compare)

        return list(await asyncio.gather(*(one(g) for g in groups)))

    async def after_step(self, step: int, groups: Sequence[Group]) -> dict[str, Any]:
        """Each entry's hacking monitor (every ``monitor.every`` steps) and rubric buffer, which may evolve the rubric
        the next step scores with; returns their fields of the step's record (``monitor/<entry>/...`` for a suite)."""
        out: dict[str, Any] = {"rubric_hash": self.rubric_hash}  # the version this step's scores came from
        for name, entry in self.entries.items():
            mine = [g for g in groups if self.entry_for(g[0].trajectory.task) is entry]
            fields = await entry.after_step(step, mine)
            if len(self.entries) > 1:
                fields = {k.replace("monitor/", f"monitor/{name}/", 1): v for k, v in fields.items()}
            out |= fields
        if self.data.sampler is not None:  # a suite: per-entry metrics, then its curriculum learns from the step
            out |= self.data.curriculum_step(groups, self.cfg.advantage.scale, self.cfg.group_size)
            line = json.dumps({"step": step, "q": self.data.sampler.state_dict()}) + "\n"
            append_lines(self.run_dir / CURRICULUM_LOG, line.encode("utf-8"))
        return out

    @property
    def stop_reason(self) -> str | None:
        """Why a hacking monitor stopped the run (the first entry's that did), or ``None``."""
        for name, e in self.entries.items():
            if e.monitor is not None and e.monitor.stop_reason:
                return f"{name}: {e.monitor.stop_reason}" if len(self.entries) > 1 else e.monitor.stop_reason
        return None

    # ---- the policy's weights ----------------------------------------------------------------------------------

    @property
    def trained(self) -> Any:
        """What checkpoints hold: the ``PeftModel`` (its adapter) under LoRA, else the whole network."""
        return self.peft if self.peft is not None else self.model

    @contextlib.contextmanager
    def gathered(self) -> Iterator[None]:
        """Under FSDP2, the policy's whole weights on every rank for the duration (``sharding.gathered``). The
        sampler's packed weights are dropped after: the next gather may reuse their storage for other tensors."""
        if not sharding.is_sharded(self.model):
            yield
            return
        try:
            with sharding.gathered(self.model, self.cfg.model.parallel.reshard_after_forward):
                yield
        finally:
            self.policy.release_packed()

    @property
    def writes_checkpoints(self) -> bool:
        """Rank 0 writes replicated checkpoints; every rank writes its shards of a sharded one."""
        return is_main() or sharding.is_sharded(self.model)

    def frozen_copy(self) -> Any:
        """A frozen copy of the initial policy: full fine-tuning's KL reference."""
        return copy.deepcopy(self.model).eval().requires_grad_(False)


def judge_stats(breakdowns: Sequence[Any]) -> dict[str, float]:
    """A step's LLM verdicts: how many, how many failed (masked rollouts), served from the cache, mean latency."""
    llm = [v for b in breakdowns for v in b.verdicts if v.by_model]
    if not llm:
        return {}
    fresh = [v.latency_s for v in llm if not v.cached]
    return {
        "judge/verdicts": float(len(llm)),
        "judge/errors": float(sum(v.error is not None for v in llm)),
        "judge/cache_hits": float(sum(v.cached for v in llm)),
        "judge/latency_s": float(sum(fresh) / len(fresh)) if fresh else 0.0,
    }
