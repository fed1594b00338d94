"""The README's "Bring public benchmarks" commands, run as written through the CLI on samples made here."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.core.store import TrajectoryStore
from rubricgym.envs.gui import miniwob

README = (Path(__file__).parents[1] / "README.md").read_text()
SAMPLES = Path(__file__).parent / "envs" / "clinical" / "data"


def commands(heading: str) -> list[list[str]]:
    """The command lines of the first ```bash block after ``heading``."""
    block = README.split(heading, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line)[1:] for line in block.splitlines() if line.startswith("rubricgym ")]


def test_clinical_osce_import_commands_run_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(SAMPLES / "osce_messy.jsonl", "osce_cases.jsonl")
    runner = CliRunner()
    import_cmd, run_cmd = commands("### Clinical case collections (OSCE layout)")
    result = runner.invoke(app, import_cmd)
    assert result.exit_code == 1 and "3 of 5 record(s) imported" in result.output  # two records reported
    assert Path("cases.jsonl").is_file() and Path("import_report.json").is_file()
    result = runner.invoke(app, run_cmd)
    assert result.exit_code == 0, result.output
    trajs = TrajectoryStore(Path("runs/osce-oracle")).load()
    assert len(trajs) == 3 and all(t.outcome.reward == 1.0 for t in trajs)


WEB_FIXTURE = Path(__file__).parent / "envs" / "gui" / "web_fixture"


@pytest.mark.slow
def test_miniwob_and_web_spec_commands_run_as_written(tmp_path, monkeypatch):
    if miniwob.html_root() is None:
        pytest.skip(f"the miniwob package is not installed ({miniwob.INSTALL})")
    monkeypatch.chdir(tmp_path)
    shutil.copytree(WEB_FIXTURE, "my_site")
    runner = CliRunner()
    lines = commands("### MiniWoB++ and your own web tasks")
    assert [c[0] for c in lines] == ["run", "show", "run", "score", "show"]
    for line in lines:
        result = runner.invoke(app, line)
        assert result.exit_code == 0, (line, result.output)
    link = TrajectoryStore(Path("runs/miniwob-link")).load()
    assert len(link) == 2 and all(t.outcome.reward == 1.0 and t.task.env_id == "miniwob-click-link-v0" for t in link)
    mine = TrajectoryStore(Path("runs/my-site")).load()
    assert len(mine) == 2 and {t.task.env_id for t in mine} == {f"web:{(tmp_path / 'my_site' / 'spec.yaml').resolve()}"}
