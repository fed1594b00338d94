"""Truly held-out deep search (issue #38): the ``test`` split is another world; ``test-train-world`` asks the
training world's reserved entities, which no training question answers."""

from __future__ import annotations

import re

import pytest

from rubricgym.core.agent import tool_call
from rubricgym.core.tasks import TaskSet
from rubricgym.envs.deepsearch import DeepSearchEnv
from rubricgym.envs.deepsearch.env import HELDOUT_SEED_OFFSET, reserved
from rubricgym.envs.deepsearch.world import generate_world

DEMO = {"hops": 1, "n_docs": 100, "distractors": 0, "max_steps": 4, "window_chars": 600}


def names(world) -> set[str]:
    return {n.casefold() for e in world.entities for n in (e.name, *e.aliases)}


def answers(tasks) -> set[str]:
    return {n.casefold() for t in tasks for n in (t.hidden["answer"], *t.hidden["aliases"])}


def test_the_test_split_is_another_world_that_names_no_training_entity():
    env = DeepSearchEnv(**DEMO)
    train, test = env.task_set(200, seed=0), env.task_set(16, seed=1, split="test")
    assert {t.params["world"]["seed"] for t in train} == {0}
    assert {t.params["world"]["seed"] for t in test} == {HELDOUT_SEED_OFFSET}
    assert not answers(test) & names(generate_world(0, 100, 0))  # not even a namesake of a training-world entity
    assert not answers(test) & answers(train)
    env.reset(options={"task": test[0]})
    held_out_pages = {d.url for d in env.corpus.docs}
    assert all(e["url"] in held_out_pages for t in test for e in t.hidden["entities"].values())
    assert {t.id for t in DeepSearchEnv(**DEMO).task_set(16, seed=1, split="heldout")}.isdisjoint(t.id for t in test)


def test_train_world_heldout_questions_answer_only_reserved_entities():
    env = DeepSearchEnv(**DEMO)
    train = env.task_set(200, seed=0)
    seen_world = env.task_set(30, seed=1, split="test-train-world")
    assert {t.params["world"]["seed"] for t in seen_world} == {0}  # the training world's pages
    assert not answers(seen_world) & answers(train)
    assert all(reserved("world-s0-n100", t.hidden["answer"]) for t in seen_world)
    assert not any(reserved("world-s0-n100", t.hidden["answer"]) for t in train)


def test_ids_are_opaque_and_deterministic():
    env = DeepSearchEnv(**DEMO)
    for split in ("train", "test", "test-train-world"):
        a, b = env.task_set(8, seed=2, split=split), DeepSearchEnv(**DEMO).task_set(8, seed=2, split=split)
        assert [t.id for t in a] == [t.id for t in b]
        assert all(re.fullmatch(r"ds-[0-9a-f]{12}", t.id) for t in a)


def test_an_env_plays_heldout_and_training_tasks_in_turn_each_in_its_world():
    env = DeepSearchEnv(**DEMO)
    train, test = env.task_set(1, seed=0)[0], env.task_set(1, seed=1, split="test")[0]
    for task in (test, train, test):
        env.reset(options={"task": task})
        leaf = task.hidden["entities"]["E1"]["url"]
        obs, *_ = env.step(tool_call("open", doc=leaf))
        assert obs.startswith(task.hidden["entities"]["E1"]["name"]), obs[:80]


def test_heldout_world_seed_and_splits_are_checked():
    env = DeepSearchEnv(**DEMO, heldout_world_seed=42)
    assert {t.params["world"]["seed"] for t in env.task_set(3, split="test")} == {42}
    assert env.client_task_refusal(env.task_set(1, split="test")[0]) is None
    other = env.task_set(1, split="test")[0]
    other.params["world"] = {**other.params["world"], "seed": 7}
    assert "not a world this server serves" in (env.client_task_refusal(other) or "")
    with pytest.raises(ValueError, match="heldout_world_seed must differ from world_seed"):
        DeepSearchEnv(world_seed=3, heldout_world_seed=3)
    with pytest.raises(ValueError, match=r"splits \['train', 'test', 'heldout', 'test-train-world'\], not 'dev'"):
        env.task_set(1, split="dev")


def test_a_missing_page_error_names_no_page_of_the_world():
    """The error used to show the world's first page as its example: a secret when that page is an answer."""
    env = DeepSearchEnv(**DEMO)
    env.reset(options={"task": env.task_set(1, split="test")[0]})
    obs, *_ = env.step(tool_call("open", doc="https://nowhere.test/x"))
    assert "no page" in obs and not any(d.url in obs for d in env.corpus.docs)


def test_the_demos_200_training_tasks_make_a_task_set():
    # Two difficulties drew the same one-hop question under one id, so `rubricgym run deepsearch-v0 --tasks 200` with
    # the demo's knobs stopped with "two different tasks share the id"; the id now names the difficulty too.
    tasks = TaskSet.generate("deepsearch-v0", 200, seed=0, **DEMO)
    assert len(tasks) >= 195  # a question drawn twice at one difficulty is kept once
    by_prompt: dict[str, set[str]] = {}
    for t in tasks:
        by_prompt.setdefault(t.prompt, set()).add(t.params["difficulty"])
    assert any(len(d) > 1 for d in by_prompt.values())  # the case the id must tell apart is in this set
