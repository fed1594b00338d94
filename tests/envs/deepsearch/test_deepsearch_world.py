"""Fictional worlds: deterministic, sized as asked, with near-duplicates and every fact stated on its pages."""

from __future__ import annotations

import pytest

from rubricgym.envs.deepsearch.render import attribute_sentences, relation_sentence, render_world
from rubricgym.envs.deepsearch.world import generate_world


def _edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def test_same_seed_same_world_other_seed_other_world():
    a, b, c = generate_world(3, 400), generate_world(3, 400), generate_world(4, 400)
    assert [e.name for e in a.entities] == [e.name for e in b.entities]
    assert [(r.subject, r.pred, r.object) for r in a.relations] == [(r.subject, r.pred, r.object) for r in b.relations]
    assert [e.name for e in a.entities] != [e.name for e in c.entities]


@pytest.mark.parametrize("n_docs", [100, 2500])
def test_corpus_has_the_requested_number_of_unique_pages(n_docs):
    corpus = render_world(generate_world(0, n_docs))
    assert len(corpus) == n_docs
    assert len({d.id for d in corpus.docs}) == n_docs
    assert len({d.url for d in corpus.docs}) == n_docs
    titles = [d.title for d in corpus.docs]
    assert any(t.startswith("List of ") for t in titles) and any(t.endswith("(disambiguation)") for t in titles)


def test_scale_knob_is_checked():
    with pytest.raises(ValueError, match="n_docs"):
        generate_world(0, 10)


def test_near_duplicates_share_headline_attributes_but_not_relations():
    world = generate_world(1, 2000)
    twins = [e for e in world.entities if e.twin_of is not None]
    assert len(twins) > 50
    for t in twins[:50]:
        src = world.entities[t.twin_of]
        assert t.kind == src.kind and t.attrs == src.attrs and t.name != src.name
        assert _edit_distance(t.name, src.name) <= 2
    same = sum(
        {(r.pred, o) for r, o in world.neighbours(t.idx)} == {(r.pred, o) for r, o in world.neighbours(t.twin_of)}
        for t in twins
    )  # type: ignore[arg-type]
    assert same < len(twins) / 10


def test_every_fact_is_stated_on_its_pages():
    world = generate_world(2, 600)
    corpus = render_world(world)
    for r in world.relations[:300]:
        sentence = relation_sentence(world, r)
        assert sentence in corpus.docs[r.subject].text
        assert sentence in corpus.docs[r.object].text
    for e in world.entities[:200]:
        for sentence in attribute_sentences(e).values():
            assert sentence in corpus.docs[e.idx].text
