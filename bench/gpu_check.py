"""GPU readiness in one table: vLLM generation on the family demos' episodes, one bf16 FSDP2 GRPO step, the weight
push to vLLM, peak GPU memory. ``bench/gpu_check.sh`` installs what is missing and runs this.

Pieces, in order (each a function here, the same on a GPU and in ``--dry-run``):

1. ``generate``: the clinical and deep-search demos' step-0 episodes (their tasks, seeds, temperature, new tokens,
   response prefix; ``--tasks`` x ``--group`` per family) played by the trainer's harness
   (``trainers.rollouts.play_groups``) through a vLLM server (``VLLMBackend``, server mode, bf16, sharing the GPU:
   ``--gpu-memory-utilization``); generated tokens/s.
2. ``grpo_step``: the learner (fp32 master weights) sharded with FSDP2 (``trainers/engine/sharding.py``, bf16 mixed
   precision: bf16 compute, fp32 gradient reduction) in a process group over nccl (gloo on the CPU), one
   ``policy_update`` (PPO-clip, AdamW) on the generated turns with alternating +1/-1 advantages (the update's cost
   does not depend on their values); tokens/s (prompt + completion) and MFU against the GPU's dense bf16 peak
   (``bench/trainer_gpu.py``'s table or ``--peak-tflops``), FLOPs counted as 3 x forward.
3. ``push``: the updated weights gathered from the shards and pushed to the server (``VLLMBackend.push_weights``:
   safetensors + in-place reload + prefix-cache reset); seconds.
4. Peak GPU memory: the most ``nvidia-smi`` reported in use on the device during the run (vLLM + learner), and the
   learner's own ``torch.cuda.max_memory_allocated``.

``--dry-run`` runs the same functions on the CPU with a tiny model (``--model DIR``, 1 task x 2 episodes, 8 new
tokens, gloo); generation then uses the local sampler unless ``--dry-run-vllm`` starts vLLM's CPU server.

    .venv/bin/python bench/gpu_check.py                     # on a GPU machine (bench/gpu_check.sh does the set-up)
    .venv/bin/python bench/gpu_check.py --dry-run --model DIR
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trainer_gpu import forward_flops_per_token, peak_tflops

from rubricgym.agents.local import LocalAgent, Turn
from rubricgym.agents.models import DEFAULT_MODEL, model_path
from rubricgym.agents.serve import VLLMServer, free_port
from rubricgym.trainers.algo.samples import Sample
from rubricgym.trainers.config import GenerationConfig, OptimConfig, ParallelConfig
from rubricgym.trainers.data import unique_tasks
from rubricgym.trainers.demo import FAMILY_DEMOS
from rubricgym.trainers.engine.policy import TrainingPolicy
from rubricgym.trainers.engine.sampling import fixed_env, play_groups
from rubricgym.trainers.engine.sharding import full_state_dict, shard
from rubricgym.trainers.engine.update import UpdateSettings, policy_update
from rubricgym.trainers.engine.vllm_backend import VLLMBackend, untied_model_dir
from rubricgym.trainers.step import step_seeds


class CheckFailed(RuntimeError):
    """A piece of the check could not run; the message says what to install or change."""


@dataclass
class GpuMemory:
    """The most memory ``nvidia-smi`` reports in use on GPU 0, sampled every 0.5 s while running."""

    peak_mib: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> GpuMemory:
        if shutil.which("nvidia-smi") is None:
            return self

        def poll() -> None:
            while not self._stop.is_set():
                out = subprocess.run(
                    ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if out.returncode == 0 and out.stdout.strip():
                    self.peak_mib = max(self.peak_mib, float(out.stdout.split()[0]))
                self._stop.wait(0.5)

        self._thread = threading.Thread(target=poll, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> float:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return self.peak_mib


def family_work(tasks: int | None, group: int | None) -> list[tuple[str, list[Any], list[int], int, Any]]:
    """Per family demo: its name, step-0 training tasks and seeds (as the trainer draws them), group size, env
    (``bench/rollouts.py`` plays the same episodes)."""
    out = []
    for fam, d in FAMILY_DEMOS.items():
        env = d["env"]
        n = tasks or d["tasks_per_step"]
        ts = list(unique_tasks(env["id"], env["train_tasks"], d["seed"], "train", env["kwargs"]))[:n]
        seeds = step_seeds(d["seed"], 0, n)  # as the trainer draws step 0's
        out.append((fam, ts, seeds, group or d["group_size"], fixed_env(env["id"], env["kwargs"])))
    return out


def generate(recorder: Any, work: list[tuple[str, list[Any], list[int], int, Any]]) -> tuple[float, list[Turn], int]:
    """Play every family's episodes through ``recorder``; (seconds, turns, episodes)."""
    t0 = time.perf_counter()
    turns: list[Turn] = []
    episodes = 0

    async def run() -> None:
        nonlocal episodes
        results = await asyncio.gather(*(play_groups(recorder, env_of, ts, s, g) for _, ts, s, g, env_of in work))
        for groups in results:
            for grp in groups:
                episodes += len(grp)
                turns.extend(t for ro in grp for t in ro.turns)

    asyncio.run(run())
    return time.perf_counter() - t0, turns, episodes


def start_vllm(policy: LocalAgent, gen: GenerationConfig, gpu_util: float | None) -> VLLMBackend:
    """A dev-mode vLLM server for the policy's current weights (untied, bf16) and the trainer's backend over it."""
    os.environ["VLLM_SERVER_DEV_MODE"] = "1"
    serve_dir = Path(tempfile.mkdtemp(prefix="gpu-check-vllm-"))
    untied_model_dir(policy.lm, model_path(policy.model or DEFAULT_MODEL), serve_dir)
    extra = ["--gpu-memory-utilization", str(gpu_util)] if gpu_util else []
    try:
        server = VLLMServer(str(serve_dir), served_name="policy", extra_args=extra).start()
    except FileNotFoundError as e:
        raise CheckFailed(str(e)) from None
    backend = VLLMBackend(
        server.base_url,
        server.model,
        policy.tokenizer,
        fixed_env("toy-calculator-v0", {}),
        temperature=gen.temperature,
        top_p=gen.top_p,
        max_new_tokens=gen.max_new_tokens,
        prefix=gen.response_prefix,
        server=server,
    )
    backend.serve_dir = serve_dir
    backend.check_processed_logprobs()
    return backend


def samples_of(turns: list[Turn], limit: int) -> list[Sample]:
    """One training sample per turn (prompt untrained, completion trained), advantages alternating +1/-1."""
    out = []
    for i, t in enumerate(turns[:limit]):
        s = Sample(i)
        s.extend(t.prompt_ids, False, 0, 0)
        s.extend(t.completion_ids, True, 0, 0, t.logprobs)
        s.advantages = [0.0] * len(t.prompt_ids) + [1.0 if i % 2 else -1.0] * len(t.completion_ids)
        out.append(s)
    return out


def grpo_step(policy: LocalAgent, samples: list[Sample], micro_batch: int) -> tuple[float, int]:
    """One FSDP2 (bf16 mixed precision) GRPO update on ``samples``; (seconds, tokens)."""
    model = policy.lm
    shard(model, ParallelConfig(strategy="fsdp2", mixed_precision="bf16"))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-6)
    settings = UpdateSettings(optim=OptimConfig(micro_batch=micro_batch), temperature=policy.params.temperature)
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    sync()
    t0 = time.perf_counter()
    policy_update(model, opt, samples, settings, pad_id=policy.tokenizer.pad_token_id)
    sync()
    return time.perf_counter() - t0, sum(len(s) for s in samples)


def push(backend: VLLMBackend, policy: LocalAgent, plain: Any) -> float:
    """Gather the sharded learner's weights into ``plain`` (an unsharded copy) and push them; seconds."""
    t0 = time.perf_counter()
    state = full_state_dict(policy.lm)
    plain.load_state_dict(state, strict=False)
    backend.push_weights(plain)
    return time.perf_counter() - t0


def init_group(device: torch.device) -> str:
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(
            backend, init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1
        )
    return backend


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny settings (needs --model: a small model dir)")
    ap.add_argument("--dry-run-vllm", action="store_true", help="in --dry-run, generate with vLLM's CPU server")
    ap.add_argument("--model", default=None, help="model name or dir (default: the demos' model)")
    ap.add_argument("--tasks", type=int, default=None, help="tasks per family (GPU default 8; dry run 1)")
    ap.add_argument("--group", type=int, default=None, help="episodes per task (GPU default 16; dry run 2)")
    ap.add_argument("--train-samples", type=int, default=256, help="turns the GRPO step trains on")
    ap.add_argument("--peak-tflops", type=float, default=None)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.35, help="vLLM's share of the GPU")
    a = ap.parse_args(argv)
    dry = a.dry_run
    if dry and not a.model:
        ap.error("--dry-run needs --model DIR (a tiny model: tests build one)")
    if not dry and not torch.cuda.is_available():
        print("gpu_check: torch sees no CUDA GPU; run bench/gpu_check.sh (it installs a CUDA torch) or --dry-run")
        return 2
    device = torch.device("cuda" if not dry else "cpu")
    first = next(iter(FAMILY_DEMOS.values()))
    gen = GenerationConfig.model_validate(first["generation"])
    model = a.model or first["model"]["name"]
    tasks, group = (a.tasks or 1, a.group or 2) if dry else (a.tasks or 8, a.group or 16)
    if dry:
        gen = gen.model_copy(update={"max_new_tokens": 8})
        torch.set_num_threads(2)
    card = torch.cuda.get_device_name(0) if device.type == "cuda" else "CPU (dry run)"
    print(f"gpu_check on {card}: {tasks} task(s) x {group} episodes per family, {gen.max_new_tokens} new tokens/turn")
    mem = GpuMemory().start()
    policy = TrainingPolicy(
        model,
        temperature=gen.temperature,
        top_p=gen.top_p,
        max_new_tokens=gen.max_new_tokens,
        max_batch=gen.max_batch,
        response_prefix=gen.response_prefix,
        kv_reuse_tokens=gen.kv_reuse_tokens if dry else 0,
        device=str(device),
    ).load()
    work = family_work(tasks, group)
    rows: list[tuple[str, str]] = []
    backend: VLLMBackend | None = None
    try:
        use_vllm = not dry or a.dry_run_vllm
        if use_vllm:
            t0 = time.perf_counter()
            backend = start_vllm(policy, gen, a.gpu_memory_utilization if not dry else None)
            rows.append(("vLLM server start", f"{time.perf_counter() - t0:.1f} s"))
        engine = "vLLM" if use_vllm else "local sampler (dry run)"
        wall, turns, episodes = generate(backend if backend is not None else policy, work)
        tokens = sum(len(t.completion_ids) for t in turns)
        rows.append(
            (f"generation, {engine}", f"{tokens / wall:.1f} tokens/s ({episodes} episodes, {len(turns)} turns)")
        )
        policy.release_packed()
        plain = None
        if backend is not None:
            import copy

            plain = copy.deepcopy(policy.lm)  # the unsharded twin the gathered weights are loaded into for a push
        comm = init_group(device)
        samples = samples_of(turns, a.train_samples)
        if not samples:
            raise CheckFailed("generation produced no turns to train on")
        step_s, step_tokens = grpo_step(policy, samples, micro_batch=8 if dry else 32)
        flops = 3 * forward_flops_per_token(policy.lm, statistics.mean(len(s) for s in samples) / 2) * step_tokens
        peak = peak_tflops(device, a.peak_tflops)
        mfu = f"{100 * flops / step_s / (peak * 1e12):.2f}%" if peak else "n/a (no bf16 peak known: --peak-tflops)"
        rows.append(
            (
                f"GRPO step, FSDP2 bf16, {comm}",
                f"{step_tokens / step_s:.1f} tokens/s ({step_s:.2f} s, {len(samples)} samples)",
            )
        )
        rows.append(("GRPO step MFU", mfu))
        if backend is not None and plain is not None:
            rows.append(("weight push to vLLM", f"{push(backend, policy, plain):.2f} s (gather + save + reload)"))
        else:
            rows.append(("weight push to vLLM", "skipped (dry run without --dry-run-vllm)"))
    except CheckFailed as e:
        print(f"gpu_check: {e}")
        return 2
    finally:
        if backend is not None:
            backend.close()
        gpu_peak = mem.stop()
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    if device.type == "cuda":
        learner = torch.cuda.max_memory_allocated() / 2**20
        rows.append(
            ("peak GPU memory", f"{gpu_peak:.0f} MiB on the device (vLLM + learner); learner {learner:.0f} MiB")
        )
    else:
        rows.append(("peak memory (CPU RSS)", f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"))
    width = max(len(k) for k, _ in rows)
    print("\n" + "-" * (width + 40))
    for k, v in rows:
        print(f"{k:<{width}} | {v}")
    print("-" * (width + 40))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
