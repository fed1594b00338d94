"""Progress as a user watching a run sees it: plain lines in a log (one per step, heartbeats during silence), a rich
bar with counts in a terminal, and `rubricgym train` writing per-step lines when its output is not a terminal."""

import io
import re
import time
from pathlib import Path

import yaml
from rich.console import Console
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.core.progress import eta_s, fmt_duration, progress

ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")


def test_a_log_gets_one_line_per_step_with_counts_eta_and_status():
    out = io.StringIO()
    with progress(Console(file=out, width=100), "evaluating", total=3, unit="tasks", heartbeat_s=0) as p:
        for i in range(3):
            p.advance(status=f"reward {i}")
    lines = out.getvalue().splitlines()
    assert lines[0] == "evaluating (3 tasks)"
    assert [ln.split(" · ")[0] for ln in lines[1:]] == [f"evaluating: {i}/3 tasks" for i in (1, 2, 3)]
    assert "ETA" in lines[1] and lines[1].endswith("reward 0")
    assert "ETA" not in lines[3]  # finished: nothing left to estimate


def test_a_silent_phase_writes_heartbeats_with_the_expected_eta():
    out = io.StringIO()
    with progress(Console(file=out, width=100), "evaluating the base policy", total=4, expected_s=60, heartbeat_s=0.2):
        time.sleep(0.7)
    text = out.getvalue()
    assert text.startswith("evaluating the base policy (4), ETA ~1:00\n")
    assert "... still evaluating the base policy: 0/4 · 0:00 elapsed, ETA ~0:59" in text or "ETA ~1:00" in text
    assert text.count("... still") >= 2  # life every few seconds, not one line at the end


def test_many_fast_steps_are_thinned_but_the_last_is_always_shown():
    out = io.StringIO()
    with progress(Console(file=out), "playing", total=500, min_interval_s=60, heartbeat_s=0) as p:
        for _ in range(500):
            p.advance()
    lines = out.getvalue().splitlines()
    assert lines[0] == "playing (500)" and len(lines) == 2 and lines[1].startswith("playing: 500/500")


def test_a_terminal_gets_a_rich_bar_with_counts():
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=True)
    with progress(console, "evaluating", total=3, unit="tasks") as p:
        p.advance(2, status="reward 0.5")
        time.sleep(0.3)  # the bar refreshes 10 times a second
        console.print("between")
        p.phase("training", total=4, unit="steps", started=time.monotonic() - 30)
        p.advance()
    text = ANSI.sub("", out.getvalue())
    assert "evaluating" in text and "2/3 tasks" in text and "ETA" in text and "reward 0.5" in text
    assert "1/4 steps 0:30 ETA 1:30" in text  # the next phase's clock: 30 s for 1 step, 3 to go
    assert "evaluating (3 tasks)" not in text  # no plain lines in a terminal


def test_disabled_progress_prints_nothing():
    out = io.StringIO()
    with progress(Console(file=out), "x", total=2, enabled=False) as p:
        p.advance()
        p.line("result")
    assert out.getvalue() == ""


def test_eta_and_duration_formats():
    assert eta_s(2, 10, 20.0) == 80.0
    assert eta_s(0, 10, 5.0, expected_s=30) == 25.0 and eta_s(0, 10, 5.0) is None
    assert fmt_duration(65) == "1:05" and fmt_duration(3723) == "1:02:03" and fmt_duration(None) == "-"


def test_train_into_a_log_shows_every_step_and_the_evaluations(tmp_path: Path, tiny_model_dir: Path):
    cfg = {
        "run_dir": str(tmp_path / "run"),
        "steps": 3,
        "tasks_per_step": 1,
        "group_size": 2,
        "save_every": 0,
        "live": True,
        "plots": False,
        "model": {"name": str(tiny_model_dir)},
        "generation": {"max_new_tokens": 4, "temperature": 1.0},
        "env": {"kwargs": {"min_ops": 1, "max_ops": 1, "max_steps": 1}, "train_tasks": 4, "eval_tasks": 2},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    result = CliRunner().invoke(app, ["train", "--config", str(path)])  # output captured: not a terminal
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "evaluating the base policy on held-out tasks (2 tasks)" in lines
    steps = [ln for ln in lines if ln.startswith("training: ")]
    assert [ln.split(" · ")[0] for ln in steps] == [f"training: {i}/3 steps" for i in (1, 2, 3)]
    assert "ETA" in steps[0] and "reward" in steps[0]
    assert any(ln.startswith("evaluating the trained policy on held-out tasks (2 tasks), ETA ~") for ln in lines)
    assert sum(ln.strip().startswith(("base:", "trained:")) for ln in lines) == 2  # each evaluation once


def _toy_suite(tmp_path: Path) -> Path:
    suite = {
        "name": "tiny-toy",
        "version": "1",
        "entries": [{"env": "toy-calculator-v0", "name": "toy", "kwargs": {"min_ops": 1, "max_ops": 1}, "tasks": 3}],
    }
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(suite))
    return path


def test_eval_into_a_log_announces_its_phase_and_json_output_stays_pure(tmp_path: Path):
    suite = _toy_suite(tmp_path)
    result = CliRunner().invoke(app, ["eval", "--suite", str(suite), "--agent", "oracle", "--out", str(tmp_path / "e")])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == "eval: oracle on suite tiny-toy (1 entries, 3 tasks)"
    as_json = CliRunner().invoke(
        app, ["eval", "--suite", str(suite), "--agent", "oracle", "--out", str(tmp_path / "j"), "--json"]
    )
    assert as_json.exit_code == 0 and as_json.output.lstrip().startswith("{")  # no progress lines in JSON


def test_arena_into_a_log_announces_its_phase(tmp_path: Path):
    agents = tmp_path / "agents.yaml"
    agents.write_text(
        yaml.safe_dump({"agents": [{"name": n, "kind": "scripted", "agent": n} for n in ("oracle", "random")]})
    )
    args = ["arena", "--suite", str(_toy_suite(tmp_path)), "--agents", str(agents), "--out", str(tmp_path / "a")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == "arena: 2 agents on suite tiny-toy, round_robin (1 entries, 3 tasks)"
