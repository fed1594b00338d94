"""Behaviour cloning (supervised fine-tuning): the warm start that gives GRPO a policy which already performs the
tool protocol, so its groups have reward variance to learn from (DiagAgent, ARMed: SFT on expert behaviour, then RL).

- **Data**: trajectories from ``rubricgym run`` directories, ``rubricgym export --format sft`` files, or played now
  by a scripted agent of the env (a ``teacher``: it acts only on what the episode showed) on the training split
  GRPO draws from; kept by outcome (``Outcome.succeeded``) or rubric total (rejection sampling). An ``oracle``'s
  trajectories are refused: it reads the task's hidden values, and its clone learns to invent facts.
- **Same renderer**: each assistant turn becomes a sampler ``Turn``: its prompt is ``LocalAgent.render`` of the
  conversation before it (the chat template and ``response_prefix``, exactly what ``act`` feeds the model), its
  completion the turn's text after the prefix, cut after the first stop string as the sampler cuts (an
  end-of-turn token when the text has none). ``samples.build_samples`` lays the turns out as GRPO's rollouts are, so
  only assistant tokens carry ``loss_mask`` 1.
- **Loss**: the mean negative log-likelihood of the assistant tokens (``algo.logprobs.generated_logprobs`` through
  ``logprobs_of``, micro-batched with ``lockstep_batches``, normalised by the global token count, gradients
  summed across ranks): the trainer's own update path, so full, top-k layers (``train_layers``), LoRA and FSDP2
  behave as they do under GRPO. TRL's ``SFTTrainer`` renders with its own template: it cannot meet the
  same-renderer rule.
- **Run directory** (``RUN/warm_start`` under ``rubricgym train``): ``checkpoints/`` in the GRPO trainer's format
  (an interrupted run resumes from the newest), ``metrics.jsonl`` (loss per step; held-out loss and token accuracy),
  ``loss.png``, ``summary.html``, ``summary.json`` and ``model/``, a Hugging Face model directory that
  ``model.name``, ``run --agent local``, ``eval``, ``arena`` and ``serve`` load.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import html
import json
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rubricgym.agents.local import LocalAgent, Turn, chat_dicts
from rubricgym.core.agent import Agent
from rubricgym.core.jsonl import read_jsonl
from rubricgym.core.parsing import parse_tool_call
from rubricgym.core.registry import env_agents, make, spec
from rubricgym.core.rollout import rollout_many
from rubricgym.core.safeio import atomic_write
from rubricgym.core.store import TRAJECTORIES, TrajectoryStore
from rubricgym.core.types import Message, Task, ToolCall, ToolSpec, Trajectory
from rubricgym.rewards.path import RewardPath, build_judges
from rubricgym.rewards.rubric import load_rubric
from rubricgym.trainers.algo.samples import Sample, build_samples, collate
from rubricgym.trainers.config import ConfigError, OptimConfig, TrainConfig, WarmStartConfig, dump_config
from rubricgym.trainers.data import unique_tasks
from rubricgym.trainers.engine import sharding
from rubricgym.trainers.engine.batching import lockstep_batches
from rubricgym.trainers.engine.checkpoint import TrainState, latest_checkpoint, load_checkpoint, save_checkpoint
from rubricgym.trainers.engine.distributed import backend_for, init_from_env, is_main, local_device, shard
from rubricgym.trainers.engine.export import export_merged
from rubricgym.trainers.engine.lora import add_adapters, trainable_parameters
from rubricgym.trainers.engine.optim import make_optimizer
from rubricgym.trainers.engine.policy import sampler_policy
from rubricgym.trainers.engine.update import NonFiniteUpdate, logprobs_of, normalizer, sync_gradients
from rubricgym.trainers.report import MetricsLog

WARM_START_DIR = "warm_start"
"""Where ``rubricgym train`` keeps its warm start, inside the run directory."""
MODEL_DIR = "model"
"""The finished warm start's Hugging Face model directory, inside the warm start's directory."""
STAMP = "warm_start.json"
"""The config a warm start directory was made with: a different one is refused, never silently reused."""

Render = Callable[[list[Message]], list[int]]
PathOf = Callable[[Task], RewardPath]
"""The reward path that scores a task (a suite's entry's, under ``rubricgym train``)."""


# ---- data ------------------------------------------------------------------------------------------------------


@dataclass
class Demo:
    """One conversation to clone: its messages and what rejection sampling reads (outcome, rubric total)."""

    id: str
    task_id: str
    agent: str
    messages: list[Message]
    source: str
    succeeded: bool | None = None
    """``Outcome.succeeded``; None where the source has no outcome (an ``export --format sft`` row)."""
    score: float | None = None
    """The rubric total (``scores.jsonl``, the trajectory's ``rubric`` reward, or scored here); None: none yet."""
    trajectory: Trajectory | None = None
    train_from: int = 0
    """Only assistant messages from this index on are cloned: a DAgger label trains the teacher's turn, not the
    clone's turns before it (``relabel``)."""


def demos_from_trajectories(trajectories: Sequence[Trajectory], source: str, totals: dict[str, Any]) -> list[Demo]:
    return [
        Demo(
            t.id,
            t.task.id,
            t.agent,
            list(t.messages),
            source,
            succeeded=t.outcome.succeeded,
            score=totals.get(t.id, t.rewards.get("rubric")),
            trajectory=t,
        )
        for t in trajectories
    ]


SCORES = "scores.jsonl"
"""What ``rubricgym score RUN_DIR`` writes: each trajectory's rubric total."""


def rubric_totals(run: Path) -> dict[str, float | None]:
    """Trajectory id -> rubric total from ``run/scores.jsonl`` (None: its verdicts failed); empty without one."""
    path = run / SCORES
    totals: dict[str, float | None] = {}
    if not path.exists():
        return totals
    for n, record in read_jsonl(path, ConfigError):
        tid = record.get("trajectory_id") if isinstance(record, dict) else None
        total = record.get("total") if isinstance(record, dict) else None
        if not isinstance(tid, str) or not (total is None or isinstance(total, int | float)):
            raise ConfigError(f"{path}:{n}: not a score record (trajectory_id and total); re-run `rubricgym score`")
        totals[tid] = None if total is None else float(total)
    return totals


def read_demos(path: str | Path) -> list[Demo]:
    """The conversations in a ``rubricgym run`` directory or an ``export --format sft`` JSONL file."""
    p = Path(path)
    if p.is_dir():
        if not (p / TRAJECTORIES).exists():
            raise ConfigError(f"warm_start.data: {p} has no {TRAJECTORIES}; give a `rubricgym run` directory")
        return demos_from_trajectories(list(TrajectoryStore(p).iter()), str(p), rubric_totals(p))
    if not p.is_file():
        raise ConfigError(f"warm_start.data: {p}: no such run directory or file")
    out = []
    for n, row in read_jsonl(p, ConfigError):
        if not isinstance(row, dict) or not isinstance(row.get("messages"), list):
            raise ConfigError(
                f"warm_start.data: {p}:{n}: not an SFT row (an object with a messages list, as "
                "`rubricgym export --format sft` writes)"
            )
        try:
            messages = [_message(m) for m in row["messages"]]
        except (ValueError, TypeError, KeyError) as e:
            raise ConfigError(f"warm_start.data: {p}:{n}: a message does not parse ({e})") from None
        score = row.get("score")
        out.append(
            Demo(
                str(row.get("trajectory_id") or f"{p.name}:{n}"),
                str(row.get("task_id") or f"{p.name}:{n}"),
                str(row.get("agent") or "export"),
                messages,
                f"{p}:{n}",
                score=float(score) if isinstance(score, int | float) else None,
            )
        )
    return out


def _message(d: dict[str, Any]) -> Message:
    """A ``Message`` from its OpenAI dict (``Message.to_openai``'s inverse: tool calls' arguments are JSON text)."""
    calls = d.get("tool_calls")
    parsed = None
    if calls:
        parsed = [
            ToolCall(
                id=c.get("id"),
                name=c["function"]["name"],
                arguments=json.loads(c["function"].get("arguments") or "{}"),
            )
            for c in calls
        ]
    return Message(
        role=d["role"],
        content=d.get("content"),
        tool_calls=parsed,
        tool_call_id=d.get("tool_call_id"),
        name=d.get("name"),
    )


def is_oracle(agent: str) -> bool:
    """Whether an agent name is a scripted oracle's (it may read ``hidden``: never a teacher)."""
    return agent.startswith("oracle")


def refuse_oracles(demos: Sequence[Demo], ws: WarmStartConfig) -> None:
    if ws.allow_oracle:
        return
    bad = sorted({d.source.split(":")[0] for d in demos if is_oracle(d.agent)})
    if bad:
        raise ConfigError(
            f"warm_start: {', '.join(bad)} holds trajectories of an oracle, which reads the task's hidden values: "
            "its clone learns to invent facts. Clone a teacher's trajectories (`rubricgym run ENV --agent teacher`)"
        )


async def score_missing(demos: Sequence[Demo], path_of: PathOf) -> None:
    """Give every trajectory without a rubric total the one its reward path scores (None where a verdict failed)."""
    todo = [d for d in demos if d.score is None and d.trajectory is not None]
    by_path: dict[int, tuple[RewardPath, list[Demo]]] = {}
    for d in todo:
        assert d.trajectory is not None
        path = path_of(d.trajectory.task)
        by_path.setdefault(id(path), (path, []))[1].append(d)
    for path, mine in by_path.values():
        breakdowns = await path.score_many([d.trajectory for d in mine if d.trajectory is not None])
        for d, b in zip(mine, breakdowns, strict=True):
            d.score = float(b.total) if b.valid and b.total is not None else None


def select(demos: Sequence[Demo], ws: WarmStartConfig) -> list[Demo]:
    """Rejection sampling: the demos ``ws.keep`` keeps."""
    if ws.keep == "all":
        return list(demos)
    if ws.keep == "succeeded":
        unknown = sorted({d.source.split(":")[0] for d in demos if d.succeeded is None})
        if unknown:
            raise ConfigError(
                f"warm_start.keep: succeeded needs outcomes, and {', '.join(unknown)} has none (an `export --format "
                "sft` file); set keep: rubric (its rows' scores) or keep: all"
            )
        return [d for d in demos if d.succeeded]
    return [d for d in demos if d.score is not None and d.score >= ws.min_rubric]


# ---- the sampler's rendering -------------------------------------------------------------------------------------


def clone_turns(
    messages: Sequence[Message],
    render: Render,
    tokenizer: Any,
    *,
    response_prefix: str,
    stop: Sequence[str],
    max_new_tokens: int | None = None,
    first: int = 0,
) -> list[Turn]:
    """Each assistant message of ``messages`` as the sampler's ``Turn``: the prompt ``render`` gives for the
    messages before it, the completion its text after ``response_prefix`` (part of the prompt), cut after the first
    stop string as generation stops there, else ended with the end-of-turn token. A turn the policy could never
    have produced raises ``ValueError``: one that does not start with the prefix, or (given ``max_new_tokens``,
    the sampler's cap) one longer than the sampler may generate: cloning it teaches an output the sampler cuts
    off mid-call, and every such turn of the policy then fails to parse. ``first``: assistant messages before this
    index are context, not turns."""
    turns = []
    eos = tokenizer.eos_token_id
    for i, m in enumerate(messages):
        if m.role != "assistant" or i < first:
            continue
        text = chat_dicts([m])[0]["content"]
        if not text.startswith(response_prefix):
            raise ValueError(f"assistant turn {i} does not start with generation.response_prefix {response_prefix!r}")
        text = text[len(response_prefix) :]
        ends = [text.index(s) + len(s) for s in stop if s in text]
        completion = list(tokenizer.encode(text[: min(ends)] if ends else text, add_special_tokens=False))
        if max_new_tokens is not None and len(completion) > max_new_tokens:
            raise ValueError(
                f"assistant turn {i} is {len(completion)} tokens, over generation.max_new_tokens "
                f"{max_new_tokens}: the sampler would cut it off, so the policy could never produce it; raise "
                f"generation.max_new_tokens to at least {len(completion)} or clone shorter turns"
            )
        if not ends:
            completion.append(eos)
        if not completion:
            continue
        turns.append(Turn(list(render(list(messages[:i]))), completion, [0.0] * len(completion), text))
    return turns


class CutConversationError(ValueError):
    """A conversation whose assistant tokens run past ``optim.max_seq_len``: its last turns would not be cloned."""

    def __init__(self, needed: int, max_seq_len: int):
        super().__init__(f"its assistant turns run to token {needed}, past optim.max_seq_len ({max_seq_len})")
        self.needed = needed


def demo_samples(
    index: int,
    messages: Sequence[Message],
    policy: LocalAgent,
    max_seq_len: int,
    render: Render | None = None,
    max_new_tokens: int | None = None,
    first: int = 0,
    allow_cut: bool = False,
) -> list[Sample]:
    """The training sequences of one conversation, laid out as GRPO lays out a rollout (``build_samples``: turns
    whose prompt extends the sequence so far share it). ``max_new_tokens``: the sampler's cap
    (``generation.max_new_tokens``), which no turn may exceed (``clone_turns``). A sequence whose assistant tokens
    run past ``max_seq_len`` raises ``CutConversationError`` (its last turns, where an episode's answer is, would
    silently not be cloned); with ``allow_cut`` it is cut to ``max_seq_len`` and one left with no assistant token
    is dropped."""
    turns = clone_turns(
        messages,
        render or policy.render,
        policy.tokenizer,
        response_prefix=policy.response_prefix,
        stop=policy.stop,
        max_new_tokens=max_new_tokens,
        first=first,
    )
    samples = build_samples(index, turns, [0] * len(turns))
    if not allow_cut:
        for s in samples:
            if s.generated_past(max_seq_len):
                raise CutConversationError(len(s), max_seq_len)
    return [s for s in (x.truncate(max_seq_len) for x in samples) if s.n_generated]


# ---- the loss ----------------------------------------------------------------------------------------------------


def turn_starts(loss_mask: Sequence[int], k: int) -> list[bool]:
    """Whether each token is among the first ``k`` of its assistant turn (a run of ``loss_mask`` 1s; turns are
    always apart, an observation lies between them): the decision of the turn, such as the tool's name."""
    out, run = [], 0
    for m in loss_mask:
        run = run + 1 if m else 0
        out.append(0 < run <= k)
    return out


def weigh_decisions(samples: Sequence[Sample], k: int, weight: float) -> None:
    """Give the first ``k`` tokens of every assistant turn of ``samples`` the loss weight ``weight``, every other
    assistant token 1 (kept in ``Sample.advantages``: cloning is a policy gradient whose advantage is the weight)."""
    for s in samples:
        s.advantages = [
            (weight if start else 1.0) if m else 0.0
            for m, start in zip(s.loss_mask, turn_starts(s.loss_mask, k), strict=True)
        ]


def _accuracies(record: dict[str, Any], lead: str) -> str:
    """A progress line's held-out accuracies (token and decision), or ``""`` at a step without an evaluation."""
    if "heldout_accuracy" not in record:
        return ""
    decision = record.get("heldout_decision_accuracy")
    return f"{lead}held-out acc {record['heldout_accuracy']:.3f}" + (
        "" if decision is None else f", decisions {decision:.3f}"
    )


def nll_gradients(model: torch.nn.Module, samples: Sequence[Sample], micro_batch: int, pad_id: int) -> dict[str, float]:
    """Accumulate the gradient of the mean negative log-likelihood of ``samples``' assistant tokens (``loss_mask``
    1; every rank's share of the global token count) into ``model``'s ``.grad``, each token weighted by its
    ``Sample.advantages`` where ``weigh_decisions`` set them (else 1); returns the loss and token count."""
    norm = normalizer(samples, "token-mean")
    forward = logprobs_of(model)
    weighted = any(s.advantages for s in samples)
    total, tokens = 0.0, 0
    for _chunk, b, filler in lockstep_batches(model, samples, micro_batch, pad_id):
        logp, _ = forward(b.input_ids, b.attention_mask, b.loss_mask)
        if filler:  # a sharded rank's extra micro-batch: the collectives run, the gradient gets zero
            (logp.sum() * 0.0).backward()
            continue
        loss = -(logp * (b.loss_mask * b.advantages if weighted else b.loss_mask)).sum() / max(norm, 1.0)
        loss.backward()
        total += float(loss.detach())
        tokens += int(b.loss_mask.sum())
    return {"loss": _sum_over_ranks(total), "tokens": float(tokens)}


def _sum_over_ranks(value: float) -> float:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        t = torch.tensor([value], dtype=torch.float64)
        torch.distributed.all_reduce(t)
        return float(t.item())
    return value


@torch.no_grad()
def heldout_metrics(
    model: torch.nn.Module, samples: Sequence[Sample], micro_batch: int, pad_id: int, decision_tokens: int = 2
) -> dict[str, float]:
    """Mean negative log-likelihood and greedy token accuracy (the argmax is the cloned token) on ``samples``'
    assistant tokens, and the decision accuracy: the share of turns whose first ``decision_tokens`` tokens are all
    the argmax (``turn_starts``), on whole weights (a sharded model is gathered for it)."""
    if not samples:
        return {}
    body = getattr(model, getattr(model, "base_model_prefix", "model"))
    head = model.get_output_embeddings()  # type: ignore[operator]
    device = next(model.parameters()).device
    nll, right, count, decided, turns = 0.0, 0, 0, 0, 0
    was_training = model.training
    model.eval()
    with sharding.gathered(model) if sharding.is_sharded(model) else contextlib.nullcontext():
        for start in range(0, len(samples), micro_batch):
            chunk = samples[start : start + micro_batch]
            b = collate(chunk, pad_id).to(device)
            hidden = body(input_ids=b.input_ids, attention_mask=b.attention_mask).last_hidden_state
            select = b.loss_mask[:, 1:] > 0
            logits = head(hidden[:, :-1][select]).float()
            targets = b.input_ids[:, 1:][select]
            nll += float(torch.nn.functional.cross_entropy(logits, targets, reduction="sum"))
            hits = (logits.argmax(-1) == targets).tolist()
            right += sum(hits)
            count += len(hits)
            i = 0  # the selected tokens come in row order: every token with loss_mask 1 (a prompt comes first)
            for sample in chunk:
                ok: bool | None = None  # this turn's decision tokens were all the argmax so far
                firsts, begins = turn_starts(sample.loss_mask, decision_tokens), turn_starts(sample.loss_mask, 1)
                for m, first, begin in zip(sample.loss_mask, firsts, begins, strict=True):
                    if not m:
                        continue
                    if begin:
                        if ok is not None:
                            decided, turns = decided + ok, turns + 1
                        ok = True
                    ok = bool(ok) and (hits[i] or not first)
                    i += 1
                if ok is not None:
                    decided, turns = decided + ok, turns + 1
    model.train(was_training)
    return {
        "heldout_loss": nll / max(count, 1),
        "heldout_accuracy": right / max(count, 1),
        "heldout_decision_accuracy": decided / max(turns, 1),
        "heldout_tokens": count,
    }


# ---- the run -----------------------------------------------------------------------------------------------------


def fingerprint(cfg: TrainConfig) -> dict[str, Any]:
    """What a warm start's result depends on: a directory made under another is not reused."""
    data = cfg.model_dump(mode="json")
    model = {k: data["model"][k] for k in ("name", "dtype", "lora")}
    if cfg.model.train_layers is not None and (cfg.warm_start is None or cfg.warm_start.train_layers is None):
        model["train_layers"] = cfg.model.train_layers  # without its own, the clone trains GRPO's layers
    return {
        "warm_start": data["warm_start"],
        "model": model,
        "env": {k: data["env"][k] for k in ("id", "kwargs", "train_tasks", "task_seed", "rubric", "suite")},
        "response_prefix": data["generation"]["response_prefix"],
        "max_seq_len": data["optim"]["max_seq_len"],
    }


def check_stamp(out: Path, cfg: TrainConfig) -> None:
    """Refuse a directory holding a warm start made with another config; stamp a new one."""
    mine = fingerprint(cfg)
    path = out / STAMP
    if path.exists():
        theirs = json.loads(path.read_text(encoding="utf-8"))
        if theirs != mine:
            changed = sorted(k for k in mine if mine[k] != theirs.get(k))
            raise ConfigError(
                f"{out} holds a warm start made with different settings ({', '.join(changed)}); move it away or "
                "delete it to clone again, or use another run directory"
            )
        return
    out.mkdir(parents=True, exist_ok=True)
    if is_main():
        atomic_write(path, json.dumps(mine, indent=2, sort_keys=True))


def split_held_out(demos: Sequence[Demo], ws: WarmStartConfig) -> tuple[list[Demo], list[Demo]]:
    """Training and held-out demos, by task (a task's trajectories all fall on one side), seeded. The held-out
    tasks are drawn from the cloned trajectories alone, not DAgger's labels, so the split stays the same round
    after round (a label of a held-out task is held out; one of a task no trajectory had is trained on)."""
    sources = {d.task_id for d in demos if not d.train_from}
    tasks = sorted(sources, key=lambda t: hashlib.sha256(f"{ws.seed}:{t}".encode()).hexdigest())
    n = math.ceil(ws.held_out * len(tasks)) if len(tasks) >= 2 and ws.held_out > 0 else 0
    held = set(tasks[:n])
    return [d for d in demos if d.task_id not in held], [d for d in demos if d.task_id in held]


class Cloner:
    """The cloning loop over prepared samples: seeded epoch-shuffled batches, one optimizer step each, held-out
    metrics every ``eval_every`` steps, checkpoints every ``save_every`` steps in ``out`` (resumed exactly)."""

    def __init__(
        self,
        model: torch.nn.Module,
        trained: Any,
        tokenizer: Any,
        optimizer: torch.optim.Optimizer,
        ws: WarmStartConfig,
        optim: OptimConfig,
        out: Path,
        console: Console,
        live: bool,
    ):
        self.model, self.trained, self.tokenizer, self.optimizer = model, trained, tokenizer, optimizer
        self.ws, self.optim, self.out, self.console, self.live = ws, optim, out, console, live
        self.metrics = MetricsLog(out / "metrics.jsonl")
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def batch_at(self, samples: Sequence[Sample], step: int) -> list[Sample]:
        """Step ``step``'s ``batch_size`` samples of the endless stream (each epoch a seeded shuffle)."""
        out = []
        for pos in range(step * self.ws.batch_size, (step + 1) * self.ws.batch_size):
            epoch, i = divmod(pos, len(samples))
            order = np.random.default_rng([self.ws.seed, epoch]).permutation(len(samples))
            out.append(samples[int(order[i])])
        return shard(out)

    def run(self, train: Sequence[Sample], held: Sequence[Sample], until: int | None = None) -> dict[str, Any]:
        """Step up to ``until`` (default ``ws.steps``; DAgger's rounds go on to ``ws.total_steps``)."""
        ws = self.ws
        self.until = ws.steps if until is None else until
        ckpt = latest_checkpoint(self.out)
        state = TrainState(step=0, cursor=0)
        if ckpt is not None:
            state = load_checkpoint(ckpt, self.trained, self.optimizer)
            self.metrics.truncate_after(state.step)
        elif self.metrics.path.exists():
            self.metrics.path.unlink()
        if state.step == 0 and held:
            self.log_eval(0, held)
        started = time.perf_counter() - state.elapsed_s
        with self.progress(state.step) as advance:
            while state.step < self.until:
                record = self.step(state.step, train)
                state.step += 1
                state.cursor = state.step * ws.batch_size
                state.elapsed_s = time.perf_counter() - started
                record |= {"kind": "train", "step": state.step, "elapsed_s": state.elapsed_s}
                self.metrics.write(record)
                last = state.step == self.until
                if held and (last or (ws.eval_every and state.step % ws.eval_every == 0)):
                    record |= self.log_eval(state.step, held)
                if last or (ws.save_every and state.step % ws.save_every == 0):
                    self.save(state)
                advance(record)
        if ckpt is None and self.until == 0:
            self.save(state)
        return self.finish(state)

    def step(self, step: int, train: Sequence[Sample]) -> dict[str, Any]:
        t0 = time.perf_counter()
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        stats = nll_gradients(self.model, self.batch_at(train, step), self.optim.micro_batch, self.pad_id)
        sync_gradients(self.model)
        params = [p for p in self.model.parameters() if p.grad is not None]
        norm = sharding.grad_norm_and_clip(params, self.ws.max_grad_norm)
        if not (math.isfinite(stats["loss"]) and math.isfinite(norm)):
            raise NonFiniteUpdate(
                f"warm start step {step + 1}: loss {stats['loss']}, gradient norm {norm} (weights untouched); "
                "lower warm_start.lr"
            )
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.model.eval()
        return stats | {"grad_norm": norm, "lr": self.ws.lr, "step_s": time.perf_counter() - t0}

    def log_eval(self, step: int, held: Sequence[Sample]) -> dict[str, float]:
        result = heldout_metrics(self.model, held, self.optim.micro_batch, self.pad_id, self.ws.decision_tokens)
        self.metrics.write({"kind": "eval", "step": step, **result})
        return result

    def save(self, state: TrainState) -> None:
        if is_main() or sharding.is_sharded(self.model):
            save_checkpoint(self.out, self.trained, self.tokenizer, self.optimizer, state)

    @contextlib.contextmanager
    def progress(self, done: int) -> Iterator[Callable[[dict[str, Any]], None]]:
        """A rich progress bar on a terminal, else a plain line every ~5% of the steps (logs, CI)."""
        ws = self.ws
        if not (self.live and is_main()):
            yield lambda record: None
            return
        if not self.console.is_terminal:
            every = max(1, ws.total_steps // 20)

            def line(r: dict[str, Any]) -> None:
                if r["step"] % every == 0 or r["step"] == self.until or "heldout_accuracy" in r:
                    acc = _accuracies(r, " ")
                    self.console.print(f"warm start step {r['step']}/{ws.total_steps} loss {r['loss']:.4f}{acc}")

            yield line
            return
        bar = Progress(
            TextColumn("[bold]warm start"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
            console=self.console,
        )
        with bar:
            task = bar.add_task("warm start", total=ws.total_steps, completed=done, status="")

            def advance(r: dict[str, Any]) -> None:
                acc = _accuracies(r, " · ")
                bar.update(task, advance=1, status=f"loss {r['loss']:.4f}{acc}")

            yield advance

    def finish(self, state: TrainState) -> dict[str, Any]:
        records = self.metrics.read()
        train = [r for r in records if r.get("kind") == "train"]
        evals = [r for r in records if r.get("kind") == "eval"]
        first, last = (evals[0], evals[-1]) if evals else ({}, {})
        summary = {
            "steps": state.step,
            "first_loss": train[0]["loss"] if train else None,
            "last_loss": train[-1]["loss"] if train else None,
            "heldout_accuracy_before": first.get("heldout_accuracy"),
            "heldout_accuracy_after": last.get("heldout_accuracy"),
            "heldout_decision_accuracy_before": first.get("heldout_decision_accuracy"),
            "heldout_decision_accuracy_after": last.get("heldout_decision_accuracy"),
            "heldout_loss_before": first.get("heldout_loss"),
            "heldout_loss_after": last.get("heldout_loss"),
            "elapsed_s": state.elapsed_s,
        }
        if is_main():
            write_report(self.out, records, summary)
        return summary


def write_report(out: Path, records: Sequence[dict[str, Any]], summary: dict[str, Any]) -> None:
    """``loss.png`` (training loss; held-out loss and token accuracy) and ``summary.html``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [r for r in records if r.get("kind") == "train"]
    evals = [r for r in records if r.get("kind") == "eval" and r.get("heldout_loss") is not None]
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=100)
    ax.plot([r["step"] for r in train], [r["loss"] for r in train], label="training loss")
    if evals:
        ax.plot([r["step"] for r in evals], [r["heldout_loss"] for r in evals], "o-", label="held-out loss")
        acc = ax.twinx()
        acc.plot([r["step"] for r in evals], [r["heldout_accuracy"] for r in evals], "s--", color="C2")
        acc.set_ylabel("held-out token accuracy", color="C2")
    ax.set_xlabel("step")
    ax.set_ylabel("nats / assistant token")
    ax.set_title("Warm start (behaviour cloning)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "loss.png")
    plt.close(fig)
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(_fmt(v))}</td></tr>" for k, v in summary.items())
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>warm start {html.escape(out.name)}</title>
<style>body{{font-family:sans-serif;margin:2em}}td{{border:1px solid #ccc;padding:2px 6px}}</style></head><body>
<h1>Warm start: {html.escape(str(out))}</h1><table>{rows}</table><img src="loss.png" alt="loss"></body></html>"""
    atomic_write(out / "summary.html", page)
    atomic_write(out / "summary.json", json.dumps(summary, indent=2))


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


# ---- preparing the data ------------------------------------------------------------------------------------------


async def gather_demos(
    cfg: TrainConfig,
    out: Path,
    tasks: Sequence[Task],
    path_of: PathOf,
    console: Console,
    live: bool,
    env_of: EnvOf | None = None,
) -> tuple[list[Demo], dict[str, int]]:
    """Every source's demos (the agent's played now, kept in ``out/teacher`` and reused), oracles refused, then
    the ones ``keep`` keeps; returns them with counts for the summary."""
    ws = cfg.warm_start
    assert ws is not None
    if ws.agent is not None and not ws.allow_oracle and is_oracle(ws.agent):
        refuse_oracles([Demo("", "", ws.agent, [], f"warm_start.agent {ws.agent}")], ws)
    demos: list[Demo] = []
    for src in ws.data:
        demos += read_demos(src)
    if ws.agent is not None:
        for _, _, store in await play(cfg, ws, out / "teacher", tasks, live, env_of):
            demos += demos_from_trajectories(list(store.iter()), str(store.dir), {})
    refuse_oracles(demos, ws)
    if ws.keep == "rubric":
        await score_missing(demos, path_of)
    kept = select(demos, ws)
    counts = {"demos": len(demos), "kept": len(kept)}
    if is_main() and live:
        console.print(f"warm start: keeping {len(kept)} of {len(demos)} trajectories (keep: {ws.keep})")
    if not kept:
        raise ConfigError(
            f"warm_start: none of {len(demos)} trajectories passes keep: {ws.keep}"
            + (f" (min_rubric {ws.min_rubric})" if ws.keep == "rubric" else "")
            + "; give more data, a better teacher, or loosen the filter"
        )
    return kept, counts


EnvOf = Callable[[Task], tuple[str, dict[str, Any]]]
"""The env id and keyword arguments a task is played in (a suite's entry's, under ``rubricgym train``)."""


async def play(
    cfg: TrainConfig,
    ws: WarmStartConfig,
    where: Path,
    tasks: Sequence[Task],
    live: bool,
    env_of: EnvOf | None = None,
    *,
    agent: Agent | None = None,
    pick: Callable[[list[Task]], list[Task]] | None = None,
    seed: int | None = None,
) -> list[tuple[str, dict[str, Any], TrajectoryStore]]:
    """Episodes of ``tasks`` in ``where`` (finished tasks are not played again), per (env, kwargs) group with its
    store: the scripted agent ``ws.agent`` (or ``agent``, the clone in a DAgger round) plays ``pick(group)`` (default:
    the first ``ws.tasks``) at ``seed`` (default ``ws.seed``). With ``env_of`` (a suite's trainer) the tasks are
    grouped by the env and kwargs they are played in, each group kept in ``where/<env>-<k>``."""
    if env_of is None:
        if cfg.env.suite is not None:
            raise ConfigError("warm_start.agent plays one env; with env.suite give data: (run directories) instead")

        def env_of(task: Task) -> tuple[str, dict[str, Any]]:
            return cfg.env.id, cfg.env.kwargs

    groups: dict[str, tuple[str, dict[str, Any], list[Task]]] = {}
    for t in tasks:
        env_id, kwargs = env_of(t)
        key = json.dumps([env_id, kwargs], sort_keys=True, default=str)
        groups.setdefault(key, (env_id, kwargs, []))[2].append(t)
    out: list[tuple[str, dict[str, Any], TrajectoryStore]] = []
    for k, (env_id, kwargs, mine) in enumerate(groups.values()):
        who = teacher_of(env_id, ws) if agent is None else agent
        store_dir = where if len(groups) == 1 else where / f"{env_id}-{k}"
        store = TrajectoryStore(store_dir)
        report = await rollout_many(
            env_id,
            who,
            pick(mine) if pick is not None else mine[: ws.tasks],
            group_size=ws.episodes_per_task if agent is None else 1,
            store=store,
            resume=True,
            seed=ws.seed if seed is None else seed,
            env_kwargs=kwargs,
            progress=live and is_main(),
            description=f"warm start data: {ws.agent if agent is None else 'the clone'} on {env_id}",
        )
        if report.failures:
            who_failed = f"warm_start.agent {ws.agent}" if agent is None else "the clone (DAgger)"
            raise ConfigError(f"{who_failed} on {env_id}: {len(report.failures)} episodes failed: {report.failures[0]}")
        out.append((env_id, kwargs, store))
    return out


def teacher_of(env_id: str, ws: WarmStartConfig) -> Agent:
    """``ws.agent``, the scripted agent of ``env_id`` (a clear error naming the env's agents when it has none)."""
    agents = env_agents(env_id)
    if ws.agent not in agents:
        raise ConfigError(
            f"warm_start.agent: {env_id} has no scripted agent {ws.agent!r}; choose from {', '.join(sorted(agents))}"
        )
    return agents[ws.agent](seed=ws.seed)


# ---- DAgger ------------------------------------------------------------------------------------------------------


async def relabel(episodes: Sequence[Trajectory], teacher: Agent, tools: list[ToolSpec]) -> tuple[list[Demo], int]:
    """DAgger's labels: for every state an episode of the clone reached (the chat before each of its turns), the
    turn ``teacher`` takes there, as a demo that trains that turn alone (``train_from``). The teacher reads only
    the chat, as when it plays. Returns the labels and how many differ from the clone's own turn."""
    labels: list[Demo] = []
    differ = 0
    for t in episodes:
        for i, m in enumerate(t.messages):
            if m.role != "assistant":
                continue
            context = list(t.messages[:i])
            said = await teacher.episode(t.task, t.seed).act(context, tools)
            turn = said if isinstance(said, str) else (said.content or "")
            differ += _call_of(turn) != _call_of(m.content or "")
            labels.append(
                Demo(
                    f"{t.id}@{i}",
                    t.task.id,
                    f"{teacher.name} (DAgger label)",
                    [*context, Message(role="assistant", content=turn)],
                    f"DAgger label of {t.id}",
                    train_from=i,
                )
            )
    return labels, differ


def _call_of(text: str) -> Any:
    call = parse_tool_call(text)
    return call if isinstance(call, str) else (call.name, json.dumps(call.arguments, sort_keys=True))


async def dagger_round(
    cfg: TrainConfig,
    out: Path,
    r: int,
    policy: LocalAgent,
    tasks: Sequence[Task],
    live: bool,
    env_of: EnvOf | None,
) -> tuple[list[Demo], dict[str, Any]]:
    """Round ``r`` (from 0) of DAgger: the clone (``policy``, with the weights cloned so far) plays
    ``dagger_tasks`` training tasks (round ``r`` takes the next ones, wrapping), kept in ``out/dagger-<r+1>`` (a
    finished round is not played again); the teacher labels every state they reached."""
    ws = cfg.warm_start
    assert ws is not None
    policy.release_packed()  # sample the weights cloned so far

    def pick(group: list[Task]) -> list[Task]:
        n = min(ws.dagger_tasks, len(group))
        return [group[(r * n + i) % len(group)] for i in range(n)]

    groups = await play(
        cfg, ws, out / f"dagger-{r + 1}", tasks, live, env_of, agent=policy, pick=pick, seed=ws.seed + 1 + r
    )
    labels: list[Demo] = []
    stats = {"episodes": 0, "solved": 0, "labels": 0, "differ": 0}
    for env_id, kwargs, store in groups:
        episodes = list(store.iter())
        found, differ = await relabel(episodes, teacher_of(env_id, ws), make(env_id, **kwargs).tools())
        labels += found
        stats["episodes"] += len(episodes)
        stats["solved"] += sum(bool(t.outcome.succeeded) for t in episodes)
        stats["labels"] += len(found)
        stats["differ"] += differ
    return labels, stats


def prepare(
    demos: Sequence[Demo], ws: WarmStartConfig, policy: LocalAgent, max_seq_len: int, max_new_tokens: int | None
) -> tuple[list[Sample], list[Sample]]:
    """Training and held-out samples, rendered by ``policy`` (the sampler); no turn longer than the sampler's
    ``max_new_tokens`` (``None``: any length), and no conversation longer than ``max_seq_len`` unless
    ``ws.allow_cut_turns`` (a DAgger label that does not fit is skipped)."""
    train, held = split_held_out(demos, ws)
    out: list[list[Sample]] = []
    cut: list[tuple[int, Demo]] = []
    for part in (train, held):
        samples: list[Sample] = []
        for i, d in enumerate(part):
            try:
                samples += demo_samples(
                    i,
                    d.messages,
                    policy,
                    max_seq_len,
                    max_new_tokens=max_new_tokens,
                    first=d.train_from,
                    allow_cut=ws.allow_cut_turns,
                )
            except CutConversationError as e:
                if not d.train_from:
                    cut.append((e.needed, d))
            except ValueError as e:
                if d.train_from:  # a DAgger label the sampler could not produce: skipped, as the teacher's own
                    continue  # over-long turns are refused before any label exists
                raise ConfigError(f"warm_start: {d.source} (trajectory {d.id}): {e}") from None
        out.append(samples)
    if cut:
        needed, longest = max(cut, key=lambda c: c[0])
        raise ConfigError(
            f"warm_start: {len(cut)} of {len(demos)} conversations run past optim.max_seq_len ({max_seq_len} "
            f"tokens), the longest to {needed} ({longest.source}, trajectory {longest.id}): their last turns, where "
            f"an episode's answer is, would not be cloned. Set optim.max_seq_len to at least {needed}, or "
            "warm_start.allow_cut_turns: true to clone only what fits"
        )
    if ws.decision_weight != 1.0:
        weigh_decisions(out[0], ws.decision_tokens, ws.decision_weight)
    if not out[0]:
        raise ConfigError("warm_start: no training sequence has an assistant token within optim.max_seq_len")
    return out[0], out[1]


def sft_optim(cfg: TrainConfig) -> OptimConfig:
    ws = cfg.warm_start
    assert ws is not None
    return cfg.optim.model_copy(update={"lr": ws.lr, "max_grad_norm": ws.max_grad_norm})


def check(cfg: TrainConfig) -> WarmStartConfig:
    """The warm start's own combination checks, before any model loads."""
    ws = cfg.warm_start
    if ws is None:
        raise ConfigError("no warm_start section: give data (run directories, sft files) or agent (a teacher)")
    if ws.train_layers is not None and cfg.model.lora is not None:
        raise ConfigError("warm_start.train_layers and model.lora both choose what trains: keep one")
    return ws


def finished(out: Path, ws: WarmStartConfig) -> bool:
    """Whether ``out`` holds a finished warm start: its newest checkpoint at ``ws.total_steps``."""
    ckpt = latest_checkpoint(out)
    if ckpt is None:
        return False
    return int(json.loads((ckpt / "state.json").read_text(encoding="utf-8"))["step"]) >= ws.total_steps


async def clone(
    cfg: TrainConfig,
    out: Path,
    *,
    policy: LocalAgent,
    model: torch.nn.Module,
    trained: Any,
    tasks: Sequence[Task],
    path_of: PathOf,
    console: Console,
    live: bool,
    env_of: EnvOf | None = None,
) -> dict[str, Any]:
    """Clone into ``policy``'s network ``model`` in place (``trained``: what checkpoints hold, the ``PeftModel``
    under LoRA), resuming from ``out``'s newest checkpoint; a finished one is loaded as it is, with no data read.
    Writes ``out/model`` and returns the summary."""
    ws = check(cfg)
    check_stamp(out, cfg)
    if is_main():
        dump_config(cfg, out / "config.yaml")  # export_merged reads the base model of a LoRA run from it
    done = finished(out, ws)
    counts: dict[str, Any] = {}
    train: list[Sample] = []
    held: list[Sample] = []
    demos: list[Demo] = []
    cap = None if ws.allow_cut_turns else cfg.generation.max_new_tokens
    if not done:
        demos, counts = await gather_demos(cfg, out, tasks, path_of, console, live, env_of)
        train, held = prepare(demos, ws, policy, cfg.optim.max_seq_len, cap)
        counts |= {"train_sequences": len(train), "heldout_sequences": len(held)}
    elif live and is_main():
        console.print(f"warm start: reusing the finished one in {out}")
    flags = {p: p.requires_grad for p in model.parameters()}
    try:
        params = (
            sharding.select_layers(model, ws.train_layers, "warm_start.train_layers")
            if ws.train_layers
            else trainable_parameters(model)
        )
        optimizer = make_optimizer(params, sft_optim(cfg), sharded=sharding.is_sharded(model))
        cloner = Cloner(model, trained, policy.tokenizer, optimizer, ws, sft_optim(cfg), out, console, live)
        summary = cloner.run(train, held, until=ws.total_steps if done else ws.steps)
        rounds: list[dict[str, Any]] = []
        for r in range(0 if done else ws.dagger_rounds):
            labels, stats = await dagger_round(cfg, out, r, policy, tasks, live, env_of)
            demos += labels
            train, held = prepare(demos, ws, policy, cfg.optim.max_seq_len, cap)
            rounds.append(stats | {"round": r + 1, "train_sequences": len(train)})
            if live and is_main():
                console.print(
                    f"warm start: DAgger round {r + 1}/{ws.dagger_rounds}: the clone solved {stats['solved']} of "
                    f"{stats['episodes']} training tasks; the teacher labelled {stats['labels']} states it reached, "
                    f"{stats['differ']} of them with another turn than the clone's"
                )
            summary = cloner.run(train, held, until=ws.steps + (r + 1) * ws.dagger_steps)
        if rounds:
            counts["dagger"] = rounds
    finally:
        for p, flag in flags.items():
            p.requires_grad_(flag)
    if done:
        saved = out / "summary.json"
        summary = json.loads(saved.read_text(encoding="utf-8")) if saved.exists() else summary
    summary |= counts
    if is_main():
        summary["model"] = str(
            out / MODEL_DIR if done and (out / MODEL_DIR).is_dir() else export_merged(out, out / MODEL_DIR)
        )
        atomic_write(out / "summary.json", json.dumps(summary, indent=2))
    return summary


def run_sft(cfg: TrainConfig, out: Path, *, resume: bool = False, console: Console | None = None) -> dict[str, Any]:
    """``rubricgym sft``: load ``cfg.model`` as the GRPO trainer does (LoRA, FSDP2 as configured) and clone."""
    console = console or Console()
    check(cfg)
    if latest_checkpoint(out) is not None and not resume:
        raise ConfigError(f"{out} holds a warm start's checkpoints: pass --resume to continue it, or another --out")
    device = local_device(cfg.model.device)
    init_from_env(backend_for(device))
    if cfg.model.threads:
        torch.set_num_threads(cfg.model.threads)
    policy = sampler_policy(cfg, device)  # the sampler as the trainer runs it: DAgger plays with it
    model = policy.lm
    torch.manual_seed(cfg.warm_start.seed if cfg.warm_start else 0)
    peft = None if cfg.model.lora is None else add_adapters(model, cfg.model.lora, cfg.seed)
    if cfg.model.gradient_checkpointing:  # as the GRPO trainer enables it (step.py)
        (getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable)()
    if cfg.model.parallel.strategy == "fsdp2":
        sharding.shard(model, cfg.model.parallel)
    tasks = (
        list(unique_tasks(cfg.env.id, cfg.env.train_tasks, cfg.env.task_seed, "train", cfg.env.kwargs))
        if cfg.warm_start is not None and cfg.warm_start.agent is not None
        else []
    )
    rubric = load_rubric(cfg.env.rubric) if cfg.env.rubric is not None else None
    path = RewardPath(build_judges(cfg.judge, out), entry=rubric or _default_rubric(cfg))
    return asyncio.run(
        clone(
            cfg,
            out,
            policy=policy,
            model=model,
            trained=peft if peft is not None else model,
            tasks=tasks,
            path_of=lambda task: path,
            console=console,
            live=cfg.live,
        )
    )


def _default_rubric(cfg: TrainConfig) -> Any:
    if cfg.env.suite is not None:
        return None
    return spec(cfg.env.id).load().default_rubric()


async def warm_start(trainer: Any) -> dict[str, Any]:
    """``rubricgym train``'s warm start: clone into the trainer's freshly loaded policy in place, in
    ``RUN/warm_start`` (reused when finished, resumed when interrupted), before any GRPO step. A full fine-tuning
    KL reference is reset to the warm-started weights (under LoRA it stays the base with the adapters off)."""
    cfg: TrainConfig = trainer.cfg
    out = Path(cfg.run_dir) / WARM_START_DIR
    summary = await clone(
        cfg,
        out,
        policy=trainer.policy,
        model=trainer.model,
        trained=trainer.trained,
        tasks=list(trainer.train_tasks),
        path_of=lambda task: trainer.entry_for(task).path,
        console=trainer.console or Console(),
        live=cfg.live,
        env_of=trainer.env_of if cfg.env.suite is not None else None,
    )
    if trainer.ref_model is not None and trainer.peft is None:
        trainer.ref_model.load_state_dict(trainer.model.state_dict())
    trainer.policy.release_packed()  # the sampler's packed copies hold the weights from before cloning
    trainer.backend.push_weights(trainer.model)  # a vLLM server or Ray workers sample the warm-started weights
    return summary
