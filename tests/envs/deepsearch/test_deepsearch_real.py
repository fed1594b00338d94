"""A real corpus: a folder of .md/.txt/.html files (or a JSONL of documents) plus a questions JSONL, end to end."""

from __future__ import annotations

import asyncio
import json

import pytest

from rubricgym.core.registry import make
from rubricgym.core.rollout import rollout
from rubricgym.envs.deepsearch import DeepSearchEnv
from rubricgym.envs.deepsearch.agents import AGENTS
from rubricgym.envs.deepsearch.corpus import CorpusError, load_corpus
from rubricgym.envs.deepsearch.real import load_questions


def test_folder_corpus_loads_text_markdown_and_html(real_corpus):
    corpus = load_corpus(real_corpus[0])
    assert len(corpus) == 4
    html = corpus.docs[corpus.resolve("places/dunmere.html")]
    assert html.title == "Dunmere" and "founded in 1702" in html.text and "var x" not in html.text
    assert corpus.docs[corpus.resolve("people/ada_vell.md")].title == "Ada Vell"
    assert all(d.url.startswith("file://") for d in corpus.docs)


def test_real_corpus_end_to_end(real_corpus):
    folder, questions = real_corpus
    env = make("deepsearch-v0", corpus=str(folder), questions=str(questions))
    task = env.task_set(1, seed=0)[0]
    assert task.hidden["question_id"] == "q-ada" and task.params["difficulty"] == "real"
    assert task.id.startswith("q-") and "ada" not in task.id.lower()  # opaque: an id may name the answer
    trajs = {
        a: asyncio.run(
            rollout(
                make("deepsearch-v0", corpus=str(folder), questions=str(questions)), AGENTS[a](seed=0), task, seed=0
            )
        )
        for a in ("oracle", "shortcut-lucky")
    }
    checks = DeepSearchEnv.checks()
    oracle = checks["carr_rubric"](trajs["oracle"])
    assert checks["outcome_correct"](trajs["oracle"]).met
    assert oracle.score == 1.0, oracle.details["statements"]
    assert trajs["oracle"].outcome.reward == 1.0
    assert trajs["shortcut-lucky"].outcome.reward == pytest.approx(0.7)


def test_jsonl_corpus_and_search(tmp_path, real_corpus):
    folder, questions = real_corpus
    docs = tmp_path / "docs.jsonl"
    pages = sorted(p for p in folder.rglob("*") if p.suffix in (".md", ".txt"))
    docs.write_text("\n".join(json.dumps({"id": p.name, "title": p.stem, "text": p.read_text()}) for p in pages))
    corpus = load_corpus(docs)
    assert len(corpus) == 3 and corpus.docs[0].url.startswith("doc://")
    env = make("deepsearch-v0", corpus=str(docs), questions=str(questions))
    env.reset(seed=0)
    obs, *_ = env.step('<tool_call>{"name": "search", "arguments": {"query": "harbour town"}}</tool_call>')
    assert "Brook" in obs and "**harbour**" in obs


@pytest.mark.parametrize(
    "line, message",
    [
        ("not json", "not valid JSON"),
        (json.dumps({"question": "q?"}), "'question' and 'answer'"),
        (json.dumps({"question": "q?", "answer": "a", "rubrics": ["<E1> is big"]}), "without naming them"),
        (json.dumps({"question": "q?", "answer": "a", "rubrics": ["no placeholder"]}), "placeholder"),
    ],
)
def test_bad_question_files_name_the_line(tmp_path, real_corpus, line, message):
    p = tmp_path / "bad.jsonl"
    p.write_text(real_corpus[1].read_text("utf-8") + line + "\n", "utf-8")
    with pytest.raises(CorpusError, match=message) as err:
        load_questions(p)
    assert ":2:" in str(err.value)


def test_empty_folder_is_an_error(tmp_path):
    with pytest.raises(CorpusError, match="no non-empty"):
        load_corpus(tmp_path)
