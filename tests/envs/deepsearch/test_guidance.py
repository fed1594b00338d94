"""deepsearch-v0 guidance (graded hints for a group that all failed) and the difficulty knobs hops/distractors."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from rubricgym.core.types import Task
from rubricgym.envs.deepsearch import DeepSearchEnv
from rubricgym.envs.deepsearch import guidance as ds_guidance
from rubricgym.envs.deepsearch.agents import OracleAgent
from rubricgym.rewards.leaks import Scanner, audit_leaks, make_secrets

SEARCH = re.compile(r'result \[(\d+)\] of search\(query="([^"]*)"(?:, k=(\d+))?\)')


@pytest.fixture(scope="module")
def many_tasks() -> list[tuple[DeepSearchEnv, Task]]:
    """30 tasks of the default world: 1 to 5 hops, both splits."""
    out = []
    for hops in range(1, 6):
        env = DeepSearchEnv(hops=hops)
        out += [(env, t) for split in ("train", "test") for t in env.task_set(3, seed=hops, split=split)]
    return out


def scanner(task: Task) -> Scanner:
    return Scanner(make_secrets(DeepSearchEnv.secrets(task)))


def test_every_level_hints_and_higher_levels_add_to_the_lower(many_tasks):
    assert DeepSearchEnv.guidance_levels == 3
    assert {t.split for _, t in many_tasks} == {"train", "test"}
    for env, task in many_tasks:
        hints = [env.guidance(task, level) for level in range(1, 4)]
        assert all(isinstance(h, str) and h.strip() for h in hints), (task.id, hints)
        for lower, higher in zip(hints, hints[1:], strict=False):
            assert higher != lower and higher.startswith(lower) and len(higher) > len(lower)  # type: ignore[union-attr]
        assert env.guidance(task, 0) is None and env.guidance(task, 4) is None


def test_no_hint_contains_a_secret_and_a_leaking_hint_would_be_caught(many_tasks):
    for env, task in many_tasks:
        find = scanner(task).find
        for level in range(1, 4):
            hint = env.guidance(task, level)
            assert hint is not None and not find(hint), (task.id, level, find(hint or ""))
        h = task.hidden
        hint = env.guidance(task, 3)
        first = h["entities"][f"E{task.params['hops']}"]
        for leaked in (h["answer"], h["aliases"][0] if h["aliases"] else h["answer"], first["name"], first["url"]):
            assert find(f"{hint} Try {leaked}."), leaked  # the scanner sees a name, an alias or a page in a hint


def test_level_two_points_at_the_page_the_chain_starts_from(many_tasks):
    for env, task in many_tasks:
        m = SEARCH.search(env.guidance(task, 2) or "")
        assert m, task.id
        rank, query, k = int(m.group(1)), m.group(2), int(m.group(3) or 5)
        env.reset(options={"task": task})  # the task's world (held-out tasks live in another world)
        hits = env.index.search(query, k)
        start = task.hidden["entities"][f"E{task.params['hops']}"]
        assert env.corpus.docs[hits[rank - 1].doc].url == start["url"], (task.id, query, rank)


def test_the_chain_names_kinds_and_hops_never_entities(many_tasks):
    env, task = next((e, t) for e, t in many_tasks if t.params["hops"] == 3)
    chain = env.guidance(task, 3) or ""
    assert [f"Hop {i}:" in chain for i in (1, 2, 3, 4)] == [True, True, True, False]
    assert "you start from" in chain and "the answer (" in chain and "<E" not in chain


def test_guidance_is_deterministic_and_independent_of_the_env_instance(many_tasks):
    env, task = many_tasks[0]
    other = DeepSearchEnv()  # another env of the same world (different hops): the task's params name the world
    assert [env.guidance(task, lv) for lv in (1, 2, 3)] == [other.guidance(task, lv) for lv in (1, 2, 3)]
    assert env.guidance(task, 2) == env.guidance(task, 2)


def test_a_part_that_would_carry_a_secret_is_dropped(many_tasks, monkeypatch):
    env, task = many_tasks[0]
    good = ds_guidance.hint_parts
    monkeypatch.setattr(
        ds_guidance, "hint_parts", lambda t, *a: [*good(t, *a)[:2], f"The answer is {t.hidden['answer']}."]
    )
    assert env.guidance(task, 2) and env.guidance(task, 3) is None


def test_real_corpus_questions_hint_or_return_none(tmp_path, real_corpus):
    folder, questions = real_corpus
    extra = [
        {
            "question": "Which market town was founded in 1702?",
            "answer": "Dunmere",
            "gold_docs": ["places/dunmere.html"],
        },
        {"question": "Which poet wrote about the rain?", "answer": "Ada Vell"},
    ]
    with questions.open("a", encoding="utf-8") as f:
        f.writelines(json.dumps(q) + "\n" for q in extra)
    env = DeepSearchEnv(corpus=str(folder), questions=str(questions))
    tasks = env.task_set(3, split="train") + env.task_set(3, split="test")
    for task in tasks:
        hints = [env.guidance(task, level) for level in (1, 2, 3)]
        assert hints[0], task.id
        assert not any(scanner(task).find(h) for h in hints if h), (task.id, hints)
    ada, dunmere, rain = (tasks[0], tasks[1], tasks[2])
    assert all(env.guidance(ada, lv) for lv in (1, 2, 3))  # a named entity's page, then its rubric statements
    assert "entity 1 lies on the Dunmere road" in (env.guidance(ada, 3) or "")
    m = SEARCH.search(env.guidance(dunmere, 2) or "")  # the gold page, found by the question's words
    assert m and env.corpus.docs[env.index.search(m.group(2), 5)[int(m.group(1)) - 1].doc].title == "Dunmere"
    assert env.guidance(dunmere, 3) is None  # no statements
    assert env.guidance(rain, 2) is None and env.guidance(rain, 3) is None  # no gold page, no named entity


def test_leak_audit_scans_guidance_and_catches_a_leaking_hint(monkeypatch):
    oracle = {"oracle": OracleAgent}
    report = asyncio.run(audit_leaks("deepsearch-v0", n_tasks=2, agents=oracle, env_kwargs={"hops": 2}))
    assert report.ok, report.line()
    monkeypatch.setattr(DeepSearchEnv, "guidance", lambda self, task, level: f"try {task.hidden['answer']}")
    bad = asyncio.run(audit_leaks("deepsearch-v0", n_tasks=1, agents=oracle, env_kwargs={"hops": 2}))
    assert {leak.channel for leak in bad.leaks} >= {"guidance level 1", "guidance level 3"}


# ---- difficulty knobs ---------------------------------------------------------------------------------------


def test_hops_from_one_to_five():
    for hops in (1, 5):
        tasks = DeepSearchEnv(hops=hops, n_docs=300).task_set(3, seed=0)
        assert [t.params["hops"] for t in tasks] == [hops] * 3
        assert all(len(t.hidden["entities"]) == hops + 1 for t in tasks)
    for bad in (0, 6):
        with pytest.raises(ValueError, match="hops must be between 1 and 5"):
            DeepSearchEnv(hops=bad)


def test_distractors_set_the_noise_pages_around_the_same_world():
    plain = DeepSearchEnv(n_docs=300, hops=2)
    assert "distractors" not in plain.task_set(1)[0].params["world"]  # default worlds keep their params and ids
    entities = plain.corpus.key, len(plain.corpus)
    none, many = DeepSearchEnv(n_docs=300, hops=2, distractors=0), DeepSearchEnv(n_docs=300, hops=2, distractors=400)
    n_entities = sum(
        1 for d in plain.corpus.docs if not d.title.startswith("List of") and "(disambiguation)" not in d.title
    )
    assert len(none.corpus) == n_entities and len(many.corpus) == n_entities + 400
    assert len({entities[0], none.corpus.key, many.corpus.key}) == 3  # each has its own index
    a, b = none.task_set(3, seed=4), many.task_set(3, seed=4)
    assert [t.prompt for t in a] == [t.prompt for t in b]  # the same questions among more distractors
    assert [t.id for t in a] != [t.id for t in b] and b[0].params["world"]["distractors"] == 400
    assert many.guidance(b[0], 2)  # guidance finds its page among them
    with pytest.raises(ValueError, match="distractors"):
        DeepSearchEnv(distractors=-1)
