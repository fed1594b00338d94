"""The family demos' three rows (issue #38 item 4): base, warm start and warm start + GRPO evaluated on the same
held-out tasks with paired gains, the warm start cached and reused on a rerun, ``demo --model`` starting from a
checkpoint, deep search's two held-out worlds apart, and the arena ranking the three policies by name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from rubricgym.demo import (
    ARENA_NAMES,
    ROWS,
    THREE_ROWS,
    ThreeRows,
    curve_lines,
    gain_text,
    run_demo,
    start_model,
    three_row_lines,
)
from rubricgym.trainers.config import ConfigError
from rubricgym.trainers.evaluation import EvalResult

TINY = {
    "steps": 1,
    "tasks_per_step": 1,
    "group_size": 2,
    "save_every": 0,
    "live": False,
    "plots": False,
    "env.train_tasks": 2,
    "env.eval_tasks": 2,
    "generation.max_new_tokens": 8,
    "warm_start.allow_cut_turns": True,  # a tiny cap for speed: the mechanics, not a policy that can answer
    "warm_start.tasks": 2,
    "warm_start.steps": 2,
    "warm_start.batch_size": 2,
    "warm_start.train_layers": 1,
    "warm_start.eval_every": 0,
    "warm_start.save_every": 0,
}
CLINICAL = {"env.kwargs": {"specialty": "cardiology", "max_steps": 2}}


def result(tag: str, ids: list[str], rewards: list[float], solved: list[float]) -> EvalResult:
    return EvalResult.of(tag, 0, ids, rewards, solved)


def test_table_gives_each_row_and_the_paired_gains_worked_by_hand():
    ids = ["a", "b", "c", "d"]
    rows = ThreeRows(["test"])
    rows.add(ROWS[0], "greedy", "test", result("b", ids, [0.0, 0.1, 0.0, 0.1], [0, 0, 0, 0]), [])
    rows.add(ROWS[1], "greedy", "test", result("w", ids, [0.5, 0.5, 0.1, 0.3], [1, 1, 0, 0]), [])
    rows.add(ROWS[2], "greedy", "test", result("g", ids, [0.7, 0.5, 0.5, 0.3], [1, 1, 1, 0]), [])
    lines = three_row_lines(rows, sampled=1, steps=3)
    assert lines[0].startswith("test: 4 held-out tasks")
    table = "\n".join(lines)
    assert "warm start + GRPO  greedy   75.0%" in table and "0.500 [" in table  # (0.7+0.5+0.5+0.3)/4
    # warm start over base: rubric (0.5+0.4+0.1+0.2)/4 = +0.300, solve +50%; GRPO over warm start: +0.150, +25%
    assert "warm start over base, greedy: solve +50.0% [" in table and "rubric +0.300 [" in table
    assert "GRPO over warm start (3 GRPO steps), greedy: solve +25.0% [" in table and "rubric +0.150 [" in table


def test_a_paired_gain_on_other_tasks_is_refused():
    """Two rows evaluated on different tasks (or another order) cannot be paired: the gain would compare apples
    with pears."""
    before = result("b", ["a", "b"], [0.0, 0.5], [0, 1])
    with pytest.raises(ValueError, match="same held-out tasks"):
        gain_text(result("g", ["b", "a"], [0.5, 0.0], [1, 0]), before)
    with pytest.raises(ValueError, match="same held-out tasks"):
        gain_text(result("g", ["a", "c"], [0.5, 0.0], [1, 0]), before)


def test_grpo_curves_report_reward_spread_groups_with_variance_solve_rate_and_entropy():
    """What the demo prints when GRPO's gain does not clear zero: per step whether groups had a signal at all."""
    records = [
        {"kind": "eval", "step": 0, "eval_mean": 0.3},
        {"kind": "train", "step": 1, "reward_mean": 0.25, "reward_std": 0.1, "zero_variance": 0.5, "success_mean": 0.5},
        {
            "kind": "train",
            "step": 2,
            "reward_mean": 0.4,
            "reward_std": 0.0,
            "zero_variance": 1.0,
            "success_mean": 1.0,
            "entropy": 0.8123,
        },
    ]
    lines = curve_lines(records)
    assert len(lines) == 3  # a header and one line per training step (the eval record is not a step)
    assert "step   1: reward 0.250 +- 0.100  groups with variance 50%  solved 50%" in lines[1]
    assert "groups with variance 0%" in lines[2] and "entropy 0.812" in lines[2]
    assert "no step ran" in curve_lines(records[:1])[0]


def test_start_model_accepts_names_model_dirs_and_run_dirs(tmp_path):
    model = tmp_path / "sft" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    step = tmp_path / "run" / "checkpoints" / "step-000004"
    step.mkdir(parents=True)
    (step / "config.json").write_text("{}")
    assert start_model("smollm2-135m-instruct") == "smollm2-135m-instruct"
    assert start_model(str(model)) == str(model)
    assert start_model(str(tmp_path / "sft")) == str(model)  # `rubricgym sft --out DIR`
    assert start_model(str(tmp_path / "run")) == str(step)  # a train run: its newest checkpoint
    with pytest.raises(ConfigError, match="holds no model"):
        start_model(str(tmp_path))
    with pytest.raises(ConfigError, match="no such directory and no known model"):
        start_model(str(tmp_path / "nope"))


@pytest.mark.slow
def test_a_bad_model_fails_before_torch_loads(tmp_path):
    code = (
        "import sys; from typer.testing import CliRunner; from rubricgym.cli import app; "
        "r = CliRunner().invoke(app, ['demo', '--env', 'clinical-v0', '--model', sys.argv[1]]); "
        "print(r.exit_code); print(r.output); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "missing")], capture_output=True, text=True)
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "2", out.stdout + out.stderr
    assert "no such directory and no known model" in " ".join(" ".join(lines[1:-1]).split())
    assert lines[-1] == "False"


def _run(model: Path | str, run_dir: Path, env: str = "clinical-v0", arena: bool = True, **extra) -> str:
    console = Console(record=True, width=240)
    overrides = {**TINY, **(CLINICAL if env == "clinical-v0" else {}), **extra}
    rc = run_demo(30, run_dir=run_dir, console=console, env=env, model=str(model), overrides=overrides, arena=arena)
    assert rc == 0
    return console.export_text()


def _mtimes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_three_rows_share_task_ids_warm_start_is_reused_and_the_arena_names_the_policies(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    text = _run(tiny_model_dir, run)
    saved = json.loads((run / THREE_ROWS).read_text())
    ids = {
        (row, mode, split): r["task_ids"]
        for row, modes in saved["rows"].items()
        for mode, by in modes.items()
        for split, r in by.items()
    }
    splits = ("test", "test-unseen")  # clinical reports the conditions training never draws apart
    modes = {"test": ("greedy", "sampled"), "test-unseen": ("greedy",)}  # the extra split greedy only (time)
    assert set(ids) == {(row, mode, split) for row in ROWS for split in splits for mode in modes[split]}
    for split in splits:  # every row and mode on the same tasks of each split, and the splits apart
        assert len({tuple(v) for k, v in ids.items() if k[2] == split}) == 1 and len(ids[ROWS[0], "greedy", split]) == 2
    assert not set(ids[ROWS[0], "greedy", "test"]) & set(ids[ROWS[0], "greedy", "test-unseen"])
    # the arena ranked the three policies by name, and the leaderboard says so
    assert sorted(saved["arena"]["order"]) == sorted(ARENA_NAMES.values())
    board = text[text.index("arena (round_robin") :]
    assert all(f". {name}" in board for name in ARENA_NAMES.values())
    agents = (run / "arena" / "agents.yaml").read_text()
    assert str(tiny_model_dir) in agents and str(run / "warm_start" / "model") in agents
    # the arena judged the table's greedy episodes: each policy's are the ones the evaluation scored
    played = [
        json.loads(x)
        for x in (run / "arena" / "trajectories" / "warm-start" / "test" / "trajectories.jsonl")
        .read_text()
        .splitlines()
    ]
    assert sorted(t["task"]["id"] for t in played) == sorted(ids[ROWS[1], "greedy", "test"])

    ws = run / "warm_start"
    before = _mtimes(ws / "checkpoints") | _mtimes(ws / "teacher")
    text = _run(tiny_model_dir, run)
    assert f"warm start: reused the finished one in {ws}" in text
    assert _mtimes(ws / "checkpoints") | _mtimes(ws / "teacher") == before  # nothing cloned or played again
    warm = json.loads((run / THREE_ROWS).read_text())["rows"][ROWS[1]]["greedy"]["test"]
    assert warm["rewards"] == saved["rows"][ROWS[1]]["greedy"]["test"]["rewards"]  # the same weights evaluated


@pytest.mark.slow
def test_demo_model_starts_from_a_checkpoint_directory(tiny_model_dir, tmp_path):
    """``demo --model DIR`` trains from DIR: the run's config, its base row and the arena's base agent are DIR's
    model; a first demo's run directory is a checkpoint too (its GRPO policy, ``RUN/model``)."""
    first = tmp_path / "first"
    _run(tiny_model_dir, first, arena=False)
    assert start_model(str(first)) == str(first / "model")  # the first demo's GRPO policy
    second = tmp_path / "second"
    text = _run(first, second)
    config = (second / "config.yaml").read_text()
    assert f"name: {first / 'model'}" in config
    assert f"with {first / 'model'}" in text
    assert str(first / "model") in (second / "arena" / "agents.yaml").read_text()


def test_deep_search_reports_the_fresh_world_and_the_training_world_apart(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    text = _run(
        tiny_model_dir,
        run,
        env="deepsearch-v0",
        **{
            "env.kwargs": {"hops": 1, "n_docs": 100, "distractors": 0, "max_steps": 2, "window_chars": 600},
            "warm_start.keep": "all",  # two turns are too few for the teacher to answer: clone what it did
        },
    )
    saved = json.loads((run / THREE_ROWS).read_text())["rows"]
    assert set(saved[ROWS[2]]["greedy"]) == {"test", "test-train-world"}
    fresh, seen = saved[ROWS[0]]["greedy"]["test"]["task_ids"], saved[ROWS[0]]["greedy"]["test-train-world"]["task_ids"]
    assert not set(fresh) & set(seen)
    assert "test: 2 held-out tasks" in text and "test-train-world: 2 unseen questions about the training world" in text
    assert sorted(json.loads((run / "arena" / "arena.json").read_text())["per_entry"]) == ["test", "test-train-world"]
