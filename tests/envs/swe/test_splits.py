"""swe-v0's splits: a built-in (or marked) instance is ``train``'s or held out, never both (issue #38, item 3)."""

from __future__ import annotations

import numpy as np
import pytest

from rubricgym.core.registry import make
from rubricgym.envs.swe import SweEnv
from rubricgym.envs.swe.builtin import BUGS, HELDOUT_BUGS, builtin_instances


def _ids(env: SweEnv, split: str) -> set[str]:
    return {t.id for t in env.task_set(len(env.pool(split)), seed=0, split=split)}


def test_builtin_tasks_have_fixed_disjoint_splits_and_all_draws_every_one():
    env = make("swe-v0")
    train, test, every = _ids(env, "train"), _ids(env, "test"), _ids(env, "all")
    assert test == {f"tinytext__{b}" for b in HELDOUT_BUGS} and len(train) == len(BUGS) - len(HELDOUT_BUGS)
    assert train.isdisjoint(test) and train | test == every
    kinds = {b.kind for b in BUGS if b.id in HELDOUT_BUGS}
    assert len(kinds) >= 3, kinds  # the held-out bugs are of several kinds
    for seed in range(5):  # a draw without a task set (reset with no task) stays in its split too
        assert env.sample_task(np.random.default_rng(seed), "test").id in test
        assert env.sample_task(np.random.default_rng(seed), "train").id in train


def test_asking_for_more_than_a_split_holds_says_how_many_it_holds():
    with pytest.raises(ValueError, match=r"has 4 built-in offline tasks in split 'test' \(10 in all; split='all'"):
        make("swe-v0").task_set(5, split="test")


def _user_instances(n: int, split: dict[int, object] | None = None):
    base = builtin_instances()[0]
    return [
        base.model_copy(
            update={"instance_id": f"user__{i}", "details": {"split": split[i]} if split and i in split else {}}
        )
        for i in range(n)
    ]


def test_user_instances_follow_their_marked_split_and_unmarked_ones_serve_every_split():
    marked = SweEnv(instances=_user_instances(4, {0: "test", 1: "train", 2: "train"}))
    assert _ids(marked, "test") == {"user__0", "user__3"} and _ids(marked, "train") == {"user__1", "user__2", "user__3"}
    unmarked = SweEnv(instances=_user_instances(3))  # a file of instances to evaluate on works as it is
    assert _ids(unmarked, "test") == _ids(unmarked, "train") == {"user__0", "user__1", "user__2"}


def test_a_bad_split_mark_or_an_empty_split_is_a_clear_error():
    with pytest.raises(ValueError, match=r"user__0: details.split is 7; mark it 'train' or 'test'"):
        SweEnv(instances=_user_instances(1, {0: 7})).task_set(1)
    dev = SweEnv(instances=_user_instances(2, {0: "dev", 1: "train"}))  # a SWE-bench "dev" record is held out
    assert _ids(dev, "test") == {"user__0"} and _ids(dev, "train") == {"user__1"}
    only_train = SweEnv(instances=_user_instances(2, {0: "train", 1: "train"}))
    with pytest.raises(ValueError, match=r"none of the 2 tasks is in split 'test'.*details.split.*split='all'"):
        only_train.sample_task(np.random.default_rng(0), "test")
    assert len(only_train.task_set(2, split="all")) == 2
