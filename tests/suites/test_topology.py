"""Worked examples for ArenaRL's tournament topologies (shared by the tournament trainer and the arena)."""

import numpy as np
import pytest

from rubricgym.suites.topology import bracket_order, expected_comparisons, run_tournament
from rubricgym.trainers.algo.tournament import rank_advantages

STRENGTH = [0.5, 0.9, 0.1, 0.7, 0.3]  # rollout 0 is the anchor


def by_strength(s):
    return lambda i, j: (s[i], s[j])


def test_bracket_order_is_the_standard_seeding():
    assert bracket_order(4) == [1, 4, 2, 3]
    assert bracket_order(8) == [1, 8, 4, 5, 2, 7, 3, 6]
    with pytest.raises(ValueError):
        bracket_order(6)


@pytest.mark.parametrize("topology", ["anchor", "round_robin", "single_elimination"])
async def test_transitive_judge_gives_the_strength_order(topology):
    res = await run_tournament(topology, 5, by_strength(STRENGTH))
    assert res.ranks == [2, 0, 4, 1, 3]
    assert res.order == [1, 3, 0, 4, 2]
    assert res.comparisons == expected_comparisons(topology, 5)


async def test_single_elimination_byes_and_cost():
    res = await run_tournament("single_elimination", 5, by_strength(STRENGTH))
    # seeding: 4 anchor matches; bracket of 8 with 3 byes: 4v2, then 1v4 and 3v0, then 1v3 -> 2N-2 = 8
    assert res.comparisons == 8
    played = [(i, j) for i, j, _, _ in res.matches[4:]]
    assert sorted(map(sorted, played)) == [[0, 3], [1, 3], [1, 4], [2, 4]]


async def test_single_elimination_upsets_ties_and_depth_then_mean_ranking():
    table = {(1, 0): (0.8, 0.2), (2, 0): (0.6, 0.4), (3, 0): (0.4, 0.6), (1, 3): (0.2, 0.9), (3, 2): (0.5, 0.5)}

    def compare(i, j):
        return table[(i, j)] if (i, j) in table else table[(j, i)][::-1]

    res = await run_tournament("single_elimination", 4, compare)
    # seeds: r1 (.8), r2 (.6), r0 (anchor, mean .4, wins the tie with r3 on index), r3 (.4);
    # bracket slots r1 r3 | r2 r0
    # r3 upsets r1; r2 beats r0; the final r3 v r2 is a tie -> first slot (r3) wins.
    # depth: r3 2, r2 1, r1 and r0 0 -> r1 (mean .5) above r0 (mean .4)
    assert res.ranks == [3, 2, 1, 0]
    assert res.comparisons == 6


@pytest.mark.parametrize("topology", ["anchor", "round_robin", "single_elimination", "swiss", "double_elimination"])
async def test_indistinguishable_rollouts_share_ranks_and_an_all_tied_group_gets_no_advantage(topology):
    res = await run_tournament(topology, 6, by_strength([0.3] * 6))
    assert res.ranks == [2.5] * 6
    assert np.allclose(rank_advantages(res.ranks), 0.0)


async def test_round_robin_twins_share_the_mean_of_their_ranks():
    res = await run_tournament("round_robin", 4, by_strength([0.2, 0.9, 0.2, 0.5]))
    assert res.ranks == [2.5, 0, 2.5, 1]
    adv = rank_advantages(res.ranks)
    assert adv[0] == adv[2] < 0 < adv[3] < adv[1]


async def test_swiss_pairs_equal_points_and_ranks_by_buchholz():
    res = await run_tournament("swiss", 4, by_strength([0.5, 0.9, 0.1, 0.7]))
    # r1: 0v1 1, 2v3 3 ; r2: 1v3 1, 0v2 0 -> points 1,2,0,1 ; r0 and r3 tie on points and Buchholz (2),
    # r3 has the higher mean score received
    assert res.ranks == [2, 0, 3, 1]
    assert res.comparisons == 4 == expected_comparisons("swiss", 4)
    assert [(i, j) for i, j, _, _ in res.matches] == [(0, 1), (2, 3), (1, 3), (0, 2)]


async def test_swiss_with_an_odd_field_pairs_everyone_and_ranks_the_weakest_last():
    """Three players: two rounds (ceil(log2 3)) sat the two weaker out in turn, so they never met and tied whatever
    they scored; the default plays a third round."""
    res = await run_tournament("swiss", 3, by_strength([0.9, 0.5, 0.1]))
    met = {frozenset((i, j)) for i, j, _, _ in res.matches}
    assert met == {frozenset(p) for p in [(0, 1), (0, 2), (1, 2)]}
    assert res.ranks == [0, 1, 2]
    assert res.comparisons == 3 == expected_comparisons("swiss", 3)


async def test_double_elimination_order_and_cost():
    res = await run_tournament("double_elimination", 4, by_strength([0.5, 0.9, 0.1, 0.7]))
    assert res.ranks == [2, 0, 3, 1]
    assert res.comparisons == 6  # 2N-2: the winners' champion won the grand final


async def test_double_elimination_grand_final_reset():
    s = [0.5, 0.9, 0.1, 0.7]
    finals = []

    def compare(i, j):
        if {i, j} == {1, 3}:
            finals.append((i, j))
            # r1 wins their winners'-bracket match, then r3 wins the grand final and its reset
            if len(finals) == 1:
                return (s[i], s[j])
            return (1.0, 0.0) if i == 3 else (0.0, 1.0)
        return (s[i], s[j])

    res = await run_tournament("double_elimination", 4, compare)
    assert res.order[0] == 3 and res.order[1] == 1
    assert res.comparisons == 7  # 2N-1 with the reset


async def test_async_judge_and_failed_matches_are_reported():
    async def compare(i, j):
        return None if {i, j} == {0, 2} else (STRENGTH[i], STRENGTH[j])

    res = await run_tournament("anchor", 5, compare)
    assert res.errors == 1
    assert res.comparisons == 4


def test_expected_comparisons():
    assert expected_comparisons("anchor", 8) == 7
    assert expected_comparisons("round_robin", 8) == 28
    assert expected_comparisons("single_elimination", 8) == 14
    assert expected_comparisons("swiss", 8) == 12
