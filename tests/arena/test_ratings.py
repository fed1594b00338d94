"""Bradley-Terry, bootstrap CIs, Elo and win rates on hand-checked and synthetic games with known strengths."""

import math

import numpy as np

from rubricgym.arena.ratings import (
    Game,
    bootstrap_bt,
    bradley_terry,
    elo,
    kendall_tau,
    to_elo_scale,
    win_matrix,
)


def test_two_players_recover_the_log_odds_of_their_record():
    # 3 wins, 1 loss: the MLE (no L2) has sigma(b0 - b1) = 3/4, so b0 - b1 = ln 3
    games = [Game(0, 1, 1.0, "t1"), Game(0, 1, 1.0, "t2"), Game(1, 0, 0.0, "t3"), Game(0, 1, 0.0, "t4")]
    beta = bradley_terry(2, games, l2=0.0)
    assert math.isclose(beta[0] - beta[1], math.log(3), rel_tol=1e-6)
    assert math.isclose(beta.sum(), 0.0, abs_tol=1e-9)


def test_a_tie_is_half_a_win_each_way():
    beta = bradley_terry(2, [Game(0, 1, 0.5, "t")] * 3, l2=0.0)
    assert np.allclose(beta, 0.0)


def test_synthetic_matches_recover_known_strengths_within_their_intervals():
    rng = np.random.default_rng(1)
    true = np.array([-1.0, -0.3, 0.2, 1.1])
    games = []
    for task in range(150):
        for a in range(4):
            for b in range(a + 1, 4):
                p = 1 / (1 + math.exp(-(true[a] - true[b])))
                games.append(Game(a, b, float(rng.random() < p), f"task{task}"))
    beta = bradley_terry(4, games)
    lo, hi = bootstrap_bt(4, games, resamples=200)
    centred = true - true.mean()
    assert np.all(np.abs(beta - centred) < 0.25)
    assert np.all((lo <= centred) & (centred <= hi))
    assert np.all(lo <= beta) and np.all(beta <= hi)
    assert kendall_tau(beta, true) == 1.0


def test_an_undefeated_player_stays_finite_and_first():
    games = [Game(0, 1, 1.0, f"t{k}") for k in range(5)] + [Game(1, 2, 0.5, "t9")]
    beta = bradley_terry(3, games)
    assert np.all(np.isfinite(beta)) and beta.argmax() == 0


def test_elo_scale_elo_and_win_matrix():
    assert to_elo_scale(0.0) == 1000.0
    assert math.isclose(to_elo_scale(math.log(10)), 1400.0)
    r = elo(2, [Game(0, 1, 1.0)], k=16)
    assert r.tolist() == [1008.0, 992.0]  # expected score 0.5 at equal ratings
    rate, count = win_matrix(3, [Game(0, 1, 1.0), Game(1, 0, 0.5)])
    assert rate[0, 1] == 0.75 and rate[1, 0] == 0.25 and count[0, 1] == 2
    assert math.isnan(rate[0, 2])


def test_kendall_tau():
    assert kendall_tau([1, 2, 3], [10, 20, 30]) == 1.0
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
    assert math.isclose(kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]), 2 / 3)
