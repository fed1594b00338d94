"""Tournament topologies vs round robin: judge calls and Kendall tau to the true order, with a noisy judge.

N agents (N = 8, 16, 32) get latent strengths beta ~ N(0, 1). The simulated pairwise judge scores both sides
of a match the way ArenaRL's judge does (an absolute score per response): ``s_i = beta_i + noise``,
``s_j = beta_j + noise`` with ``noise ~ N(0, sigma)``; a side wins when its score is higher. Each topology of
``rubricgym.suites.topology`` (the one the trainer and the arena use) ranks the agents; we report the judge
calls it made and Kendall tau to the true order of three rankings built from the same matches: the topology's
own (points / bracket depth, then tie-breaks), a Bradley-Terry fit to the won/lost games (what
``rubricgym arena`` reports), and the mean judge score each agent received. Averaged over trials, for several
judge noise levels. Target: a 2N-2-call topology (seeded single elimination or Swiss) reaches >= 95% of round
robin's tau at N = 16.

    .venv/bin/python bench/arena.py [--trials 200] [--sigmas 0.25 0.5 1.0] [--sizes 8 16 32]
"""

from __future__ import annotations

import argparse
import asyncio

import numpy as np

from rubricgym.arena.ratings import Game, bradley_terry, kendall_tau
from rubricgym.suites.topology import run_tournament

TOPOLOGIES = ("round_robin", "anchor", "single_elimination", "swiss", "double_elimination")


async def trial(topology: str, n: int, sigma: float, rng: np.random.Generator) -> tuple[float, ...]:
    beta = [float(x) for x in rng.normal(size=n)]
    games: list[Game] = []

    def judge(i: int, j: int) -> tuple[float, float]:
        si, sj = beta[i] + sigma * rng.normal(), beta[j] + sigma * rng.normal()
        games.append(Game(i, j, 1.0 if si > sj else 0.0 if sj > si else 0.5))
        return si, sj

    result = await run_tournament(topology, n, judge)
    tau_topology = kendall_tau([-r for r in result.ranks], beta)
    tau_bt = kendall_tau([float(x) for x in bradley_terry(n, games)], beta)
    tau_score = kendall_tau([result.mean_score(i) for i in range(n)], beta)
    return result.comparisons, tau_topology, tau_bt, tau_score


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=200)
    p.add_argument(
        "--sigmas", type=float, nargs="+", default=[0.25, 0.5, 1.0], help="judge noise levels (strengths have std 1)"
    )
    p.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32])
    args = p.parse_args()
    print(f"{args.trials} trials per cell; tau = Kendall tau to the true order (ratio: vs round robin's tau)")
    verdicts = []
    for sigma in args.sigmas:
        print(f"\njudge noise sigma = {sigma}")
        print(f"{'N':>3} {'topology':<19} {'calls':>6} {'tau(topology)':>14} {'tau(BT)':>14} {'tau(mean score)':>16}")
        for n in args.sizes:
            rows = {}
            for topology in TOPOLOGIES:
                rng = np.random.default_rng([n, args.trials, int(sigma * 1000)])  # same stream for every topology
                out = np.array([asyncio.run(trial(topology, n, sigma, rng)) for _ in range(args.trials)])
                rows[topology] = out.mean(axis=0)
            rr = rows["round_robin"]
            for topology, (calls, *taus) in rows.items():
                cells = " ".join(f"{t:>6.3f} ({t / r:>5.0%})" for t, r in zip(taus, rr[1:], strict=True))
                print(f"{n:>3} {topology:<19} {calls:>6.1f} {cells}")
            if n == 16:
                best_rr = max(rr[1:])
                ratios = {(t, k): rows[t][1 + k] / best_rr for t in ("single_elimination", "swiss") for k in range(3)}
                (t, k), ratio = max(ratios.items(), key=lambda kv: kv[1])
                verdicts.append((sigma, t, ("topology", "BT", "mean score")[k], ratio))
    print()
    for sigma, topology, ranking, ratio in verdicts:
        print(
            f"target at N=16, sigma={sigma}: {topology} ranked by {ranking} reaches {ratio:.1%} of round robin's "
            f"best tau -> {'MET' if ratio >= 0.95 else 'NOT MET'} (>= 95%)"
        )


if __name__ == "__main__":
    main()
