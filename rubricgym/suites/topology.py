"""Tournament topologies (ArenaRL, arXiv 2601.06487): rank N players by pairwise comparisons.

One implementation serves both users: the tournament trainer ranks the N rollouts of a group (player 0 is the
greedy *anchor*), and the arena ranks N agents (player 0 is the first agent, the baseline). A topology decides
which pairs a judge compares and turns the results into a full ranking.

``compare(i, j)`` returns the two players' scores ``(s_i, s_j)`` from one judged match (ArenaRL sums both
presentation orders inside it to cancel position bias); it may be sync or async, and returns ``None`` when the
judge failed. A failed match counts as a tie for the pairing logic and is reported in
``TournamentResult.errors`` so callers can mask or report it rather than learn from a guess. Matches of one
round are judged concurrently.

Topologies are a table, ``TOPOLOGIES`` (name -> ``TopologySpec``: how to run it, what it costs), like the
trainer's estimators: a new topology is one entry (written with ``Tournament``), and the trainer's config, the
arena and the CLI accept it.
Built-in topologies and their judge cost for N players:

- ``anchor``: each rollout vs the anchor, ranked by its score (N-1);
- ``round_robin``: every pair, win 1 / tie 0.5 points (N(N-1)/2);
- ``single_elimination``: seeded by the anchor round, standard power-of-two bracket with byes, ranks by
  survival depth then mean score received (2N-2);
- ``swiss``: ceil(log2 N) rounds pairing equal scores without rematches, ranks by points then Buchholz;
- ``double_elimination``: winners' and losers' brackets, grand final with reset, ranks by elimination order.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated

import numpy as np
from pydantic import AfterValidator

MatchResult = tuple[float, float] | None
Compare = Callable[[int, int], MatchResult | Awaitable[MatchResult]]


@dataclass
class TournamentResult:
    """A group's ranking: ``ranks[i]`` is rollout i's rank (0 best; rollouts the topology cannot tell apart
    share the mean of their ranks); ``order`` lists rollouts best first."""

    ranks: list[float]
    comparisons: int
    errors: int = 0
    received: dict[int, list[float]] = field(default_factory=dict)
    matches: list[tuple[int, int, float, float]] = field(default_factory=list)

    @property
    def order(self) -> list[int]:
        return sorted(range(len(self.ranks)), key=lambda i: self.ranks[i])

    def mean_score(self, i: int) -> float:
        got = self.received.get(i, [])
        return sum(got) / len(got) if got else 0.0


class Tournament:
    """Runs matches through ``compare``, counting them and keeping every score each rollout received: the building
    block of a topology, which plays ``round``s of pairs and ends with ``finish(key)``."""

    def __init__(self, n: int, compare: Compare):
        self.n = n
        self.compare = compare
        self.result = TournamentResult(ranks=[0] * n, comparisons=0, received={i: [] for i in range(n)})

    async def match(self, i: int, j: int) -> tuple[float, float]:
        out = self.compare(i, j)
        if inspect.isawaitable(out):
            out = await out
        self.result.comparisons += 1
        if out is None:
            self.result.errors += 1
            return 0.0, 0.0
        si, sj = float(out[0]), float(out[1])
        self.result.received[i].append(si)
        self.result.received[j].append(sj)
        self.result.matches.append((i, j, si, sj))
        return si, sj

    async def round(self, pairs: list[tuple[int, int]]) -> list[tuple[float, float]]:
        return list(await asyncio.gather(*(self.match(i, j) for i, j in pairs)))

    def finish(self, key: Callable[[int], tuple]) -> TournamentResult:
        """Rank by ``key`` (smaller is better). Rollouts with equal keys are indistinguishable to the topology
        (e.g. identical trajectories that tied every match) and share the mean of their ranks, so an all-tied
        group gets zero advantage instead of advantages decided by rollout index. When every match of a group
        was a tie, bracket depth only records who sat in the first slot, so all rollouts share one rank."""
        matches = self.result.matches
        if matches and all(si == sj for _, _, si, sj in matches):
            key = lambda i: ()  # noqa: E731
        keys = {i: tuple(key(i)) for i in range(self.n)}
        order = sorted(range(self.n), key=lambda i: (keys[i], i))
        start = 0
        while start < self.n:
            end = start
            while end + 1 < self.n and keys[order[end + 1]] == keys[order[start]]:
                end += 1
            for pos in range(start, end + 1):
                self.result.ranks[order[pos]] = (start + end) / 2
            start = end + 1
        return self.result


def bracket_order(size: int) -> list[int]:
    """Standard seeding positions for a power-of-two bracket, 1-based: 8 -> [1, 8, 4, 5, 2, 7, 3, 6].

    Seed 1 meets seed ``size`` first, and seeds 1 and 2 can only meet in the final.
    """
    if size < 1 or size & (size - 1):
        raise ValueError(f"bracket size must be a power of two, got {size}")
    order = [1]
    while len(order) < size:
        m = 2 * len(order)
        order = [x for s in order for x in (s, m + 1 - s)]
    return order


async def _anchor_round(arena: Tournament, anchor: int) -> dict[int, float]:
    """Every other rollout vs the anchor; returns each rollout's seed score (the anchor's: its mean)."""
    others = [i for i in range(arena.n) if i != anchor]
    results = await arena.round([(i, anchor) for i in others])
    seed = {i: si for i, (si, _) in zip(others, results, strict=True)}
    seed[anchor] = float(np.mean([sa for _, sa in results])) if results else 0.0
    return seed


async def anchor_ranking(n: int, compare: Compare, anchor: int = 0) -> TournamentResult:
    arena = Tournament(n, compare)
    seed = await _anchor_round(arena, anchor)
    return arena.finish(lambda i: (-seed[i],))


async def round_robin(n: int, compare: Compare) -> TournamentResult:
    arena = Tournament(n, compare)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    points = [0.0] * n
    for (i, j), (si, sj) in zip(pairs, await arena.round(pairs), strict=True):
        if si > sj:
            points[i] += 1
        elif sj > si:
            points[j] += 1
        else:
            points[i] += 0.5
            points[j] += 0.5
    return arena.finish(lambda i: (-points[i], -arena.result.mean_score(i)))


async def single_elimination(n: int, compare: Compare, anchor: int = 0) -> TournamentResult:
    """Seeded single elimination: the winner of each match advances (a tie goes to the first slot)."""
    arena = Tournament(n, compare)
    if n == 1:
        return arena.finish(lambda i: ())
    seed_score = await _anchor_round(arena, anchor)
    seeded = sorted(range(n), key=lambda i: (-seed_score[i], i))  # seeded[0] is seed 1
    size = 1 << (n - 1).bit_length()
    slots: list[int | None] = [seeded[s - 1] if s <= n else None for s in bracket_order(size)]
    depth = {i: 0 for i in range(n)}
    level = 0
    while len(slots) > 1:
        level += 1
        pairs = [(slots[k], slots[k + 1]) for k in range(0, len(slots), 2)]
        played = [(a, b) for a, b in pairs if a is not None and b is not None]
        outcome = dict(zip(played, await arena.round(played), strict=True))
        nxt: list[int | None] = []
        for a, b in pairs:
            if a is None or b is None:
                winner = a if b is None else b  # a bye, or an empty half of the bracket
            else:
                sa, sb = outcome[(a, b)]
                winner = a if sa >= sb else b
            if winner is not None:
                depth[winner] = level
            nxt.append(winner)
        slots = nxt
    return arena.finish(lambda i: (-depth[i], -arena.result.mean_score(i)))


async def swiss(n: int, compare: Compare, rounds: int | None = None) -> TournamentResult:
    """Swiss system: each round pairs rollouts with equal points (no rematches where avoidable); a bye is
    worth a win. Final order: points, then Buchholz (sum of opponents' points), then mean score received.

    ``rounds`` defaults to ``swiss_rounds(n)``: an odd field plays one round more than ceil(log2 n), since each round
    sits one player out; with three, two rounds left the two weaker never meeting (both ranked alike whatever they
    solved), three make every pair meet once."""
    arena = Tournament(n, compare)
    rounds = swiss_rounds(n) if rounds is None else rounds
    points = [0.0] * n
    opponents: list[set[int]] = [set() for _ in range(n)]
    had_bye: set[int] = set()
    for _ in range(rounds if n > 1 else 0):
        standing = sorted(range(n), key=lambda i: (-points[i], i))
        if len(standing) % 2:
            bye = next((i for i in reversed(standing) if i not in had_bye), standing[-1])
            had_bye.add(bye)
            points[bye] += 1
            standing.remove(bye)
        pairs: list[tuple[int, int]] = []
        free = list(standing)
        while free:
            a = free.pop(0)
            b = next((x for x in free if x not in opponents[a]), free[0])
            free.remove(b)
            pairs.append((a, b))
        for (a, b), (sa, sb) in zip(pairs, await arena.round(pairs), strict=True):
            opponents[a].add(b)
            opponents[b].add(a)
            if sa > sb:
                points[a] += 1
            elif sb > sa:
                points[b] += 1
            else:
                points[a] += 0.5
                points[b] += 0.5
    buchholz = [sum(points[o] for o in opponents[i]) for i in range(n)]
    return arena.finish(lambda i: (-points[i], -buchholz[i], -arena.result.mean_score(i)))


async def double_elimination(n: int, compare: Compare) -> TournamentResult:
    """Double elimination: out after two losses. Each round pairs the unbeaten (winners' bracket) and the
    once-beaten (losers' bracket) among themselves; their two champions meet in a grand final, replayed if
    the losers' champion wins it. Ranks: champion first, then by how late each rollout was eliminated."""
    arena = Tournament(n, compare)
    losses = [0] * n
    out_at = {i: math.inf for i in range(n)}
    rnd = 0
    while sum(1 for i in range(n) if losses[i] < 2) > 1:
        rnd += 1
        alive = [i for i in range(n) if losses[i] < 2]
        winners = [i for i in alive if losses[i] == 0]
        losers = [i for i in alive if losses[i] == 1]
        if len(winners) == 1 and len(losers) == 1:
            pairs = [(winners[0], losers[0])]  # the grand final
        else:  # both brackets pair among themselves; an odd one out waits (a bye)
            pairs = [(br[k], br[k + 1]) for br in (winners, losers) for k in range(0, len(br) - 1, 2)]
        for (a, b), (sa, sb) in zip(pairs, await arena.round(pairs), strict=True):
            loser = b if sa >= sb else a
            losses[loser] += 1
            if losses[loser] == 2:
                out_at[loser] = rnd
    return arena.finish(lambda i: (-out_at[i], -arena.result.mean_score(i)))


def swiss_rounds(n: int) -> int:
    """The default number of Swiss rounds for ``n`` players (``swiss``)."""
    return max(1, math.ceil(math.log2(n))) + n % 2 if n > 1 else 0


def _swiss_comparisons(n: int) -> int:
    return swiss_rounds(n) * (n // 2)


def _double_elimination_comparisons(n: int) -> int:
    raise ValueError("double elimination's count depends on the grand final (2N-2 or 2N-1)")


@dataclass(frozen=True)
class TopologySpec:
    """One topology: ``run(n, compare, anchor)`` ranks ``n`` players; ``comparisons(n)`` is its judge cost (it
    raises ``ValueError`` when the cost depends on the results)."""

    run: Callable[[int, Compare, int], Awaitable[TournamentResult]]
    comparisons: Callable[[int], int]


TOPOLOGIES: dict[str, TopologySpec] = {
    "anchor": TopologySpec(anchor_ranking, lambda n: n - 1),
    "round_robin": TopologySpec(lambda n, compare, anchor: round_robin(n, compare), lambda n: n * (n - 1) // 2),
    "single_elimination": TopologySpec(single_elimination, lambda n: max(0, 2 * n - 2)),
    "swiss": TopologySpec(lambda n, compare, anchor: swiss(n, compare), _swiss_comparisons),
    "double_elimination": TopologySpec(
        lambda n, compare, anchor: double_elimination(n, compare), _double_elimination_comparisons
    ),
}
"""Topology name -> ``TopologySpec``; add an entry to make a new topology selectable everywhere."""


def topology_spec(name: str) -> TopologySpec:
    """The named topology, or a ``ValueError`` listing the known ones."""
    try:
        return TOPOLOGIES[name]
    except KeyError:
        raise ValueError(f"unknown topology {name!r}; use one of {', '.join(TOPOLOGIES)}") from None


def _known(name: str) -> str:
    topology_spec(name)
    return name


Topology = Annotated[str, AfterValidator(_known)]
"""A topology name, checked against ``TOPOLOGIES`` when a config is validated (not frozen at import)."""


async def run_tournament(topology: str, n: int, compare: Compare, anchor: int = 0) -> TournamentResult:
    """Rank a group of ``n`` rollouts with the named topology."""
    if n < 1:
        raise ValueError(f"a tournament needs at least one rollout, got {n}")
    return await topology_spec(topology).run(n, compare, anchor)


def expected_comparisons(topology: str, n: int) -> int:
    """Judge calls a topology makes for ``n`` rollouts (Swiss: ceil(log2 N) rounds of floor(N/2) matches)."""
    return topology_spec(topology).comparisons(n)
