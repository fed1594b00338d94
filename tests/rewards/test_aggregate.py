"""Every aggregator against a worked example computed by hand from the formulas in docs/algorithms.md."""

import pytest

from rubricgym.rewards.aggregate import (
    LEVEL_WEIGHTS,
    c_grpo_reward,
    carr_rubric_reward,
    rar_explicit,
    rar_implicit,
    renorm_step_rewards,
    signed_reward,
    swe_trace_margin,
    weighted_mean,
)


def test_rar_explicit_worked_example():
    # essential met, important missed, optional met, pitfall (phrased positively) met:
    # (1.0*1 + 0.7*0 + 0.3*1 + 0.9*1) / (1.0 + 0.7 + 0.3 + 0.9) = 2.2 / 2.9
    w = [LEVEL_WEIGHTS[k] for k in ("essential", "important", "optional", "pitfall")]
    assert w == [1.0, 0.7, 0.3, 0.9]
    assert rar_explicit([1, 0, 1, 1], w) == pytest.approx(2.2 / 2.9)
    assert rar_explicit([0.5, 1.0], [1.0, 0.3]) == pytest.approx((0.5 + 0.3) / 1.3)


def test_rar_explicit_edges_and_errors():
    assert rar_explicit([], []) == 0.0
    with pytest.raises(ValueError, match="signed_reward"):
        rar_explicit([1.0], [-0.9])
    with pytest.raises(ValueError, match="one weight per score"):
        rar_explicit([1.0, 0.0], [1.0])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        rar_explicit([1.5], [1.0])


def test_rar_implicit_maps_likert_to_unit_interval():
    assert rar_implicit(7, 1, 10) == pytest.approx(6 / 9)
    assert rar_implicit(1) == 0.0 and rar_implicit(10) == 1.0
    with pytest.raises(ValueError):
        rar_implicit(11)


def test_signed_reward_worked_example():
    # weights +1.0, +0.7, -0.9 (a negatively phrased pitfall); total |w| = 2.6
    # g = [1, 0, 1]: 1.0 + 0 + 0.9*(1-1) = 1.0 -> 1.0/2.6
    assert signed_reward([1, 0, 1], [1.0, 0.7, -0.9]) == pytest.approx(1.0 / 2.6)
    # g = [1, 1, 0]: everything good, pitfall avoided -> 2.6/2.6
    assert signed_reward([1, 1, 0], [1.0, 0.7, -0.9]) == pytest.approx(1.0)
    # only the pitfall is hit and nothing else met -> 0
    assert signed_reward([0, 0, 1], [1.0, 0.7, -0.9]) == 0.0


def test_signed_equals_rar_for_positive_weights():
    scores, weights = [1, 0.25, 0], [1.0, 0.7, 0.3]
    assert signed_reward(scores, weights) == pytest.approx(rar_explicit(scores, weights))
    assert weighted_mean([], []) is None


def test_renorm_worked_example():
    # r_t = (p_t - 0.5) + (r_out - 0.5)
    assert renorm_step_rewards([0.8, 0.2], 1.0) == pytest.approx([0.8, 0.2])
    assert renorm_step_rewards([0.8, 0.2], 0.0) == pytest.approx([-0.2, -0.8])
    assert renorm_step_rewards([], 1.0) == []


def test_swe_trace_margin_worked_example():
    # gamma 0.7, s_prm 0.5: pass -> 0.7 + 0.3*0.5 = 0.85; fail -> 0.3*0.5 = 0.15
    assert swe_trace_margin(0.5, True, 0.7) == pytest.approx(0.85)
    assert swe_trace_margin(0.5, False, 0.7) == pytest.approx(0.15)
    # the worst passing trajectory outranks the best failing one
    assert swe_trace_margin(0.0, True, 0.7) > swe_trace_margin(1.0, False, 0.7)
    with pytest.raises(ValueError, match="gamma"):
        swe_trace_margin(0.5, True, 0.5)


def test_carr_bfs_worked_example():
    # S0 E0-E1 supported, S1 E1-E2 supported, S2 E2-E3 NOT supported, S3 E3-E4 supported (cut off by S2),
    # S4 E5 supported but disconnected: reachable supported = {S0, S1} -> 2/5
    rubrics = [["E0", "E1"], ["E1", "E2"], ["E2", "E3"], ["E3", "E4"], ["E5"]]
    supported = [True, True, False, True, True]
    assert carr_rubric_reward(rubrics, supported) == pytest.approx(0.4)
    # supporting S2 connects S3 too: 4/5
    assert carr_rubric_reward(rubrics, [True, True, True, True, True]) == pytest.approx(0.8)
    # nothing touches the answer entity -> 0
    assert carr_rubric_reward([["E1", "E2"]], [True]) == 0.0
    assert carr_rubric_reward([], []) == 0.0
    # a custom answer entity
    assert carr_rubric_reward([["A", "B"], ["C"]], [True, True], answer_entity="A") == pytest.approx(0.5)


def test_c_grpo_worked_example():
    # outcome 1, rubric 0.4, alpha 0.3: 0.7*1 + 0.3*0.4 = 0.82; a wrong answer gets 0 however well cited
    assert c_grpo_reward(1.0, 0.4) == pytest.approx(0.82)
    assert c_grpo_reward(0.0, 1.0) == 0.0
    assert c_grpo_reward(1.0, 0.4, alpha=0.5) == pytest.approx(0.7)
