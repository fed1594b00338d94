"""Multi-turn rollout throughput: today's sampler against candidate CPU engines on the family demos' episodes.

The workload is one GRPO step's collection of each family demo (``trainers/demo.py`` ``FAMILY_DEMOS``): its
``tasks_per_step`` training tasks (the trainer's task list, seed and split) x ``group_size`` episodes, the
trainer's seeds for step 0, the demo's temperature, top-p, new tokens per turn, batch size, key/value reuse and
response prefix, played by the trainer's own harness (``trainers.rollouts.play_groups``). The policy is the base
model (no warm start).

Engines (``--engines``, comma-separated):

- ``fp32``: today's sampler (``TrainingPolicy``: packed fp32 weights, lean forward, key/value reuse);
- ``bf16-autocast``: today's sampler under bf16 autocast (``LocalAgent.bf16_autocast``);
- ``bf16`` / ``int8``: a bf16 / int8-weight-only copy of the fp32 policy (``agents/engines/lowp.py``);
- ``bf16-lean`` / ``bf16-lean-kvbf16``: today's sampler with the decoder's GEMMs on bf16 packs of the fp32 weights,
  keys/values in fp32 / bf16 (``agents/engines/lean_bf16.py``);
- ``llamacpp-f16`` / ``llamacpp-q8_0`` / ``llamacpp-f32``: llama.cpp on a GGUF export (``agents/engines/llamacpp.py``);
- ``vllm``: vLLM's CPU server (``.venv-vllm``) with the trainer's ``VLLMBackend`` (server mode, bf16).

Each round plays every (family, engine) once, the engines in a rotated order so load from other processes hits
all of them; each engine reports the median (min-max) of its rounds' episodes/minute and generated tokens/s, the
ratio of medians against ``fp32`` and whether it reaches the 2x target, and this process's CPU seconds per episode
(the fairer measure on a machine other processes load; vLLM's server is another process: n/a).
The RL distribution check recomputes, for
the first round's turns, each sampled token's log-prob with the trainer's fp32 function
(``trainers.update.generated_logprobs`` on the fp32 master at the sampling temperature) and compares it with the
log-prob the engine recorded: max and mean absolute difference and the mismatch KL (``trainers.loss.mismatch_kl``,
k3, per token). Tolerance (``AGREE``): mismatch KL <= 1e-3 nats/token and mean |diff| <= 0.05 agree; KL <= 1e-2
is left to the trainer's truncated importance weights (``off_policy: tis``); above that the engine is refused.
Weight sync: the seconds to bring each engine up to the master's weights (re-copy, re-quantise, GGUF export, or
vLLM's push), timed once after the rounds.

    .venv/bin/python bench/rollouts.py                  # both families, every engine, 3 rounds
    .venv/bin/python bench/rollouts.py --quick          # clinical only, 2 rounds, one task
    .venv/bin/python bench/rollouts.py --tiny-model DIR --engines fp32,bf16   # seconds: a smoke run (tests)
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import resource
import signal
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from gpu_check import family_work

from rubricgym.agents.local import LocalAgent, Turn
from rubricgym.core.types import Message, Task
from rubricgym.trainers.algo.logprobs import generated_logprobs
from rubricgym.trainers.algo.loss import mismatch_kl
from rubricgym.trainers.algo.rollouts import Group
from rubricgym.trainers.config import GenerationConfig
from rubricgym.trainers.demo import FAMILY_DEMOS
from rubricgym.trainers.engine.policy import TrainingPolicy
from rubricgym.trainers.engine.sampling import play_groups

TARGET = 2.0
AGREE = {"kl": 1e-3, "mean_abs": 0.05}
CORRECTABLE_KL = 1e-2
ENGINES = (
    "fp32",
    "bf16-autocast",
    "bf16",
    "int8",
    "bf16-lean",
    "bf16-lean-kvbf16",
    "llamacpp-f16",
    "llamacpp-q8_0",
    "vllm",
)
DEFAULT_ENGINES = ("fp32", "bf16-lean", "bf16", "int8", "llamacpp-f16", "vllm")


def load_avg() -> float:
    return os.getloadavg()[0]


class Recording:
    """A ``LocalAgent`` of another class (an engine's) as the trainer's ``Recorder`` (``TrainingPolicy.recording``)."""

    def __init__(self, agent: LocalAgent):
        self.agent = agent
        self.name = "policy"
        self.model = agent.model

    def render(self, messages: list[Message]) -> list[int]:
        return self.agent.render(messages)

    def recording(self, task: Task, seed: int, temperature: float | None) -> LocalAgent:
        view = self.agent.episode(task, seed)
        if temperature is not None:
            view.params = replace(view.params, temperature=temperature)
        return view


@dataclass
class Engine:
    name: str
    recorder: Any
    sync: Callable[[], float]
    reset: Callable[[], None] = lambda: None
    close: Callable[[], None] = lambda: None
    rates: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # family -> (episodes/min, tok/s)
    cpu: dict[str, list[float]] = field(default_factory=dict)  # family -> this process's CPU s per episode
    turns: dict[str, list[Turn]] = field(default_factory=dict)
    loads: list[float] = field(default_factory=list)
    server_pid: int | None = None  # an engine's server process (vLLM), whose memory is not this process's


def tree_rss_mb(pid: int) -> int:
    """Resident memory of process ``pid`` and all its descendants (Linux ``/proc``), in MB; 0 where unreadable."""
    parent: dict[int, int] = {}
    rss: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:  # exited meanwhile
            continue
        parent[int(d)] = int(fields.get("PPid", "0").strip())
        rss[int(d)] = int(fields.get("VmRSS", "0 kB").split()[0])
    tree, frontier = {pid}, [pid]
    while frontier:
        kids = [c for c, p in parent.items() if p in frontier and c not in tree]
        tree.update(kids)
        frontier = kids
    return sum(rss.get(p, 0) for p in tree) // 1024


def make_engine(name: str, policy: LocalAgent, gen: GenerationConfig, env_of: Any) -> Engine:
    """The engine ``name`` over ``policy``'s fp32 weights (see the module docstring)."""
    if name == "fp32":
        return Engine(name, policy, sync=lambda: _timed(policy.release_packed), reset=policy.forget_kv)
    if name == "bf16-autocast":
        agent = policy.with_model(policy.lm)
        agent.bf16_autocast = True
        return Engine(name, agent, sync=lambda: _timed(agent.release_packed), reset=agent.forget_kv)
    if name in ("bf16", "int8"):
        from rubricgym.agents.engines.lowp import LowPrecisionSampler

        lowp = LowPrecisionSampler(policy, name)  # type: ignore[arg-type]
        return Engine(name, lowp.agent, sync=lowp.sync, reset=lowp.agent.forget_kv)
    if name in ("bf16-lean", "bf16-lean-kvbf16"):
        from rubricgym.agents.engines.lean_bf16 import LeanBf16Sampler

        lean = LeanBf16Sampler(policy, kv="bf16" if name.endswith("kvbf16") else "fp32")
        return Engine(name, lean.agent, sync=lean.sync, reset=lean.agent.forget_kv)
    if name.startswith("llamacpp-"):
        from rubricgym.agents.engines.llamacpp import LlamaCppSampler

        t0 = time.perf_counter()
        cpp = LlamaCppSampler(policy, dtype=name.removeprefix("llamacpp-"), contexts=gen.max_batch)
        print(f"  {name}: tokenizer metadata + first export {time.perf_counter() - t0:.1f} s", flush=True)
        return Engine(name, Recording(cpp.agent), sync=cpp.sync, close=cpp.close)
    if name == "vllm":
        from rubricgym.trainers.engine.vllm_backend import VLLMBackend

        t0 = time.perf_counter()
        backend = VLLMBackend.for_policy(policy, gen, env_of)
        print(f"  vllm: server up in {time.perf_counter() - t0:.1f} s", flush=True)
        server = backend.server.process if backend.server is not None else None
        return Engine(
            name,
            backend,
            sync=lambda: _timed(lambda: backend.push_weights(policy.lm)),
            close=backend.close,
            server_pid=server.pid if server is not None else None,
        )
    raise ValueError(f"unknown engine {name!r}: choose from {', '.join(ENGINES)}")


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def play(
    engine: Engine, tasks: list[Task], seeds: list[int], group: int, env_of: Any
) -> tuple[float, float, list[Group]]:
    """Wall and this process's CPU seconds to play the groups (vLLM's CPU is its server's: not counted)."""
    engine.reset()
    t0, c0 = time.perf_counter(), time.process_time()
    groups = asyncio.run(play_groups(engine.recorder, env_of, tasks, seeds, group))
    return time.perf_counter() - t0, time.process_time() - c0, groups


@dataclass
class Agreement:
    tokens: int
    max_abs: float
    mean_abs: float
    kl: float

    @property
    def verdict(self) -> str:
        if self.tokens == 0:
            return "no tokens"
        if self.kl <= AGREE["kl"] and self.mean_abs <= AGREE["mean_abs"]:
            return "agrees"
        return "TIS-corrected" if self.kl <= CORRECTABLE_KL else "REFUSED"


def agreement(model: Any, turns: list[Turn], temperature: float, limit: int = 24) -> Agreement:
    """The engine's recorded log-probs of its own samples against the trainer's fp32 recomputation."""
    diffs, kl_sum, n = [], 0.0, 0
    for turn in turns[:limit]:
        if not turn.completion_ids:
            continue
        ids = torch.tensor([turn.prompt_ids + turn.completion_ids])
        loss_mask = torch.zeros_like(ids)
        loss_mask[0, len(turn.prompt_ids) :] = 1
        with torch.no_grad():
            ref, _ = generated_logprobs(model, ids, torch.ones_like(ids), loss_mask, temperature)
        ref = ref[0, len(turn.prompt_ids) :].float()
        got = torch.tensor(turn.logprobs, dtype=torch.float32)
        known = torch.isfinite(got)
        diffs.append((ref - got)[known].abs())
        s, k = mismatch_kl(ref.unsqueeze(0), got.unsqueeze(0), torch.ones_like(got).unsqueeze(0))
        kl_sum, n = kl_sum + s, n + k
    if not diffs:
        return Agreement(0, math.nan, math.nan, math.nan)
    d = torch.cat(diffs)
    return Agreement(n, float(d.max()), float(d.mean()), kl_sum / max(n, 1))


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):7.2f} ({min(xs):.2f}-{max(xs):.2f})"


def play_rounds(engines: list[Engine], work: dict[str, Any], rounds: int) -> None:
    """Every (family, engine) once per round, the engines in a rotated order; rates, CPU and turns kept on each."""
    for r in range(rounds):
        order = engines[r % len(engines) :] + engines[: r % len(engines)]
        for fam, (tasks, seeds, group, env_of) in work.items():
            for e in order:
                e.loads.append(load_avg())
                wall, cpu, groups = play(e, tasks, seeds, group, env_of)
                turns = [t for g in groups for ro in g for t in ro.turns]
                tokens = sum(len(t.completion_ids) for t in turns)
                episodes = sum(len(g) for g in groups)
                e.rates.setdefault(fam, []).append((60 * episodes / wall, tokens / wall))
                e.cpu.setdefault(fam, []).append(cpu / episodes)
                e.turns.setdefault(fam, turns)
                print(
                    f"round {r + 1} {fam:>13} {e.name:>16}: {episodes} episodes, {len(turns)} turns, "
                    f"{tokens} tokens in {wall:6.1f} s, {cpu:6.1f} CPU s (load {e.loads[-1]:.1f})",
                    flush=True,
                )


def report(a: argparse.Namespace, families: list[str], engines: list[Engine], policy: Any, gen: Any) -> None:
    """Sync each engine once, then print the throughput and log-prob agreement tables."""
    syncs = {}
    for e in engines:
        syncs[e.name] = e.sync()
    print(
        f"\nload average at end: {load_avg():.2f}; "
        f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB (all engines in this process)"
    )
    for e in engines:
        if e.server_pid is not None:
            print(f"{e.name} server processes' RSS after the rounds: {tree_rss_mb(e.server_pid)} MB")
    print(
        f"all engines in one process, interleaved, {a.rounds} round(s); temperature {gen.temperature}, "
        f"{gen.max_new_tokens} new tokens/turn; ratio = median vs fp32's median; target {TARGET:.0f}x episodes/min"
    )
    header = (
        f"{'family':>13} {'engine':>16} | {'episodes/min':>22} | {'gen tokens/s':>22} | ratio | target "
        f"| CPU s/episode | CPU ratio"
    )
    for fam in families:
        print("\n" + header)
        base = statistics.median(x for x, _ in engines[0].rates[fam])
        base_cpu = statistics.median(engines[0].cpu[fam])
        for e in engines:
            eps = [x for x, _ in e.rates[fam]]
            tps = [y for _, y in e.rates[fam]]
            ratio = statistics.median(eps) / base
            hit = "met" if ratio >= TARGET else "-"
            cpu = statistics.median(e.cpu[fam])
            cpu_ratio = "n/a" if e.name == "vllm" else f"{base_cpu / cpu:4.2f}x"  # vLLM's server is another process
            print(
                f"{fam:>13} {e.name:>16} | {spread(eps):>22} | {spread(tps):>22} | {ratio:4.2f}x | {hit:>6} "
                f"| {spread(e.cpu[fam]):>13} | {cpu_ratio}"
            )
    print(
        f"\nlog-prob agreement with the trainer's fp32 recomputation (tolerance: KL <= {AGREE['kl']:g} and mean |diff| "
        f"<= {AGREE['mean_abs']:g} agree; KL <= {CORRECTABLE_KL:g} TIS-corrected; else refused)"
    )
    print(f"{'engine':>16} | tokens | max |diff| | mean |diff| | mismatch KL | verdict | weight sync s")
    for e in engines:
        turns = [t for fam in families for t in e.turns.get(fam, [])]
        ag = agreement(policy.lm, turns, gen.temperature if gen.temperature > 0 else 1.0, limit=a.agree_turns)
        print(
            f"{e.name:>16} | {ag.tokens:6d} | {ag.max_abs:10.4f} | {ag.mean_abs:11.5f} | {ag.kl:11.2e} | "
            f"{ag.verdict:>7} | {syncs[e.name]:.2f}"
        )


def _exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default=",".join(FAMILY_DEMOS))
    ap.add_argument("--engines", default=",".join(DEFAULT_ENGINES))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=None, help="tasks per family (default: the demo's tasks_per_step)")
    ap.add_argument("--group", type=int, default=None, help="episodes per task (default: the demo's group_size)")
    ap.add_argument("--quick", action="store_true", help="clinical only, 2 rounds, 1 task (--group still applies)")
    ap.add_argument("--tiny-model", default=None, help="a model dir: 1 task x 2 episodes, 8 new tokens, 1 round")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--agree-turns",
        type=int,
        default=24,
        help="turns per engine in the log-prob check (each is one fp32 forward over its whole prompt: ~10 s late "
        "in a clinical episode on 2 loaded cores)",
    )
    a = ap.parse_args(argv)
    families = a.families.split(",")
    if a.quick:
        families, a.rounds, a.tasks = ["clinical-v0"], 2, a.tasks or 1
    unknown = [f for f in families if f not in FAMILY_DEMOS]
    if unknown:
        ap.error(f"no family demo for {unknown}; choose from {', '.join(FAMILY_DEMOS)}")
    names = a.engines.split(",")
    bad = [n for n in names if n not in ENGINES]
    if bad:
        ap.error(f"unknown engines {bad}; choose from {', '.join(ENGINES)}")
    if "fp32" not in names:
        names.insert(0, "fp32")  # the peer every ratio is taken against
    demo = FAMILY_DEMOS[families[0]]
    gen = GenerationConfig.model_validate(demo["generation"])
    model = demo["model"]["name"]
    if a.tiny_model:
        model, a.rounds, a.tasks, a.group = a.tiny_model, 1, 1, 2
        gen = gen.model_copy(update={"max_new_tokens": 8})
    torch.set_num_threads(a.threads)
    print(f"load average at start: {load_avg():.2f} ({os.cpu_count()} CPUs)", flush=True)
    t0 = time.perf_counter()
    policy = TrainingPolicy(
        model,
        temperature=gen.temperature,
        top_p=gen.top_p,
        max_new_tokens=gen.max_new_tokens,
        max_batch=gen.max_batch,
        response_prefix=gen.response_prefix,
        kv_reuse_tokens=gen.kv_reuse_tokens,
        threads=a.threads,
    ).load()
    print(f"policy {model} loaded in {time.perf_counter() - t0:.1f} s", flush=True)
    by_family = {fam: rest for fam, *rest in family_work(a.tasks, a.group)}  # the episodes gpu_check.py plays
    work = {fam: by_family[fam] for fam in families}
    signal.signal(signal.SIGTERM, _exit)  # `timeout` sends SIGTERM: still close the engines (vLLM's server)
    engines: list[Engine] = []
    try:
        for n in names:
            engines.append(make_engine(n, policy, gen, work[families[0]][3]))
        play_rounds(engines, work, a.rounds)
        report(a, families, engines, policy, gen)
    finally:
        for e in engines:
            e.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
