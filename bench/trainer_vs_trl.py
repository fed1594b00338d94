"""Our GRPO step vs TRL's ``GRPOTrainer`` step: same model, prompts, reward, batch (8 x up to 256 tokens), loss.

Each side runs in its own subprocess (so peak RSS is its own): ``STEPS`` GRPO steps of one group of 8
completions (max 192 new tokens after a ~40-token prompt), beta 0, clip 0.2/0.28, token-mean loss, lr 1e-6,
fp32 on CPU with the same thread count (``--bf16``: both sides in bf16 mixed precision, ours
``bf16_autocast``, TRL ``bf16=True``), gradient checkpointing off on both sides (TRL's ``GRPOConfig`` turns it
on by default, which is what made TRL's peak RSS ~1.1 GB lower than ours in earlier runs; ``--checkpointing``
turns it on for both). Prints tokens/s (prompt + completion tokens processed per second of step
time, generation included) and peak RSS for both, and the ratios. The sides run ``--repeats`` times each,
interleaved (ours, TRL, ours, TRL, ...), and the bench prints each side's median with min-max and the ratios of the
medians. Target: >= 1.5x TRL's tokens/s at <= 0.8x its peak RSS.

``--phases`` also splits each side's step time into phases (seconds per counted step, exclusive: a phase's own
time, not the phases it calls, so a side's rows sum to its step time; wall-clock, and CPU seconds of all threads,
steadier on a loaded machine) by wrapping the functions each side runs:
the model body's forward (prefill: several positions; decode: one; update: with autograd), our sampler's
``_process``/``draw``, the packed GEMMs and their packing, the detokenizer, ``Tensor.backward``, the optimizer
step. The wrappers cost a little time themselves (most of it in ``gen: linear GEMMs``, one call per linear layer
per token), so compare tokens/s from runs without ``--phases``.

    .venv/bin/python bench/trainer_vs_trl.py [--steps 3] [--threads 2] [--bf16] [--repeats 3] [--phases]
"""

from __future__ import annotations

import argparse
import functools
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

PROMPTS = [
    "Write one sentence about the sea.",
    "Name three colours and explain why you like them.",
    "Describe a cat in a few words.",
    "What is a good breakfast? Answer briefly.",
]
MAX_NEW = 192


def reward(text: str) -> float:
    """A simple programmatic reward both sides share: prefer answers near 40 words that mention 'blue'."""
    words = len(text.split())
    return max(0.0, 1.0 - abs(words - 40) / 40) + (0.5 if "blue" in text.lower() else 0.0)


def _ids(x):  # apply_chat_template returns a list or a BatchEncoding depending on the version
    return x["input_ids"] if isinstance(x, dict) or hasattr(x, "input_ids") else x


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Phases:
    """Exclusive seconds per named phase, wall-clock and CPU (``time.process_time``: all of the process's threads,
    which keeps its meaning on a loaded machine): a phase entered inside another is subtracted from it.

    One stack for the process: each side runs its phases one after another (our sampler's thread runs while the
    event loop waits on it), never two at once."""

    def __init__(self) -> None:
        self.sec: dict[str, list[float]] = {}  # name -> [wall seconds, CPU seconds]
        self.stack: list[list[Any]] = []  # [name, wall start, CPU start, wall nested, CPU nested]

    def enter(self, name: str) -> None:
        self.stack.append([name, time.perf_counter(), time.process_time(), 0.0, 0.0])

    def exit(self) -> None:
        name, wall, cpu, nested_wall, nested_cpu = self.stack.pop()
        took = (time.perf_counter() - wall, time.process_time() - cpu)
        got = self.sec.setdefault(name, [0.0, 0.0])
        got[0] += took[0] - nested_wall
        got[1] += took[1] - nested_cpu
        if self.stack:
            self.stack[-1][3] += took[0]
            self.stack[-1][4] += took[1]

    def inside(self, name: str) -> bool:
        return any(f[0] == name for f in self.stack)

    def wrap(self, obj: Any, attr: str, name: str | Callable[..., str]) -> None:
        """Time ``obj.attr`` calls as ``name`` (or as ``name(*args, **kwargs)``, which picks the phase)."""
        inner = getattr(obj, attr)

        @functools.wraps(inner)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.enter(name(*args, **kwargs) if callable(name) else name)
            try:
                return inner(*args, **kwargs)
            finally:
                self.exit()

        setattr(obj, attr, timed)


def _positions(args: tuple, kwargs: dict) -> int:
    ids = kwargs.get("input_ids", args[0] if args else None)
    return 0 if ids is None else int(ids.shape[-1])


def _time_ours(ph: Phases, policy: Any, opt: Any) -> None:
    import torch

    import rubricgym.agents.decode as decode
    import rubricgym.agents.lean as lean
    import rubricgym.trainers.engine.update as update
    from rubricgym.agents.packed import PackedLinears

    def body_phase(*args: Any, **kwargs: Any) -> str:
        if torch.is_grad_enabled():
            return "update: forward (body)"
        return "gen: prefill (body)" if _positions(args, kwargs) > 1 else "gen: decode (body)"

    def linear_phase(*args: Any, **kwargs: Any) -> str:
        if ph.inside("gen: prefill (body)"):
            return "gen: prefill (body)"  # counted with the body it runs in
        return "gen: linear GEMMs (packed)" if ph.inside("gen: decode (body)") else "gen: LM head (packed)"

    def lean_phase(lean: Any, cache: Any, *args: Any, **kwargs: Any) -> str:
        return body_phase(*args, **kwargs)

    body = getattr(policy.lm, policy.lm.base_model_prefix)
    ph.wrap(body, "forward", body_phase)
    ph.wrap(lean.LeanLlama, "hidden", lean_phase)  # the sampler's lean forward (agents/lean.py) runs the body
    ph.wrap(lean, "_linear", linear_phase)
    ph.wrap(PackedLinears, "linear", linear_phase)
    ph.wrap(PackedLinears, "pack_fused", "gen: weight packing (oneDNN reorder)")  # pack() and the lean fused packs
    ph.wrap(decode, "_process", "gen: sampler (temperature, log-softmax)")
    ph.wrap(decode, "draw", "gen: sampler (draw)")
    ph.wrap(policy.tokenizer, "decode", "gen: detokenize (stop strings, text)")
    ph.wrap(update, "generated_logprobs", "update: forward (LM head, log-probs)")
    ph.wrap(update, "ppo_clip_loss", "update: loss")
    ph.wrap(torch.Tensor, "backward", "update: backward")
    ph.wrap(update, "grad_norm_and_clip", "update: gradient norm and clip")
    ph.wrap(opt, "step", "update: optimizer step")
    ph.wrap(update, "_check_weights", "update: finite-weights check")
    ph.wrap(policy, "release_packed", "update: release packs (malloc_trim)")


def _time_trl(ph: Phases, trainer: Any) -> None:
    import torch

    model = trainer.model
    gen = "gen: generate (sampling, logits processors, stopping)"

    def body_phase(*args: Any, **kwargs: Any) -> str:
        if torch.is_grad_enabled():
            return "update: forward (body)"
        if not ph.inside(gen):
            return "score: no-grad forward (body)"
        return "gen: prefill (body)" if _positions(args, kwargs) > 1 else "gen: decode (body)"

    ph.wrap(getattr(model, model.base_model_prefix), "forward", body_phase)
    ph.wrap(model.get_output_embeddings(), "forward", "gen: LM head")  # the fused training head uses the weight
    ph.wrap(model, "generate", gen)
    ph.wrap(trainer, "_generate_and_score_completions", "score: other (rewards, padding, tokenizing)")
    ph.wrap(trainer, "compute_loss", "update: forward (fused LM head, log-probs) and loss")
    ph.wrap(torch.Tensor, "backward", "update: backward")


def run_ours(steps: int, threads: int, bf16: bool, checkpointing: bool, phases: bool = False) -> dict:
    import asyncio

    import torch

    from rubricgym.core.types import Message, Task
    from rubricgym.trainers.algo.advantages import grpo_advantages
    from rubricgym.trainers.algo.samples import assign_advantages, build_samples
    from rubricgym.trainers.config import OptimConfig
    from rubricgym.trainers.engine.optim import make_optimizer
    from rubricgym.trainers.engine.policy import TrainingPolicy
    from rubricgym.trainers.engine.update import UpdateSettings, policy_update

    torch.set_num_threads(threads)
    policy = TrainingPolicy(temperature=1.0, max_new_tokens=MAX_NEW, max_batch=8, bf16_autocast=bf16).load()
    model, tok = policy.lm, policy.tokenizer
    if checkpointing:
        (getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable)()
    opt = make_optimizer(model.parameters(), OptimConfig(lr=1e-6))  # the trainer's own (fused) AdamW
    settings = UpdateSettings(optim=OptimConfig(micro_batch=8), temperature=1.0, bf16_autocast=bf16)
    ph = Phases()
    if phases:
        _time_ours(ph, policy, opt)
    tokens, busy = 0, 0.0
    for step in range(steps):
        prompt = policy.prompt_ids([Message(role="user", content=PROMPTS[step % len(PROMPTS)])])
        if step == 1:
            ph.sec.clear()  # the first step warms up
        t0 = time.perf_counter()
        ph.enter("step: other (rewards, advantages, samples)")

        async def group(step: int = step, prompt: list[int] = prompt):
            task = Task(id=f"p{step}", env_id="bench", prompt="")
            views = [policy.episode(task, step * 100 + i) for i in range(8)]
            return await asyncio.gather(*(v.generate(prompt) for v in views))

        ph.enter("gen: other (loop, cache rows, thread hand-off)")
        turns = asyncio.run(group())
        ph.exit()
        rewards = [reward(t.text) for t in turns]
        adv = grpo_advantages([rewards])[0]
        samples = []
        for i, t in enumerate(turns):
            (s,) = build_samples(i, [t], [0])
            samples.append(assign_advantages(s, rollout_advantage=float(adv[i])))
        ph.enter("update: other (collate, statistics)")
        policy.release_packed()
        policy_update(model, opt, samples, settings, pad_id=tok.pad_token_id)
        ph.exit()
        ph.exit()
        if step > 0:  # the first step warms up
            busy += time.perf_counter() - t0
            tokens += sum(len(s) for s in samples)
    out: dict[str, Any] = {"tokens_per_s": tokens / busy, "peak_rss_mb": peak_rss_mb()}
    if phases:
        out["phases"] = {k: [x / (steps - 1) for x in v] for k, v in ph.sec.items()}
        out["tokens_per_step"] = tokens / (steps - 1)
    return out


def run_trl(steps: int, threads: int, bf16: bool, checkpointing: bool, phases: bool = False) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rubricgym.agents.models import model_path

    torch.set_num_threads(threads)
    path = model_path("smollm2-135m-instruct")
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    data = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]} for i in range(steps)]
    )
    times: list[float] = []
    counted: list[int] = []
    ph = Phases()

    def reward_fn(completions, **_):
        texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
        counted.append(sum(len(tok(t)["input_ids"]) for t in texts))
        return [reward(t) for t in texts]

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, *a, **k):
            if state.global_step == 1:
                ph.sec.clear()  # the first step warms up
            self.t0 = time.perf_counter()
            ph.enter("step: other (clip, scheduler, logging)")

        def on_pre_optimizer_step(self, *a, **k):
            ph.enter("update: optimizer step")

        def on_optimizer_step(self, *a, **k):
            ph.exit()

        def on_step_end(self, *a, **k):
            ph.exit()
            times.append(time.perf_counter() - self.t0)

    args = GRPOConfig(
        output_dir="/tmp/trl-bench",
        per_device_train_batch_size=8,
        num_generations=8,
        max_steps=steps,
        max_completion_length=MAX_NEW,
        learning_rate=1e-6,
        beta=0.0,
        epsilon=0.2,
        epsilon_high=0.28,
        loss_type="dapo",
        temperature=1.0,
        use_cpu=True,
        bf16=bf16,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        gradient_accumulation_steps=1,
        dataloader_num_workers=0,
        seed=0,
        gradient_checkpointing=checkpointing,
    )
    trainer = GRPOTrainer(
        model=model, reward_funcs=reward_fn, args=args, train_dataset=data, processing_class=tok, callbacks=[Timer()]
    )
    if phases:
        _time_trl(ph, trainer)
    trainer.train()
    prompt_len = [
        len(
            _ids(
                tok.apply_chat_template(
                    [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}], add_generation_prompt=True, tokenize=True
                )
            )
        )
        for i in range(steps)
    ]
    tokens = [c + 8 * prompt_len[i] for i, c in enumerate(counted)]
    out: dict[str, Any] = {"tokens_per_s": sum(tokens[1:]) / sum(times[1:]), "peak_rss_mb": peak_rss_mb()}
    if phases:
        out["phases"] = {k: [x / (steps - 1) for x in v] for k, v in ph.sec.items()}
        out["tokens_per_step"] = sum(tokens[1:]) / (steps - 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--side", choices=["ours", "trl"])
    ap.add_argument("--bf16", action="store_true", help="both sides in bf16 mixed precision")
    ap.add_argument("--checkpointing", action="store_true", help="gradient checkpointing on both sides")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved runs per side (median, min-max)")
    ap.add_argument("--phases", action="store_true", help="also print each side's seconds per step by phase")
    a = ap.parse_args()
    flags = (["--bf16"] if a.bf16 else []) + (["--checkpointing"] if a.checkpointing else [])
    flags += ["--phases"] if a.phases else []
    if a.side:
        out = (run_ours if a.side == "ours" else run_trl)(a.steps, a.threads, a.bf16, a.checkpointing, a.phases)
        print("RESULT " + json.dumps(out), flush=True)
        return
    runs: dict[str, list[dict]] = {"ours": [], "trl": []}
    for r in range(a.repeats):  # ours, trl, ours, trl, ...: drift in the machine's load hits both sides
        for side in ("ours", "trl"):
            cmd = [sys.executable, __file__, "--side", side, "--steps", str(a.steps), "--threads", str(a.threads)]
            p = subprocess.run(cmd + flags, capture_output=True, text=True)
            line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line is None:
                sys.exit(f"{side} failed:\n{p.stderr[-3000:]}")
            runs[side].append(json.loads(line[7:]))
            got = runs[side][-1]
            print(
                f"run {r + 1} {side:>4}: {got['tokens_per_s']:.1f} tok/s, peak RSS {got['peak_rss_mb']:.0f} MB",
                flush=True,
            )
    print(
        f"\nprecision: {'bf16 mixed' if a.bf16 else 'fp32'}, gradient checkpointing "
        f"{'on' if a.checkpointing else 'off'}, {a.threads} threads, {a.steps} steps (first is warm-up), "
        f"{a.repeats} interleaved runs per side: median (min-max)"
    )

    def spread(side: str, key: str, fmt: str) -> str:
        xs = [x[key] for x in runs[side]]
        return f"{statistics.median(xs):{fmt}} ({min(xs):{fmt}}-{max(xs):{fmt}})"

    for side, label in (("ours", "rubricgym GRPO step"), ("trl", "TRL GRPOTrainer    ")):
        tps, rss = spread(side, "tokens_per_s", ".1f"), spread(side, "peak_rss_mb", ".0f")
        print(f"{label}: {tps} tok/s, peak RSS {rss} MB")
    speed = [o["tokens_per_s"] / t["tokens_per_s"] for o, t in zip(runs["ours"], runs["trl"], strict=True)]
    memory = [o["peak_rss_mb"] / t["peak_rss_mb"] for o, t in zip(runs["ours"], runs["trl"], strict=True)]
    med_speed = statistics.median(x["tokens_per_s"] for x in runs["ours"]) / statistics.median(
        x["tokens_per_s"] for x in runs["trl"]
    )
    med_mem = statistics.median(x["peak_rss_mb"] for x in runs["ours"]) / statistics.median(
        x["peak_rss_mb"] for x in runs["trl"]
    )
    print(
        f"throughput ratio (ours / TRL), of the medians: {med_speed:.2f}x (per run: "
        f"{', '.join(f'{x:.2f}' for x in speed)}); memory ratio: {med_mem:.2f}x (per run: "
        f"{', '.join(f'{x:.2f}' for x in memory)})"
    )
    met = med_speed >= 1.5 and med_mem <= 0.8
    print(f"target: >= 1.5x TRL's tokens/s at <= 0.8x its peak RSS: {'met' if met else 'not met'}")
    if a.phases:
        print_phases(runs)


def print_phases(runs: dict[str, list[dict]]) -> None:
    """Per side, each phase's median seconds per counted step over the runs (wall-clock, its share of the step, and
    CPU seconds of all threads), and the tokens a step processed."""
    for side, label in (("ours", "rubricgym GRPO step"), ("trl", "TRL GRPOTrainer")):
        names = sorted({k for r in runs[side] for k in r["phases"]})
        med = {
            k: [statistics.median(r["phases"].get(k, [0.0, 0.0])[i] for r in runs[side]) for i in (0, 1)] for k in names
        }
        total = sum(v[0] for v in med.values())
        tokens = statistics.median(r["tokens_per_step"] for r in runs[side])
        print(
            f"\n{label}: seconds per step by phase, exclusive (median of {len(runs[side])} runs; "
            f"{tokens:.0f} tokens per step)\n  {'phase':<58} {'wall':>9}  {'share':>7} {'CPU':>9}"
        )
        for group in ("gen", "score", "update", "step"):
            part = {k: v for k, v in med.items() if k.split(":")[0] == group}
            if part:
                wall, cpu = sum(v[0] for v in part.values()), sum(v[1] for v in part.values())
                print(f"  {group:<58} {wall:7.2f} s  {100 * wall / total:5.1f} % {cpu:7.2f} s")
            for k, (wall, cpu) in part.items():
                print(f"    {k:<56} {wall:7.2f} s  {100 * wall / total:5.1f} % {cpu:7.2f} s")
        print(f"  {'total':<58} {total:7.2f} s          {sum(v[1] for v in med.values()):7.2f} s")


if __name__ == "__main__":
    main()
