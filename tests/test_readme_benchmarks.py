"""The README's "Bring public benchmarks" commands, run as written through the CLI on samples made here."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.core.store import TrajectoryStore

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
