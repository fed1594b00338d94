"""Deep search tests build their indexes under a temporary cache, never in the user's ~/.cache."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def _deepsearch_cache(tmp_path_factory: pytest.TempPathFactory):
    old = os.environ.get("RUBRICGYM_CACHE")
    os.environ["RUBRICGYM_CACHE"] = str(tmp_path_factory.mktemp("rubricgym-cache"))
    yield
    if old is None:
        os.environ.pop("RUBRICGYM_CACHE", None)
    else:
        os.environ["RUBRICGYM_CACHE"] = old


@pytest.fixture(scope="session")
def ds_env():
    """The default deep search env (a 500-page world); its world and index are shared through the memo."""
    from rubricgym.core.registry import make

    return make("deepsearch-v0")


@pytest.fixture(scope="session")
def ds_tasks(ds_env):
    """Two tasks of each difficulty from the default world."""
    from rubricgym.envs.deepsearch import DeepSearchEnv

    out = []
    for d in ("easy", "medium", "hard"):
        out += DeepSearchEnv(difficulty=d).task_set(2, seed=7)
    return out


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
    {
        "id": "q-ada",
        "question": "Which poet was born in a harbour town that lies on the Dunmere road?",
        "answer": "Ada Vell",
        "aliases": ["A. Vell"],
        "rubrics": [
            {"statement": "<E0> was born in <E1>", "entities": {"E1": "Brook"}},
            {"statement": "<E1> lies on the Dunmere road", "entities": {"E1": "Brook"}},
            "<E0> is a poet",
        ],
    },
]


@pytest.fixture()
def real_corpus(tmp_path: Path) -> tuple[Path, Path]:
    """A folder of .md/.txt/.html pages (and one ignored binary) and a questions JSONL."""
    folder = tmp_path / "corpus"
    for rel, text in PAGES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    (folder / "notes.bin").write_bytes(b"\x00\x01")  # ignored: not a text suffix
    questions = tmp_path / "questions.jsonl"
    questions.write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n", encoding="utf-8")
    return folder, questions
