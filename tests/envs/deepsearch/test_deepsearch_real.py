"""A real corpus: a folder of .md/.txt/.html files (or a JSONL of documents) plus a questions JSONL, end to end."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rubricgym.core.registry import make
from rubricgym.core.rollout import rollout
from rubricgym.envs.deepsearch import DeepSearchEnv
from rubricgym.envs.deepsearch.agents import AGENTS
from rubricgym.envs.deepsearch.corpus import CorpusError, load_corpus
from rubricgym.envs.deepsearch.real import load_questions

PAGES = {
    "people/ada_vell.md": "# Ada Vell\n\nAda Vell is a poet. Ada Vell was born in the harbour town of Brook in 1901.\n"
                          "Her first book appeared in 1925.",
    "places/brook.txt": "Brook\n\nBrook is a small harbour town. Brook lies on the old Dunmere road, north of the "
                        "salt marshes.",
    "places/dunmere.html": "<html><head><title>Dunmere</title><style>p{}</style></head><body><h1>Dunmere</h1>"
                           "<p>Dunmere is a market town founded in 1702.</p><script>var x=1;</script></body></html>",
    "misc/weather.md": "# Weather\n\nRain falls on Brook and Dunmere alike; poets rarely mention it.",
}
QUESTIONS = [
    {"id": "q-ada", "question": "Which poet was born in a harbour town that lies on the Dunmere road?",
     "answer": "Ada Vell", "aliases": ["A. Vell"],
     "rubrics": [{"statement": "<E0> was born in <E1>", "entities": {"E1": "Brook"}},
                 {"statement": "<E1> lies on the Dunmere road", "entities": {"E1": "Brook"}},
                 "<E0> is a poet"]},
]


@pytest.fixture()
def real_corpus(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "corpus"
    for rel, text in PAGES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    (folder / "notes.bin").write_bytes(b"\x00\x01")  # ignored: not a text suffix
    questions = tmp_path / "questions.jsonl"
    questions.write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n", encoding="utf-8")
    return folder, questions


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
    assert task.id == "q-ada" and task.params["difficulty"] == "real"
    trajs = {a: asyncio.run(rollout(make("deepsearch-v0", corpus=str(folder), questions=str(questions)),
                                    AGENTS[a](seed=0), task, seed=0)) for a in ("oracle", "shortcut-lucky")}
    checks = DeepSearchEnv.checks()
    oracle = checks["carr_rubric"](trajs["oracle"])
    assert checks["outcome_correct"](trajs["oracle"]).met
    assert oracle.score == 1.0, oracle.details["statements"]
    assert trajs["oracle"].outcome.reward == 1.0
    assert trajs["shortcut-lucky"].outcome.reward == pytest.approx(0.7)


def test_jsonl_corpus_and_search(tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("\n".join(json.dumps({"id": k, "title": k, "text": v}) for k, v in PAGES.items()), "utf-8")
    corpus = load_corpus(docs)
    assert corpus.docs[0].url.startswith("doc://")
    env = make("deepsearch-v0", corpus=str(docs), questions=str(_questions(tmp_path)))
    env.reset(seed=0)
    obs, *_ = env.step('<tool_call>{"name": "search", "arguments": {"query": "harbour town"}}</tool_call>')
    assert "Brook" in obs and "**harbour**" in obs


def _questions(tmp_path: Path) -> Path:
    p = tmp_path / "q.jsonl"
    p.write_text(json.dumps(QUESTIONS[0]) + "\n", "utf-8")
    return p


@pytest.mark.parametrize("line, message", [
    ("not json", "not valid JSON"),
    (json.dumps({"question": "q?"}), "'question' and 'answer'"),
    (json.dumps({"question": "q?", "answer": "a", "rubrics": ["<E1> is big"]}), "without naming them"),
    (json.dumps({"question": "q?", "answer": "a", "rubrics": ["no placeholder"]}), "placeholder"),
])
def test_bad_question_files_name_the_line(tmp_path, line, message):
    p = tmp_path / "q.jsonl"
    p.write_text(json.dumps(QUESTIONS[0]) + "\n" + line + "\n", "utf-8")
    with pytest.raises(CorpusError, match=message) as err:
        load_questions(p)
    assert ":2:" in str(err.value)


def test_empty_folder_is_an_error(tmp_path):
    with pytest.raises(CorpusError, match="no non-empty"):
        load_corpus(tmp_path)
