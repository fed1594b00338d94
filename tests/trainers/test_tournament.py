"""ArenaRL's rank -> advantage mapping; the topologies themselves are tested in tests/suites/test_topology.py."""

import numpy as np

from rubricgym.suites import topology
from rubricgym.trainers.algo import tournament
from rubricgym.trainers.algo.tournament import rank_advantages


def test_rank_to_advantage():
    a = rank_advantages([2, 0, 4, 1, 3])
    # r = 1 - rank/4 = .5 1 0 .75 .25 ; mean .5 ; std sqrt(.125)
    np.testing.assert_allclose(a, [0, 1.414214, -1.414214, 0.707107, -0.707107], atol=1e-5)
    assert rank_advantages([0]).tolist() == [0.0]


def test_the_trainer_uses_the_arena_topologies_not_a_copy():
    assert tournament.run_tournament is topology.run_tournament
    assert tournament.TournamentResult is topology.TournamentResult
