"""Criteria judged per second by the process reward model with concurrency 1 vs 8, against a real local
judge server (SmolLM2-135M on vLLM by default), in one run. The peer is concurrency 1.

    .venv/bin/python bench/prm_throughput.py [--n 8] [--base-url URL --model NAME]
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from judge_cache import judge_endpoint, parse_args, toy_run

from rubricgym.rewards import LLMJudge, ProcessRewardModel, Rubric

RUBRIC = Rubric.from_dict(
    {
        "id": "bench-llm",
        "criteria": [
            {"id": "sensible", "text": "The step moves the solution forward.", "scope": "step"},
            {"id": "explains", "text": "The agent says what each calculation is for.", "level": "optional"},
        ],
    }
)


async def run(trajs, url, model, concurrency, max_tokens):
    judge = LLMJudge(base_url=url, model=model, max_tokens=max_tokens, concurrency=concurrency)
    prm = ProcessRewardModel(RUBRIC, [judge], concurrency=concurrency)
    await judge.client.chat([{"role": "user", "content": "hi"}], max_tokens=1)  # connect before timing
    t0 = time.perf_counter()
    out = await prm.score_many([t.model_copy(deep=True) for t in trajs], concurrency=concurrency)
    elapsed = time.perf_counter() - t0
    await judge.aclose()
    verdicts = [v for b in out for v in b.verdicts]
    return len(verdicts) / elapsed, len(verdicts), sum(not v.ok for v in verdicts), elapsed


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], 8)
    trajs = toy_run(args.n, agents="oracle")
    rows = {}
    with judge_endpoint(args) as (url, model):
        for c in (1, 8):
            rows[c] = asyncio.run(run(trajs, url, model, c, args.max_tokens))
    print(f"judge: {model} at {url}; {len(trajs)} trajectories, max_tokens {args.max_tokens}")
    for c, (rate, n, failed, elapsed) in rows.items():
        print(f"concurrency {c}: {rate:6.2f} criteria/s  ({n} verdicts in {elapsed:.1f} s, {failed} failed)")
    print(f"concurrency 8 vs 1: {rows[8][0] / rows[1][0]:.2f}x criteria per second")


if __name__ == "__main__":
    main()
