"""The BM25 index: finds pages, highlights snippets, persists to disk and is reused, never fails on a query."""

from __future__ import annotations

import pytest

from rubricgym.envs.deepsearch.corpus import Corpus, Document
from rubricgym.envs.deepsearch.index import SearchIndex
from rubricgym.envs.deepsearch.render import render_world
from rubricgym.envs.deepsearch.world import generate_world


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return render_world(generate_world(11, 400))


def test_title_search_finds_the_page_with_a_highlighted_snippet(corpus, tmp_path):
    index = SearchIndex.open_or_build(corpus, tmp_path)
    for doc in corpus.docs[:40]:
        hits = index.search(doc.title, k=5)
        assert doc.id in [corpus.docs[h.doc].id for h in hits]
        top = hits[0]
        assert top.snippet in corpus.docs[top.doc].text.replace("\n", " ") or top.snippet.endswith("…")
        assert "**" in top.highlighted and top.highlighted.replace("**", "") == top.snippet
    assert len({h.doc for h in index.search("born in", k=10)}) == 10  # one hit per document


def test_index_is_persisted_and_reused(corpus, tmp_path, monkeypatch):
    first = SearchIndex.open_or_build(corpus, tmp_path)
    assert first.path is not None and (first.path / "READY").exists()
    monkeypatch.setattr(SearchIndex, "_build", staticmethod(lambda *a: pytest.fail("rebuilt a cached index")))
    again = SearchIndex.open_or_build(corpus, tmp_path)
    assert again.path == first.path
    q = corpus.docs[5].title
    assert [(h.doc, h.score) for h in again.search(q)] == [(h.doc, h.score) for h in first.search(q)]


def test_cache_dir_follows_rubricgym_cache(corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path / "here"))
    index = SearchIndex.open_or_build(corpus)
    assert str(index.path).startswith(str(tmp_path / "here" / "deepsearch"))


@pytest.mark.parametrize(
    "query", ["", "   ", "the of and", "中文 😀", 'AND OR NOT ( ) * : " title:x', "x" * 5000, "\x00\x01"]
)
def test_odd_queries_never_raise(corpus, tmp_path, query):
    hits = SearchIndex.open_or_build(corpus, tmp_path).search(query, k=3)
    assert len(hits) <= 3


def test_stemming_matches_word_forms(tmp_path):
    docs = [
        Document("a", "Guild", "u://a", "The guild was founded in 1723 by weavers."),
        Document("b", "Port", "u://b", "A port town with many ships."),
    ]
    index = SearchIndex.in_memory(Corpus(docs))
    assert [index.corpus.docs[h.doc].id for h in index.search("founding weaver")] == ["a"]
