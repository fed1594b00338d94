"""SEC's bandit: TD(0) values over mean |advantage|, Boltzmann draws, deterministic positions; fixed weights."""

import math

import pytest

from rubricgym.suites.curriculum import CurriculumConfig, SuiteSampler, mean_abs_advantage


def test_td0_update_and_boltzmann_probabilities():
    s = SuiteSampler({"a": 1.0, "b": 1.0}, CurriculumConfig(method="sec", alpha=0.5, temperature=0.5))
    assert s.probabilities() == {"a": 0.5, "b": 0.5}
    assert s.update({"a": 0.8, "b": None}) == {"a": 0.4, "b": 0.0}  # b was not drawn: it keeps its value
    assert s.update({"a": 0.0}) == {"a": 0.2, "b": 0.0}
    p = s.probabilities()
    assert p["a"] == pytest.approx(math.exp(0.4) / (math.exp(0.4) + 1))


def test_mean_abs_advantage_is_zero_for_a_group_that_scored_the_same():
    assert mean_abs_advantage([1.0, -1.0, 0.5, math.nan]) == pytest.approx(2.5 / 3)
    assert mean_abs_advantage([0.0, 0.0]) == 0.0
    assert mean_abs_advantage([math.nan]) is None


def test_draws_are_deterministic_and_follow_the_probabilities():
    s = SuiteSampler({"a": 1.0, "b": 3.0}, seed=4)
    assert s.probabilities() == {"a": 0.25, "b": 0.75}
    assert s.draw(10, 8) == s.draw(10, 8)
    many = s.draw(0, 4000)
    assert many.count("b") / 4000 == pytest.approx(0.75, abs=0.03)
    s.update({"a": 5.0})
    assert s.probabilities() == {"a": 0.25, "b": 0.75}  # weights mode ignores the values


def test_state_round_trip():
    s = SuiteSampler({"a": 1.0, "b": 1.0}, CurriculumConfig(method="sec"))
    s.update({"a": 0.6})
    t = SuiteSampler({"a": 1.0, "b": 1.0}, CurriculumConfig(method="sec"))
    t.load_state_dict(s.state_dict())
    assert t.probabilities() == s.probabilities() and t.draw(3, 5) == s.draw(3, 5)
