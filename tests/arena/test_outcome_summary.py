"""`rubricgym eval` and `rubricgym arena` show the solve rate first, beside the rubric reward or rating, and the
arena warns where a clearly higher-rated agent solves fewer tasks."""

import json

from typer.testing import CliRunner

from rubricgym.arena import cli as arena_cli
from rubricgym.arena.evaluate import EntryReport, SuiteReport
from rubricgym.arena.report import eval_html, rank_warnings
from rubricgym.cli import app

runner = CliRunner()
ORACLE = {"name": "oracle", "kind": "scripted", "agent": "oracle"}
RANDOM = {"name": "random", "kind": "scripted", "agent": "random"}


def agent(name: str, rating: float, ci: tuple[float, float], solved: float | None) -> dict:
    return {"name": name, "rating": rating, "ci": list(ci), "solved": solved}


def test_a_higher_rated_agent_that_solves_fewer_tasks_is_warned_about():
    board = [
        agent("verbose", 1200, (1150, 1250), 0.125),
        agent("solver", 1000, (950, 1050), 0.208),
        agent("noisy", 980, (900, 1060), 0.5),
    ]
    warnings = rank_warnings(board, "toy-calculator-v0")
    assert warnings == [
        "warning: verbose is rated above solver (1200 vs 1000) but solves fewer tasks (12.5% vs 20.8%): the judge "
        "may pay for activity; see rubricgym check toy-calculator-v0",
        "warning: verbose is rated above noisy (1200 vs 980) but solves fewer tasks (12.5% vs 50.0%): the judge "
        "may pay for activity; see rubricgym check toy-calculator-v0",
    ]  # solver vs noisy: their rating CIs overlap, the order between them is chance
    assert rank_warnings([agent("a", 1200, (1150, 1250), 0.5), agent("b", 1000, (950, 1050), 0.2)], "x") == []


def test_the_eval_report_leads_with_the_solve_rate():
    entry = EntryReport(
        entry="toy", env="toy-calculator-v0", weight=1.0, tasks=4, scored=4, reward=0.616, reward_ci=(0.5, 0.7),
        success=0.125, success_ci=(0.0, 0.25), steps=2.0, judge_errors=0,
    )  # fmt: skip
    report = SuiteReport(
        suite="s", version="1", agent="a", entries=[entry], reward=0.616, reward_ci=(0.5, 0.7), success=0.125,
        success_ci=(0.0, 0.25), judge_errors=0,
    )  # fmt: skip
    page = eval_html(report)
    assert page.index("<th>solved</th>") < page.index("<th>rubric reward</th>")
    assert page.index("<td>12.5%</td>") < page.index("<td>0.616</td>")


def test_the_arena_leaderboard_and_eval_table_show_the_solve_rate(tmp_path, small_suite_file, agents_file, monkeypatch):
    monkeypatch.setattr(arena_cli.console, "width", 200)  # one line per table row
    out = tmp_path / "arena"
    args = ["--suite", str(small_suite_file), "--agents", str(agents_file(RANDOM, ORACLE)), "--out", str(out)]
    result = runner.invoke(app, ["arena", *args, "--resamples", "50"])
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if "Bradley-Terry" in line)
    assert header.index("solved") < header.index("Bradley-Terry")
    rep = json.loads((out / "arena.json").read_text())
    by_name = {a["name"]: a for a in rep["agents"]}
    assert by_name["oracle"]["solved"] > by_name["random"]["solved"]
    assert by_name["oracle"]["solved_ci"][0] <= by_name["oracle"]["solved"] <= by_name["oracle"]["solved_ci"][1]
    assert rep["outcome_warnings"] == []  # the oracle is rated first and solves the most
    assert "<th>solved</th>" in (out / "arena.html").read_text()

    ev = runner.invoke(app, ["eval", "--suite", str(small_suite_file), "--agent", "oracle", "--out", str(tmp_path)])
    assert ev.exit_code == 0, ev.output
    header = next(line for line in ev.output.splitlines() if "rubric reward" in line)
    assert header.index("solved") < header.index("rubric reward")
