"""Held-out evaluation never shares an answer, a case or a world with training (issue #38, item 3).

For every built-in family, the tasks the trainer trains on (split ``train``, ``env.task_seed``) and the tasks its
held-out evaluation plays (split ``test``, ``task_seed + 1``: ``trainers/step.py``'s ``setup_tasks``) are drawn at
the family demo's sizes and knobs, and their answers and case keys (a case id, a template, a world) compared. A
held-out set drawn from the training tasks must fail the same comparison.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from rubricgym.core.registry import make
from rubricgym.core.types import Task

Keys = tuple[set[str], set[str]]


def _toy(t: Task) -> Keys:
    return {f"answer:{t.hidden['answer']}"}, {f"problem:{t.prompt}"}


def _clinical(t: Task) -> Keys:
    return {f"condition:{t.hidden['condition']}"}, {f"case:{t.hidden['case_id']}"}


def _deepsearch(t: Task) -> Keys:
    names = [t.hidden["answer"], *t.hidden.get("aliases", [])]
    world = json.dumps(t.params.get("world"), sort_keys=True)
    return {f"answer:{n.casefold()}" for n in names}, {f"world:{world}", f"question:{t.prompt}"}


def _swe(t: Task) -> Keys:
    inst = t.hidden["instance"]
    return {f"patch:{inst['patch']}"}, {f"instance:{inst['instance_id']}"}


def _gui(t: Task) -> Keys:
    return {f"goals:{json.dumps(t.hidden['goals'], sort_keys=True)}"}, {f"template:{t.params['template']}"}


def keys(tasks: list[Task], of: Callable[[Task], Keys]) -> Keys:
    answers: set[str] = set()
    cases: set[str] = set()
    for t in tasks:
        a, c = of(t)
        answers |= a
        cases |= c
    return answers, cases


def shared(train: list[Task], heldout: list[Task], of: Callable[[Task], Keys]) -> list[str]:
    """The answers and case keys the held-out tasks share with the training tasks (sorted; empty when none)."""
    (ta, tc), (ha, hc) = keys(train, of), keys(heldout, of)
    return sorted((ta & ha) | (tc & hc))


# env id, env kwargs (the family demo's knobs), training tasks, held-out tasks, the keys of a task
FAMILIES = [
    pytest.param(
        "toy-calculator-v0",
        {"min_ops": 1, "max_ops": 1, "max_steps": 3, "style": "expression"},
        200,
        24,
        _toy,
        marks=pytest.mark.xfail(
            strict=True,
            reason="toy: train and test are seeded draws of one problem space (the split only changes the seed): at "
            "the demo's knobs 10 of 23 held-out answers are training answers and 2 of 24 held-out problems are "
            "training problems word for word",
        ),
        id="toy",
    ),
    pytest.param(
        "clinical-v0",
        {"specialty": "cardiology"},
        200,
        16,
        _clinical,
        marks=pytest.mark.xfail(
            strict=True,
            reason="clinical: case ids are disjoint (0 of 16 shared), but held-out cases are drawn from the same "
            "conditions as training: all 6 held-out diagnoses are training answers",
        ),
        id="clinical",
    ),
    pytest.param(
        "deepsearch-v0",
        {"hops": 1, "n_docs": 100, "distractors": 0, "max_steps": 4, "window_chars": 600},
        200,
        16,
        _deepsearch,
        id="deepsearch",
    ),
    pytest.param(
        "swe-v0",
        {},
        10,
        4,
        _swe,
        marks=pytest.mark.xfail(
            strict=True,
            reason="swe: train and test are seeded orders of the same 10 built-in instances: all 4 held-out "
            "instances (and their fixes) are training instances",
        ),
        id="swe",
    ),
    pytest.param(
        "gui-v0",
        {},
        50,
        16,
        _gui,
        marks=pytest.mark.xfail(
            strict=True,
            reason="gui: templates are disjoint (0 of 10 shared), but a held-out goal equals a training goal "
            "(answer.count == '4')",
        ),
        id="gui",
    ),
]


@pytest.mark.parametrize(("env_id", "kwargs", "n_train", "n_heldout", "of"), FAMILIES)
def test_heldout_shares_nothing_with_training(
    env_id: str, kwargs: dict, n_train: int, n_heldout: int, of: Callable[[Task], Keys]
) -> None:
    env = make(env_id, **kwargs)
    train = env.task_set(n_train, seed=0, split="train")
    heldout = env.task_set(n_heldout, seed=1, split="test")
    assert heldout, f"{env_id} drew no held-out tasks"
    overlap = shared(train, heldout, of)
    assert not overlap, f"{env_id}: held-out tasks share {len(overlap)} answer(s)/case(s) with training: {overlap[:5]}"


def test_a_heldout_set_drawn_from_training_fails() -> None:
    """The broken variant: held-out tasks that are training tasks (re-labelled) share their answers and world."""
    env = make("deepsearch-v0", hops=1, n_docs=100, distractors=0, max_steps=4, window_chars=600)
    train = env.task_set(200, seed=0, split="train")
    broken = [t.model_copy(update={"split": "test"}) for t in env.task_set(16, seed=1, split="train")]
    overlap = shared(train, broken, _deepsearch)
    assert any(k.startswith("answer:") for k in overlap)
    assert any(k.startswith("world:") for k in overlap)
