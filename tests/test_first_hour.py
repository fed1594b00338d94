"""The first hour of a new user (issue #42): `gymnasium.make` without `import rubricgym`, tables that never cut ids
at 80 columns, a run summary that leads with the solve rate, a scripted agent against a server that withholds
answers, and a quickstart config that says how long it takes."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.core.fmt import fit_table, fits, unsolved_outscore

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"
TIME_LINE = re.compile(r"^# Expected time on 2 cores: .*\d+(\.\d+)? min", re.MULTILINE)


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, **env},
    )


# ---- gymnasium.make ---------------------------------------------------------------------------------------------


def test_gymnasium_make_with_the_module_prefix_needs_no_import_of_rubricgym():
    """Gymnasium 1.x loads no plugins by entry point; its ``module:`` prefix imports rubricgym, which registers
    every env as ``rubricgym/<Name>-v0`` (the documented way)."""
    done = _python(
        "import sys, gymnasium\n"
        "assert 'rubricgym' not in sys.modules\n"
        "env = gymnasium.make('rubricgym:rubricgym/ToyCalculator-v0')\n"
        "obs, info = env.reset(seed=0)\n"
        "print(type(env.unwrapped).__module__, 'calculator' in obs)\n"
        "print(gymnasium.make('rubricgym/Deepsearch-v0').unwrapped.env_id)\n"  # imported now: plain ids work too
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["rubricgym.envs.toy.calculator", "True", "deepsearch-v0"]


# ---- tables at 80 columns ---------------------------------------------------------------------------------------


def test_envs_never_cuts_an_env_id_or_gymnasium_id_at_80_columns():
    listed = _python(
        "import json\nfrom rubricgym.core.registry import list_envs\n"
        "print(json.dumps([[s.id, s.gym_id] for s in list_envs()]))"
    )
    assert listed.returncode == 0, listed.stderr
    import json

    ids = json.loads(listed.stdout)
    out = subprocess.run(
        [sys.executable, "-m", "rubricgym", "envs"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 80
    words = {w for ln in lines for w in ln.split()}
    missing = [i for pair in ids for i in pair if i not in words]
    assert not missing, f"cut or wrapped at 80 columns: {missing[:5]}"
    assert "…" not in out.stdout


def _score_like_table(crit: str) -> Table:
    table = Table(title="rubric scores")
    for c in ["criterion", "level", "scope", "judged by", "n", "mean", "met", "n/a", "errors", "cached"]:
        table.add_column(c)
    table.add_row(crit, "essential", "trajectory", "check:citations_grounded", "24", "0.417", "0.417", "0", "0", "0")
    return table


@pytest.mark.parametrize("width", [80, 200])
def test_a_ten_column_table_like_scores_keeps_every_value_whole(width: int):
    """At 80 columns the rows become cards (the id on its line, then each column as `header value`), at 200 they
    stay a table; either way the id and every value are whole and nothing ends in an ellipsis."""
    crit = "cites_a_retrieved_source_for_every_claim"
    console = Console(width=width, file=io.StringIO())
    table = _score_like_table(crit)
    console.print(fit_table(console, table, ["criterion"]))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert max(len(ln) for ln in text.splitlines()) <= width
    assert crit in text.split() and "…" not in text and "check:citations_grounded" in text.split()
    assert fits(console, table) == (width == 200)
    if width == 80:
        assert "mean 0.417" in " ".join(text.split()) and "cached 0" in text


# ---- summaries lead with the outcome ----------------------------------------------------------------------------


def test_show_leads_with_the_solve_rate_and_warns_when_unsolved_episodes_earn_more_rubric(tmp_path: Path):
    import asyncio

    import rubricgym
    from rubricgym.core.registry import env_agents
    from rubricgym.core.store import TrajectoryStore
    from rubricgym.envs.toy.agents import CalculatorOracle

    tasks = rubricgym.TaskSet.generate("toy-calculator-v0", 4, seed=0)
    agents = env_agents("toy-calculator-v0")
    solved = asyncio.run(
        rubricgym.rollout_many("toy-calculator-v0", CalculatorOracle(), list(tasks)[:2], progress=False)
    )
    failed = asyncio.run(
        rubricgym.rollout_many("toy-calculator-v0", agents["random"](seed=0), list(tasks)[2:], progress=False)
    )
    trajs = solved.trajectories + [t for t in failed.trajectories if not t.outcome.succeeded]
    for t in trajs:  # a rubric that pays activity: the unsolved episodes score higher
        t.rewards["rubric"] = 0.2 if t.outcome.succeeded else 0.9
    TrajectoryStore(tmp_path).extend(trajs)
    result = CliRunner().invoke(app, ["show", str(tmp_path), "--examples", "0"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1].startswith(f"solved 2/{len(trajs)} episodes: ") and "[95% CI" in lines[1]
    assert lines[2].startswith("warning: unsolved episodes earn a higher rubric reward (0.900")
    assert result.output.index("solved") < result.output.index("rubric ")


def test_unsolved_outscore_is_silent_when_solving_pays_more():
    assert unsolved_outscore([True, False], [0.9, 0.2]) is None
    assert unsolved_outscore([True, True], [0.1, 0.2]) is None  # nothing unsolved to compare
    assert "higher rubric reward (0.500" in (unsolved_outscore([True, False], [0.4, 0.5]) or "")


# ---- a scripted agent against a server that withholds answers ---------------------------------------------------


@pytest.mark.parametrize("trusted", [False, True])
def test_a_scripted_oracle_against_a_server_says_how_to_start_it_trusted(tmp_path: Path, trusted: bool):
    from rubricgym.server import ServerConfig, ServerThread

    with ServerThread(ServerConfig(env_id="toy-calculator-v0", port=0, trusted=trusted)) as server:
        args = ["run", server.url, "--agent", "oracle", "--tasks", "2", "--out", str(tmp_path / "run")]
        result = CliRunner().invoke(app, args)
    text = " ".join(result.output.split())
    if trusted:
        assert result.exit_code == 0, result.output
        assert "wrote 2 trajectories" in text
        return
    assert result.exit_code == 1
    assert "KeyError: 'steps'" not in text.split("First error: ")[1].split(" (")[0]  # not the bare error
    assert "HiddenDataMissing: the scripted agent 'oracle' reads each task's hidden data" in text
    assert "rubricgym serve toy-calculator-v0 --trusted" in text and "such as teacher, random" in text


def test_the_teacher_plays_against_a_server_that_withholds_answers(tmp_path: Path):
    from rubricgym.server import ServerConfig, ServerThread

    with ServerThread(ServerConfig(env_id="toy-calculator-v0", port=0)) as server:
        result = CliRunner().invoke(
            app, ["run", server.url, "--agent", "teacher", "--tasks", "2", "--out", str(tmp_path / "r")]
        )
    assert result.exit_code == 0, result.output


# ---- configs ----------------------------------------------------------------------------------------------------


def test_quickstart_validates_and_says_how_long_it_takes():
    from rubricgym.trainers.config import load_config

    path = CONFIGS / "quickstart.yaml"
    cfg = load_config(path)
    assert cfg.model.name == "smollm2-135m-instruct" and cfg.env.id == "toy-calculator-v0"
    assert cfg.time_budget_s is not None and cfg.time_budget_s <= 300  # the steps stop inside 5 minutes
    minutes = TIME_LINE.search(path.read_text())
    assert minutes is not None, "quickstart.yaml must say '# Expected time on 2 cores: ... N min' in its header"


def test_every_config_but_the_demos_states_its_measured_time_on_2_cores():
    shipped = [p for p in sorted(CONFIGS.glob("*.yaml")) if not p.name.startswith("demo-")]
    assert shipped
    header = {p.name: "\n".join(ln for ln in p.read_text().splitlines() if ln.startswith("#")) for p in shipped}
    missing = [name for name, text in header.items() if not TIME_LINE.search(text)]
    assert not missing, f"no '# Expected time on 2 cores: ... N min' line in the header of {missing}"
