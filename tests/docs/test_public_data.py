"""The "Bring public data" tutorial's commands, run as written through the CLI on samples made here: your own
corpus and package (issue 9), clinical OSCE collections, MiniWoB++ and web-task specs; and ``score``'s rubric
choice as the README states it."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.core.store import TrajectoryStore
from rubricgym.envs.gui import miniwob
from tests.docs.pages import DOCS, README, section

PAGE = DOCS / "tutorials" / "public-data.md"
TESTS = Path(__file__).parents[1]
CLINICAL_SAMPLES = TESTS / "envs" / "clinical" / "data"
WEB_FIXTURE = TESTS / "envs" / "gui" / "web_fixture"
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


def commands(heading: str, which: int = 0) -> list[list[str]]:
    """The command lines (``rubricgym`` dropped) of the ``which``-th ```bash block under ``heading``."""
    found = re.findall(r"```bash\n(.*?)```", section(PAGE, heading), re.S)
    assert len(found) > which, f"{PAGE.name} {heading!r}: no bash block {which}"
    lines = [shlex.split(line, comments=True) for line in found[which].splitlines()]
    return [argv[1:] for argv in lines if argv and argv[0] == "rubricgym"]


def run(argv: list[str]) -> str:
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, f"rubricgym {shlex.join(argv)}\n{result.output}"
    return result.output


def test_bring_your_own_corpus_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path / "cache"))
    for rel, text in PAGES.items():
        (tmp_path / "my_docs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "my_docs" / rel).write_text(text)
    (tmp_path / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    (tmp_path / "my_corpus.yaml").write_text("corpus: my_docs\nquestions: questions.jsonl\n")
    cmds = commands("## Bring your own corpus")
    assert [c[0] for c in cmds] == ["check", "run", "run", "score", "score"]
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
    assert "each task's own rubric, else the env's default" in README.read_text()
    out = tmp_path / "ds"
    run(["run", "deepsearch-v0", "--agent", "oracle", "--tasks", "2", "--out", str(out)])
    run(["score", str(out)])
    summary = json.loads((out / "scores_summary.json").read_text())
    tasks = {t.task.id for t in TrajectoryStore(out).load()}
    assert {r["id"] for r in summary["rubrics"]} == {f"deepsearch/{t}" for t in tasks}


def test_clinical_osce_import_commands_run_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(CLINICAL_SAMPLES / "osce_messy.jsonl", "osce_cases.jsonl")
    import_cmd, run_cmd = commands("## Clinical case collections (OSCE, MedQA, MIMIC-IV and NEJM layouts)")
    result = runner.invoke(app, import_cmd)
    assert result.exit_code == 1 and "3 of 5 record(s) imported" in result.output  # two records reported
    assert Path("cases.jsonl").is_file() and Path("import_report.json").is_file()
    run(run_cmd)
    trajs = TrajectoryStore(Path("runs/osce-oracle")).load()
    assert len(trajs) == 3 and all(t.outcome.reward == 1.0 for t in trajs)


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
    cmds = commands("## Bring your own package")
    assert cmds[0][:2] == ["swe", "build"] and "==" in cmds[0][2]
    cmds[0][2] = f"{NAME}=={VERSION}"  # the page's real package, swapped for the local one
    for argv in cmds:
        run(argv)
    trajs = TrajectoryStore(tmp_path / "runs" / "swe-mine").load()
    assert len(trajs) == 3
    assert all(t.outcome.reward == 1.0 for t in trajs), [(t.task.id, t.outcome) for t in trajs]


@pytest.mark.slow
def test_miniwob_and_web_spec_commands_run_as_written(tmp_path, monkeypatch):
    if miniwob.html_root() is None:
        pytest.skip(f"the miniwob package is not installed ({miniwob.INSTALL})")
    monkeypatch.chdir(tmp_path)
    shutil.copytree(WEB_FIXTURE, "my_site")
    lines = commands("## MiniWoB++ and your own web tasks")
    assert [c[0] for c in lines] == ["run", "show", "run", "score", "show"]
    for line in lines:
        run(line)
    link = TrajectoryStore(Path("runs/miniwob-link")).load()
    assert len(link) == 2 and all(t.outcome.reward == 1.0 and t.task.env_id == "miniwob-click-link-v0" for t in link)
    mine = TrajectoryStore(Path("runs/my-site")).load()
    assert len(mine) == 2 and {t.task.env_id for t in mine} == {f"web:{(tmp_path / 'my_site' / 'spec.yaml').resolve()}"}
