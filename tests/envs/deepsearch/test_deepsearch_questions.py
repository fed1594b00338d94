"""Questions: 2-5 hops, a unique answer, hidden entities kept out of the prompt, evidence on the cited pages."""

from __future__ import annotations

import random
import re

import pytest

from rubricgym.envs.deepsearch.questions import DIFFICULTY_HOPS, Constraint, _candidates, make_question
from rubricgym.envs.deepsearch.render import render_world
from rubricgym.envs.deepsearch.world import Entity, Relation, World, generate_world

WORLD = generate_world(5, 800)
CORPUS = render_world(WORLD)


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTY_HOPS))
def test_questions_are_well_formed(difficulty):
    rng = random.Random(difficulty)
    lo, hi = DIFFICULTY_HOPS[difficulty]
    for _ in range(8):
        q = make_question(WORLD, CORPUS, rng, difficulty)
        hidden = q["hidden"]
        assert lo <= q["hops"] <= hi
        assert set(hidden["entities"]) == {f"E{i}" for i in range(q["hops"] + 1)}
        for ent in hidden["entities"].values():  # hidden entities never appear in the question
            assert ent["name"] not in q["prompt"]
        for st in hidden["statements"]:
            assert set(re.findall(r"<(E\d+)>", st["text"])) == set(st["entities"])
            for ev in st["evidence"]:  # the supporting sentence is on the cited page
                doc = CORPUS.docs[CORPUS.resolve(ev["url"])]
                assert ev["text"] in doc.text
        # every hop has a statement linking its two entities
        linked = {frozenset(st["entities"]) for st in hidden["statements"] if len(st["entities"]) == 2}
        assert all(frozenset({f"E{i}", f"E{i + 1}"}) in linked for i in range(q["hops"]))


def test_candidates_see_through_near_duplicates():
    """Two people born in two towns founded the same year: the year alone is ambiguous, the region is not."""
    people = [
        Entity(0, "person", "Ada Vell", [], {"birth_year": 1900, "occupation": "poet"}),
        Entity(1, "person", "Ada Velll", [], {"birth_year": 1900, "occupation": "poet"}, twin_of=0),
    ]
    towns = [
        Entity(
            2,
            "place",
            "Brook",
            [],
            {"place_kind": "town", "founded": 1700, "region": "North", "river": "X", "population": 100},
        ),
        Entity(
            3,
            "place",
            "Broook",
            [],
            {"place_kind": "town", "founded": 1700, "region": "South", "river": "X", "population": 100},
            twin_of=2,
        ),
    ]
    rels = [Relation(0, "born_in", 2), Relation(1, "born_in", 3)]
    world = World(0, 100, people + towns, rels, ["North", "South"], ["X"], [[0], [1], [0], [1]], n_lists=0)
    chain, hop = [0, 2], [rels[0]]
    assert _candidates(world, chain, hop, [Constraint(1, "founded", False)]) == {0, 1}
    assert _candidates(world, chain, hop, [Constraint(1, "founded", False), Constraint(1, "region", False)]) == {0}
    assert _candidates(world, chain, hop, [Constraint(1, "founded", True), Constraint(0, "birth_year", True)]) == {0, 1}


def test_generated_answers_are_unique_in_the_world():
    rng = random.Random(0)
    for difficulty in sorted(DIFFICULTY_HOPS):
        q = make_question(WORLD, CORPUS, rng, difficulty)
        e0 = int(q["hidden"]["entities"]["E0"]["doc"][1:])
        assert WORLD.entities[e0].name == q["hidden"]["answer"]
        # the answer's near-duplicates are listed so that naming one of them is not a correct answer
        twins = [t.name for t in WORLD.entities if t.twin_of == e0 or WORLD.entities[e0].twin_of == t.idx]
        assert set(twins) <= set(q["hidden"]["confusable"])


def test_fixed_hops_and_unknown_difficulty():
    q = make_question(WORLD, CORPUS, random.Random(1), "hard", hops=5)
    assert q["hops"] == 5
    with pytest.raises(ValueError, match="difficulty"):
        make_question(WORLD, CORPUS, random.Random(1), "impossible")
