"""Held-out evaluation never shares an answer, a case or a world with training (issue #38, item 3).

For every built-in family, the tasks the trainer trains on (split ``train``, ``env.task_seed``) and the tasks its
held-out evaluation plays (split ``test``, ``task_seed + 1``: ``trainers/step.py``'s ``setup_tasks``) are drawn at
the family demo's sizes and knobs, and their answers and case keys (a case id, a prompt, a template, a world)
compared. Clinical's ``test`` is case-disjoint only (new patients of the trained conditions); its ``test-unseen``
shares no diagnosis either. A held-out set drawn from the training tasks must fail the same comparison, in every
family. ``docs/guides/splits.md`` says how to run this on an env of your own.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from rubricgym.core.registry import make
from rubricgym.core.types import Task

Keys = tuple[set[str], set[str]]


def _toy(t: Task) -> Keys:
    # the problem is the task; two different problems may share a number as their answer (the calculator's
    # partition is by problem, so both splits keep the generator's mix of operations: docs/guides/splits.md)
    return set(), {f"problem:{t.prompt}"}


def _clinical(t: Task) -> Keys:
    return {f"condition:{t.hidden['condition']}"}, _clinical_cases(t)[1]


def _clinical_cases(t: Task) -> Keys:
    """The case and the presentation (the prompt, word for word), not the diagnosis: ``test`` shares those."""
    return set(), {f"case:{t.hidden['case_id']}", f"presentation:{t.prompt}"}


def _deepsearch(t: Task) -> Keys:
    names = [t.hidden["answer"], *t.hidden.get("aliases", [])]
    world = json.dumps(t.params.get("world"), sort_keys=True)
    return {f"answer:{n.casefold()}" for n in names}, {f"world:{world}", f"question:{t.prompt}"}


def _swe(t: Task) -> Keys:
    inst = t.hidden["instance"]
    fixed = {ln[1:].strip() for ln in inst["patch"].splitlines() if ln.startswith("+") and not ln.startswith("+++")}
    answers = {f"patch:{inst['patch']}"} | {f"fixed line:{ln}" for ln in fixed if ln}
    return answers, {f"instance:{inst['instance_id']}"} | {f"failing test:{x}" for x in inst["FAIL_TO_PASS"]}


def _gui(t: Task) -> Keys:
    goals = t.hidden["goals"]
    values = {" ".join(str(g["expected"]).split()).casefold() for g in goals if g["field"].startswith("answer.")}
    answers = {f"goals:{json.dumps(goals, sort_keys=True)}"} | {f"answer value:{v}" for v in values}
    return answers, {f"template:{t.params['template']}"}


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


CARDIOLOGY = {"specialty": "cardiology"}
DEEPSEARCH = {"hops": 1, "n_docs": 100, "distractors": 0, "max_steps": 4, "window_chars": 600}
# env id, env kwargs (the family demo's knobs), held-out split, training tasks, held-out tasks, the keys of a task
FAMILIES = [
    pytest.param(
        "toy-calculator-v0",
        {"min_ops": 1, "max_ops": 1, "max_steps": 3, "style": "expression"},
        "test",
        200,
        24,
        _toy,
        id="toy",
    ),
    pytest.param("clinical-v0", CARDIOLOGY, "test", 200, 16, _clinical_cases, id="clinical"),
    pytest.param("clinical-v0", CARDIOLOGY, "test-unseen", 200, 16, _clinical, id="clinical-unseen"),
    pytest.param("deepsearch-v0", DEEPSEARCH, "test", 200, 16, _deepsearch, id="deepsearch"),
    pytest.param("swe-v0", {}, "test", 6, 4, _swe, id="swe"),  # every built-in task of both splits
    pytest.param("gui-v0", {}, "test", 50, 16, _gui, id="gui"),
]


@pytest.mark.parametrize(("env_id", "kwargs", "split", "n_train", "n_heldout", "of"), FAMILIES)
def test_heldout_shares_nothing_with_training(
    env_id: str, kwargs: dict, split: str, n_train: int, n_heldout: int, of: Callable[[Task], Keys]
) -> None:
    env = make(env_id, **kwargs)
    train = env.task_set(n_train, seed=0, split="train")
    heldout = env.task_set(n_heldout, seed=1, split=split)
    assert heldout, f"{env_id} drew no held-out tasks"
    overlap = shared(train, heldout, of)
    assert not overlap, f"{env_id}: held-out tasks share {len(overlap)} answer(s)/case(s) with training: {overlap[:5]}"


@pytest.mark.parametrize(("env_id", "kwargs", "split", "n_train", "n_heldout", "of"), FAMILIES)
def test_a_heldout_set_drawn_from_training_fails(
    env_id: str, kwargs: dict, split: str, n_train: int, n_heldout: int, of: Callable[[Task], Keys]
) -> None:
    """The broken variant: held-out tasks that are training tasks (re-labelled) share their answers and cases."""
    env = make(env_id, **kwargs)
    train = env.task_set(n_train, seed=0, split="train")
    broken = [t.model_copy(update={"split": split}) for t in env.task_set(n_heldout, seed=1, split="train")]
    overlap = shared(train, broken, of)
    assert overlap, f"{env_id}: the comparison missed held-out tasks drawn from training"
    if env_id == "deepsearch-v0":
        assert any(k.startswith("answer:") for k in overlap) and any(k.startswith("world:") for k in overlap)
