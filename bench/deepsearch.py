"""Deep search index speed: our tantivy BM25 index vs ``rank_bm25`` (and ``bm25s``) at 1k, 10k and 100k documents.

For each size: world generation + rendering time, index build time, and single-query search latency (p50/p95,
one query at a time, on one core) for our ``SearchIndex`` (tantivy, snippets with highlights included), for
``rank_bm25.BM25Okapi`` (the common pure-Python peer) and for ``bm25s`` (the other candidate we measured before
choosing tantivy). Targets: p50 under 5 ms at 100k documents and at least 20x faster than rank_bm25. Then oracle
episodes per second on ``deepsearch-v0``.

    .venv/bin/python bench/deepsearch.py [--sizes 1000,10000,100000] [--queries 200] [--peer-queries 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import tempfile
import time

os.environ.setdefault("TQDM_DISABLE", "1")

from rubricgym.envs.deepsearch.index import SearchIndex
from rubricgym.envs.deepsearch.render import render_world
from rubricgym.envs.deepsearch.world import generate_world

_WORD = re.compile(r"[^\W_]+")
_STOP = {"the", "a", "an", "of", "in", "on", "and", "or", "is", "was", "to", "by", "as", "it", "at", "for", "with"}


def tokenize(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def percentiles(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return s[len(s) // 2] * 1e3, s[min(len(s) - 1, int(len(s) * 0.95))] * 1e3


def make_queries(corpus, n: int, seed: int = 0) -> list[str]:
    """Queries like an agent's: an entity name, sometimes with a word or two from its page."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        d = corpus.docs[rng.randrange(len(corpus.docs))]
        words = tokenize(d.text)
        extra = rng.sample(words, k=min(len(words), rng.choice((0, 1, 2))))
        out.append(" ".join([d.title, *extra]))
    return out


def bench_size(n_docs: int, n_queries: int, peer_queries: int, with_bm25s: bool) -> dict[str, float]:
    row: dict[str, float] = {"docs": n_docs}
    t = time.perf_counter()
    corpus = render_world(generate_world(0, n_docs))
    passages = [c.text for c in corpus.chunks]
    row["generate_s"] = time.perf_counter() - t
    queries = make_queries(corpus, n_queries)

    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        index = SearchIndex.open_or_build(corpus, tmp)
        row["ours_build_s"] = time.perf_counter() - t
        t = time.perf_counter()
        SearchIndex.open_or_build(corpus, tmp)
        row["ours_reopen_s"] = time.perf_counter() - t
        lat = []
        for q in queries:
            t = time.perf_counter()
            index.search(q, 5)
            lat.append(time.perf_counter() - t)
        row["ours_p50_ms"], row["ours_p95_ms"] = percentiles(lat)

    from rank_bm25 import BM25Okapi

    t = time.perf_counter()
    peer = BM25Okapi([tokenize(p) for p in passages])
    row["rank_bm25_build_s"] = time.perf_counter() - t
    lat = []
    for q in queries[:peer_queries]:
        t = time.perf_counter()
        scores = peer.get_scores(tokenize(q))
        sorted(range(len(scores)), key=scores.__getitem__, reverse=True)[:5]
        lat.append(time.perf_counter() - t)
    row["rank_bm25_p50_ms"], row["rank_bm25_p95_ms"] = percentiles(lat)
    del peer

    if with_bm25s:
        import bm25s

        t = time.perf_counter()
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(passages, stopwords="en", show_progress=False), show_progress=False)
        row["bm25s_build_s"] = time.perf_counter() - t
        lat = []
        for q in queries:
            t = time.perf_counter()
            retriever.retrieve(
                bm25s.tokenize([q], stopwords="en", show_progress=False), k=5, show_progress=False, n_threads=1
            )
            lat.append(time.perf_counter() - t)
        row["bm25s_p50_ms"], row["bm25s_p95_ms"] = percentiles(lat)
    return row


def oracle_episodes_per_second(n_episodes: int, n_docs: int) -> float:
    from rubricgym.core.registry import make
    from rubricgym.core.rollout import rollout
    from rubricgym.envs.deepsearch.agents import OracleAgent

    env = make("deepsearch-v0", n_docs=n_docs)
    tasks = env.task_set(n_episodes, seed=1)

    async def run() -> None:
        for task in tasks:
            await rollout(make("deepsearch-v0", n_docs=n_docs), OracleAgent(), task)

    t = time.perf_counter()
    asyncio.run(run())
    return n_episodes / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--peer-queries", type=int, default=30, help="rank_bm25 is slow: fewer queries for it")
    ap.add_argument("--no-bm25s", action="store_true")
    ap.add_argument("--episodes", type=int, default=50)
    args = ap.parse_args()

    print(
        f"{'docs':>7} {'gen s':>6} | {'ours build s':>12} {'p50 ms':>7} {'p95 ms':>7} | "
        f"{'rank_bm25 build s':>17} {'p50 ms':>8} {'p95 ms':>8} | {'bm25s build s':>13} {'p50 ms':>7} | "
        f"{'speedup p50':>11}"
    )
    for n in (int(x) for x in args.sizes.split(",")):
        r = bench_size(n, args.queries, args.peer_queries, not args.no_bm25s)
        ratio = r["rank_bm25_p50_ms"] / r["ours_p50_ms"]
        bm = f"{r.get('bm25s_build_s', float('nan')):>13.2f} {r.get('bm25s_p50_ms', float('nan')):>7.2f}"
        print(
            f"{n:>7} {r['generate_s']:>6.2f} | {r['ours_build_s']:>12.2f} {r['ours_p50_ms']:>7.2f} "
            f"{r['ours_p95_ms']:>7.2f} | {r['rank_bm25_build_s']:>17.2f} {r['rank_bm25_p50_ms']:>8.2f} "
            f"{r['rank_bm25_p95_ms']:>8.2f} | {bm} | {ratio:>10.1f}x",
            flush=True,
        )
    eps = oracle_episodes_per_second(args.episodes, 500)
    print(f"\noracle episodes/s on deepsearch-v0 (500 docs, {args.episodes} episodes, mixed difficulty): {eps:.1f}")
    print(
        "speedup p50 = rank_bm25 p50 / ours p50, measured in the same run (ours includes building the "
        "highlighted snippets); one run on a shared machine: treat as orders of magnitude"
    )


if __name__ == "__main__":
    main()
