"""Token bookkeeping: which tokens train, with which stage/step label and advantage."""

from dataclasses import dataclass

import pytest

from rubricgym.trainers.algo.samples import assign_advantages, build_samples, collate


@dataclass
class T:
    prompt_ids: list
    completion_ids: list
    logprobs: list


def test_turns_that_extend_the_history_merge_into_one_sequence():
    turns = [T([1, 2, 3], [4, 5], [-0.1, -0.2]), T([1, 2, 3, 4, 5, 6, 7], [8], [-0.3])]
    (s,) = build_samples(0, turns, [0, 1])
    assert s.input_ids == [1, 2, 3, 4, 5, 6, 7, 8]
    # only generated tokens train; env text (6, 7) between turns does not
    assert s.loss_mask == [0, 0, 0, 1, 1, 0, 0, 1]
    assert s.step_ids == [-1, -1, -1, 0, 0, -1, -1, 1]
    assert s.stage_ids == [-1, -1, -1, 0, 0, -1, -1, 1]
    assert s.sampled_logprobs == [0, 0, 0, -0.1, -0.2, 0, 0, -0.3]


def test_a_retokenised_history_starts_a_new_sequence():
    turns = [T([1, 2], [3], [-0.5]), T([1, 2, 9, 6], [7], [-0.7])]  # 9 != the generated 3
    a, b = build_samples(0, turns, [0, 0])
    assert a.input_ids == [1, 2, 3] and a.loss_mask == [0, 0, 1]
    assert b.input_ids == [1, 2, 9, 6, 7] and b.loss_mask == [0, 0, 0, 0, 1]
    assert b.step_ids[-1] == 1


def test_advantages_spread_per_rollout_stage_or_step():
    turns = [T([1], [2, 3], [0, 0]), T([1, 2, 3, 4], [5], [0])]
    (s,) = build_samples(0, turns, [0, 1])
    assert assign_advantages(s, rollout_advantage=2.0).advantages == [0, 2, 2, 0, 2]
    assert assign_advantages(s, stage_advantages=[0.5, -1.0]).advantages == [0, 0.5, 0.5, 0, -1.0]
    assert assign_advantages(s, step_advantages=[3.0, 4.0]).advantages == [0, 3, 3, 0, 4]
    with pytest.raises(ValueError, match="exactly one"):
        assign_advantages(s, rollout_advantage=1.0, step_advantages=[1.0])


def test_collate_pads_on_the_right_with_zero_masks():
    turns = [T([1], [2, 3], [0, 0])]
    s1 = assign_advantages(build_samples(0, turns, [0])[0], rollout_advantage=1.0)
    s2 = assign_advantages(build_samples(1, [T([1], [2], [0])], [0])[0], rollout_advantage=-1.0)
    b = collate([s1, s2], pad_id=99)
    assert b.input_ids.tolist() == [[1, 2, 3], [1, 2, 99]]
    assert b.attention_mask.tolist() == [[1, 1, 1], [1, 1, 0]]
    assert b.loss_mask.tolist() == [[0, 1, 1], [0, 1, 0]]
    assert b.advantages.tolist() == [[0, 1, 1], [0, -1, 0]]
