"""Re-scoring a run with a warm judge cache vs a cold one, in one run, against a real local judge server.

200 toy-env trajectories are scored with the calculator's default rubric plus one LLM-judged criterion, first
with an empty SQLite cache (cold: one endpoint call per LLM verdict), then again by a fresh judge reading the
same cache file (warm). Target: warm at least 50x faster, with zero endpoint calls for every verdict that the
cold pass got; verdicts that failed cold (unparseable replies of the weak local model) are not cached, by
design, so they are asked again and reported as such.

    .venv/bin/python bench/judge_cache.py [--n 200] [--base-url URL --model NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import rubricgym
from rubricgym.core.types import Trajectory
from rubricgym.envs.toy.agents import CalculatorOracle, GuessingAgent, RandomAgent
from rubricgym.rewards import CheckJudge, JudgeCache, LLMJudge, ProcessRewardModel, Rubric


def parse_args(description: str, n_default: int) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--base-url", help="an OpenAI-compatible judge endpoint; default: start a local vLLM server")
    p.add_argument("--model", help="the model name that endpoint serves (with --base-url)")
    p.add_argument("--n", type=int, default=n_default, help="trajectories to score")
    p.add_argument("--max-tokens", type=int, default=128, help="judge reply budget (small keeps the bench short)")
    return p.parse_args()


@contextlib.contextmanager
def judge_endpoint(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(base_url, model): the given endpoint, or a vLLM server with SmolLM2-135M started for the run."""
    if args.base_url:
        if not args.model:
            raise SystemExit("--base-url needs --model")
        yield args.base_url, args.model
        return
    from rubricgym.agents.serve import VLLMServer, find_vllm_python

    if find_vllm_python() is None:
        raise SystemExit("no vLLM venv (run `make vllm`), or pass --base-url URL --model NAME")
    print("starting a local vLLM server (SmolLM2-135M-Instruct, CPU)...", flush=True)
    with VLLMServer("smollm2-135m-instruct") as server:
        yield server.base_url, server.model


def toy_run(n: int, agents: str = "mixed") -> list[Trajectory]:
    """``n`` real toy-calculator trajectories (oracle, random and guessing agents in turn)."""
    tasks = rubricgym.make("toy-calculator-v0").task_set(n, seed=7)
    pool = [CalculatorOracle(), RandomAgent(seed=1), GuessingAgent()] if agents == "mixed" else [CalculatorOracle()]
    out: list[Trajectory] = []
    for k, agent in enumerate(pool):
        mine = tasks[k :: len(pool)]
        out += asyncio.run(rubricgym.rollout_many("toy-calculator-v0", agent, mine, progress=False)).trajectories
    return out


def rubric() -> Rubric:
    base = rubricgym.spec("toy-calculator-v0").load().default_rubric().model_dump(exclude_none=True)
    return Rubric.from_dict(
        dict(
            base,
            criteria=[
                *base["criteria"],
                {"id": "explains", "text": "The agent says what each calculation is for.", "level": "optional"},
            ],
        )
    )


async def score(trajs, url, model, cache_path, max_tokens):
    cache = JudgeCache(cache_path)
    judge = LLMJudge(base_url=url, model=model, cache=cache, max_tokens=max_tokens, concurrency=8)
    prm = ProcessRewardModel(rubric(), [CheckJudge(), judge])
    t0 = time.perf_counter()
    out = await prm.score_many([t.model_copy(deep=True) for t in trajs], concurrency=16)
    elapsed = time.perf_counter() - t0
    await judge.aclose()
    llm = [v for b in out for v in b.verdicts if v.judge.startswith("llm:")]
    return elapsed, judge.client.calls, llm, cache


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], 200)
    trajs = toy_run(args.n)
    with judge_endpoint(args) as (url, model), tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "judge.sqlite"
        cold_s, cold_calls, cold, _ = asyncio.run(score(trajs, url, model, path, args.max_tokens))
        warm_s, warm_calls, warm, _ = asyncio.run(score(trajs, url, model, path, args.max_tokens))
        # the unchanged trajectories whose every verdict was cached: the case the cache exists for
        failed_ids = {v_traj for v_traj, v in zip([t.id for t in trajs], cold, strict=True) if not v.ok}
        cached_run = [t for t in trajs if t.id not in failed_ids]
        hit_s, hit_calls, _, _ = asyncio.run(score(cached_run, url, model, path, args.max_tokens))
    failed_cold = sum(not v.ok for v in cold)
    hits = sum(v.cached for v in warm)
    per_cold = cold_s / len(trajs)
    per_hit = hit_s / max(1, len(cached_run))
    print(f"judge: {model} at {url}; {len(trajs)} trajectories, {len(cold)} LLM verdicts per pass")
    print(f"cold cache:  {cold_s:8.2f} s  {cold_calls:5d} endpoint calls  ({failed_cold} verdicts failed)")
    print(
        f"warm cache:  {warm_s:8.2f} s  {warm_calls:5d} endpoint calls  ({hits} cache hits; failed verdicts are "
        "never cached, so those are asked again)"
    )
    print(f"warm, fully cached trajectories only ({len(cached_run)}): {hit_s:.3f} s, {hit_calls} endpoint calls")
    print(f"warm vs cold, whole run: {cold_s / warm_s:.1f}x faster")
    print(
        f"warm vs cold per unchanged, fully cached trajectory: {per_cold / per_hit:.0f}x faster "
        f"(target >= 50x, zero calls: {hit_calls == 0})"
    )


if __name__ == "__main__":
    main()
