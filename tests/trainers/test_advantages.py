"""Worked examples for the advantage estimators, computed by hand from docs/algorithms.md."""

import math

import numpy as np
import pytest

from rubricgym.trainers.algo.advantages import (
    PAPER_LAMBDA,
    default_lambda,
    grpo_advantages,
    rloo_advantages,
    spread_to_tokens,
    stage_advantages,
    stage_returns,
    step_advantages,
)


def test_grpo_group_scale_normalises_within_each_group():
    a = grpo_advantages([[1, 0, 0, 1], [0.5, 0.5, 0.5, 0.5]], scale="group")
    # group 1: mean .5, population std .5 -> +-1; a constant group carries no signal
    np.testing.assert_allclose(a[0], [1, -1, -1, 1], atol=1e-5)
    np.testing.assert_allclose(a[1], [0, 0, 0, 0])


def test_grpo_batch_scale_uses_the_std_of_the_whole_batch():
    a = grpo_advantages([[1, 0, 0, 1], [0.5, 0.5, 0.5, 0.5]], scale="batch")
    # batch: mean .5, deviations .5 x4 and 0 x4 -> var .125, std .353553
    np.testing.assert_allclose(a[0], [1.414214, -1.414214, -1.414214, 1.414214], atol=1e-5)


def test_dr_grpo_does_not_divide():
    np.testing.assert_allclose(grpo_advantages([[1, 0, 0, 1]], scale="none")[0], [0.5, -0.5, -0.5, 0.5])


def test_errored_samples_are_excluded_not_zero():
    # with nan treated as 0 the mean would be 1/3; excluded it is .5 and the errored sample gets 0
    np.testing.assert_allclose(grpo_advantages([[1, np.nan, 0]])[0], [1, 0, -1], atol=1e-5)
    np.testing.assert_allclose(rloo_advantages([[1, np.nan, 0]])[0], [1, 0, -1])


def test_rloo_leave_one_out_baseline():
    np.testing.assert_allclose(rloo_advantages([[1, 0, 0, 1]])[0], [2 / 3, -2 / 3, -2 / 3, 2 / 3])
    np.testing.assert_allclose(rloo_advantages([[3.0]])[0], [0.0])


def test_bad_inputs_say_what_is_wrong():
    with pytest.raises(ValueError, match="2-D"):
        grpo_advantages([1, 0])
    with pytest.raises(ValueError, match="scale"):
        grpo_advantages([[1, 0]], scale="median")  # type: ignore[arg-type]


def test_default_lambda_is_the_papers_for_four_stages():
    np.testing.assert_allclose(default_lambda(4), PAPER_LAMBDA)
    np.testing.assert_allclose(default_lambda(2), [[1, 0.8], [0, 1]])


def test_stage_structured_returns_and_advantages():
    r = np.array([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    g = stage_returns(r)  # Λ = [[1, .8], [0, 1]]
    np.testing.assert_allclose(g, [[1.8, 1.0], [0.8, 1.0], [1.0, 0.0]])
    a = stage_advantages(r)
    # stage 0: G = 1.8, .8, 1.0 -> mean 1.2, std sqrt(.56/3) = .432049
    np.testing.assert_allclose(a[:, 0], [0.6 / 0.432049, -0.4 / 0.432049, -0.2 / 0.432049], atol=1e-4)
    # stage 1: G = 1, 1, 0 -> mean 2/3, std sqrt(2/9)
    s = math.sqrt(2 / 9)
    np.testing.assert_allclose(a[:, 1], [1 / 3 / s, 1 / 3 / s, -2 / 3 / s], atol=1e-4)


def test_stage_returns_with_the_papers_lambda():
    r = np.array([[0.5, 0.25, 1.0, 0.0]])
    # G0 = .5 + .4*.25 + .6*1 + .8*0 = 1.2 ; G1 = .25 + .4 ; G2 = 1 ; G3 = 0
    np.testing.assert_allclose(stage_returns(r, PAPER_LAMBDA)[0], [1.2, 0.65, 1.0, 0.0])


def test_stage_never_reached_gets_zero_advantage():
    r = np.array([[1.0, np.nan], [0.0, 1.0], [1.0, 0.0]])
    a = stage_advantages(r)
    assert a[0, 1] == 0.0
    np.testing.assert_allclose(a[1:, 1], [1, -1], atol=1e-5)


def test_lambda_must_be_upper_triangular():
    with pytest.raises(ValueError, match="upper triangular"):
        stage_returns(np.ones((2, 2)), np.ones((2, 2)))


def test_step_advantages_pool_the_groups_steps():
    # rewards 1, 0 | -1 : mean 0, std sqrt(2/3)
    s = math.sqrt(2 / 3)
    out = step_advantages([[1.0, 0.0], [-1.0]])
    np.testing.assert_allclose(out[0], [1 / s, 0.0], atol=1e-5)
    np.testing.assert_allclose(out[1], [-1 / s], atol=1e-5)


def test_spread_to_tokens_gives_each_segment_its_value():
    seg = np.array([-1, -1, 0, 0, -1, 1, 1])
    np.testing.assert_allclose(spread_to_tokens(seg, [0.5, -2.0]), [0, 0, 0.5, 0.5, 0, -2, -2])
    with pytest.raises(ValueError, match="no value"):
        spread_to_tokens(np.array([0, 2]), [1.0])
