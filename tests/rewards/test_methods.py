"""Aggregation methods are a table: one entry in ``AGGREGATIONS`` makes a method loadable and scored end to end."""

import pytest

from rubricgym.core.aggregation import AGGREGATIONS, AggregationMethod
from rubricgym.rewards.methods import RollUp, Total
from rubricgym.rewards.prm import ProcessRewardModel
from rubricgym.rewards.rubric import RubricError, load_rubric


def weakest_link(r: RollUp) -> Total:
    """A made-up method: the total is the worst criterion's score."""
    return Total(min(r.per_criterion.values(), default=0.0), list(r.per_step))


def two_or_more(rubric) -> str | None:
    return None if len(rubric.criteria) >= 2 else "weakest_link needs two criteria or more"


@pytest.fixture
def weakest(monkeypatch):
    monkeypatch.setitem(AGGREGATIONS, "weakest_link", AggregationMethod(weakest_link, two_or_more))


async def test_a_registered_method_loads_and_scores(weakest, guess_trajs, oracle_trajs, toy_rubric):
    rubric = load_rubric({**toy_rubric, "aggregation": {"method": "weakest_link"}})
    oracle = await ProcessRewardModel(rubric).score(oracle_trajs[0])
    assert oracle.method == "weakest_link" and oracle.total == 1.0
    guess = next(t for t in guess_trajs if t.outcome.reward == 0)
    b = await ProcessRewardModel(rubric).score(guess)
    assert b.valid and b.total == min(b.per_criterion.values()) == 0.0

    with pytest.raises(RubricError, match="weakest_link needs two criteria"):
        load_rubric({**toy_rubric, "criteria": toy_rubric["criteria"][:1], "aggregation": {"method": "weakest_link"}})


def test_an_unknown_method_names_the_known_ones(toy_rubric):
    with pytest.raises(RubricError, match="unknown aggregation method 'weakest_link'; use one of rar, signed"):
        load_rubric({**toy_rubric, "aggregation": {"method": "weakest_link"}})


def test_built_in_methods_name_importable_totals():
    for name, method in AGGREGATIONS.items():
        assert callable(method.total_fn()), name
