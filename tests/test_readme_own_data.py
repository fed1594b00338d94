"""The README's "Bring your own corpus" / "Bring your own package" commands, run as written through the CLI on a
corpus and a package made here (issue 9); and `score`'s rubric choice as the README states it (item 6)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.core.store import TrajectoryStore

README = (Path(__file__).parents[1] / "README.md").read_text()
runner = CliRunner()

PAGES = {
    "people/ada_vell.md": "# Ada Vell\n\nAda Vell is a poet. Ada Vell was born in the harbour town of Brook in 1901.",
    "places/brook.txt": "Brook\n\nBrook is a small harbour town on the old Dunmere road, north of the salt marshes.",
    "places/dunmere.html": "<html><head><title>Dunmere</title></head><body><h1>Dunmere</h1>"
    "<p>Dunmere is a market town founded in 1702 by the weaver Ivo Marl.</p></body></html>",
    "misc/weather.md": "# Weather\n\nRain falls on Brook and Dunmere alike; poets rarely mention it.",
}
QUESTIONS = [
    {
        "question": "Which poet was born in a harbour town on the Dunmere road?",
        "answer": "Ada Vell",
        "gold_docs": ["people/ada_vell.md"],
    },
    {"question": "Which weaver founded the market town of Dunmere?", "answer": "Ivo Marl"},
    {"question": "Which harbour town lies north of the salt marshes?", "answer": "Brook"},
]


def commands(heading: str) -> list[list[str]]:
    """The command lines of the first ```bash block after ``heading``."""
    section = README.split(heading, 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def run(argv: list[str]) -> str:
    assert argv[0] == "rubricgym"
    result = runner.invoke(app, argv[1:])
    assert result.exit_code == 0, f"{shlex.join(argv)}\n{result.output}"
    return result.output


def test_bring_your_own_corpus_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path / "cache"))
    for rel, text in PAGES.items():
        (tmp_path / "my_docs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "my_docs" / rel).write_text(text)
    (tmp_path / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    (tmp_path / "my_corpus.yaml").write_text("corpus: my_docs\nquestions: questions.jsonl\n")
    cmds = commands("### Bring your own corpus")
    assert [c[1] for c in cmds] == ["check", "run", "run", "score", "score"]
    for argv in cmds:
        run(argv)
    oracle, rand = (TrajectoryStore(tmp_path / "runs" / name).load() for name in ("mine-oracle", "mine-random"))
    assert [t.task.id for t in oracle] != [] and len({t.task.id for t in oracle}) == 3
    assert all(t.outcome.reward == 1.0 for t in oracle)
    assert all(t.outcome.reward < 0.7 for t in rand)
    totals = {
        name: json.loads((tmp_path / "runs" / name / "scores_summary.json").read_text())["total_mean"]
        for name in ("mine-oracle", "mine-random")
    }
    assert totals["mine-oracle"] == 1.0 and totals["mine-random"] < 0.3, totals


def test_score_uses_the_tasks_own_rubric_as_the_readme_says(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path / "cache"))
    assert "each task's own rubric, else the env's default" in README
    out = tmp_path / "ds"
    run(["rubricgym", "run", "deepsearch-v0", "--agent", "oracle", "--tasks", "2", "--out", str(out)])
    run(["rubricgym", "score", str(out)])
    summary = json.loads((out / "scores_summary.json").read_text())
    tasks = {t.task.id for t in TrajectoryStore(out).load()}
    assert {r["id"] for r in summary["rubrics"]} == {f"deepsearch/{t}" for t in tasks}


@pytest.mark.slow
@pytest.mark.sandbox
def test_bring_your_own_package_runs_as_written(tmp_path, monkeypatch):
    from tests.envs.swe.sdist import NAME, VERSION, make_sdist

    monkeypatch.chdir(tmp_path)
    links = tmp_path / "links"
    links.mkdir()
    make_sdist(links)
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # offline: pip finds the package only in the local folder
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path / "cache"))
    cmds = commands("### Bring your own package")
    assert cmds[0][:3] == ["rubricgym", "swe", "build"] and "==" in cmds[0][3]
    cmds[0][3] = f"{NAME}=={VERSION}"  # the README's real package, swapped for the local one
    for argv in cmds:
        run(argv)
    trajs = TrajectoryStore(tmp_path / "runs" / "swe-mine").load()
    assert len(trajs) == 3
    assert all(t.outcome.reward == 1.0 for t in trajs), [(t.task.id, t.outcome) for t in trajs]
