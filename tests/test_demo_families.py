"""``rubricgym demo --env FAMILY`` / ``--suite`` (issue #25 item 4): valid configs equal to the shipped YAML, the env's
default rubric, bad ids refused before any model loads, solve rates counted from the env's outcome reward, and a
tiny end-to-end run of the --env path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.core.registry import make
from rubricgym.demo import SOLVED_AT, comparison_lines, run_demo, solved
from rubricgym.suites.suite import load_suite
from rubricgym.trainers.config import TrainConfig, load_config
from rubricgym.trainers.demo import BUDGET_MINUTES, DEMO_CONFIG, FAMILY_DEMOS, demo_config
from rubricgym.trainers.evaluation import EvalResult

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.mark.parametrize(
    ("yaml_name", "kwargs"),
    [
        ("demo-clinical", {"env": "clinical-v0"}),
        ("demo-deepsearch", {"env": "deepsearch-v0"}),
        ("demo-suite", {"suite": True}),
    ],
)
def test_shipped_yaml_is_the_demo_config(yaml_name, kwargs):
    """`rubricgym train --config configs/demo-X.yaml` trains exactly what `rubricgym demo` does on its default 20
    minutes, warm start included."""
    cfg = demo_config(BUDGET_MINUTES["suite" if kwargs.get("suite") else "family"], **kwargs)
    assert load_config(CONFIGS / f"{yaml_name}.yaml").model_dump() == cfg.model_dump()
    assert cfg.warm_start is not None and cfg.warm_start.agent == "teacher"  # a teacher, never the oracle


@pytest.mark.parametrize("env_id", sorted(FAMILY_DEMOS))
def test_family_demo_uses_the_env_default_rubric_and_real_kwargs(env_id):
    cfg = demo_config(15, env=env_id)
    assert cfg.env.id == env_id and cfg.env.rubric is None  # the env's default rubric, not one tuned for the demo
    make(env_id, **cfg.env.kwargs)  # the level's kwargs build the env
    assert cfg.time_budget_s is not None and 0 < cfg.time_budget_s < 15 * 60


def test_suite_demo_runs_sec_over_toy_deepsearch_and_clinical_with_default_rubrics():
    cfg = demo_config(15, suite=True)
    assert cfg.env.suite is not None and cfg.env.curriculum.method == "sec"
    suite = load_suite(cfg.env.suite)
    assert {e.env for e in suite.entries} == {"toy-calculator-v0", "deepsearch-v0", "clinical-v0"}
    assert all(e.rubric is None for e in suite.entries)


def test_the_suite_demos_training_and_held_out_tasks_route_to_one_entry_each():
    """What the trainer builds for a suite before any model loads, at the demo's ``train_tasks``: with one seed for both
    clinical entries, ``rubricgym demo --suite`` stopped at start (a cardiology case in both entries)."""
    from rubricgym.trainers.data import TrainingData

    cfg = demo_config(15, suite=True)
    data = TrainingData(cfg)  # raises when a task id is in two entries
    suite = load_suite(cfg.env.suite)
    assert all(data.entries[e.name].train and data.entries[e.name].held_out for e in suite.entries)
    assert {data.entry_of[t.id] for t in data.train_tasks} == {e.name for e in suite.entries}


def test_the_toy_demo_config_is_unchanged():
    expected = TrainConfig.model_validate({**DEMO_CONFIG, "time_budget_s": 12 * 60 - 150.0})
    assert demo_config().model_dump() == expected.model_dump()
    assert demo_config(env="toy-calculator-v0").model_dump() == expected.model_dump()


@pytest.mark.slow
def test_bad_env_id_fails_with_the_demos_before_any_model_loads(tmp_path):
    code = (
        "import sys; from typer.testing import CliRunner; from rubricgym.cli import app; "
        "r = CliRunner().invoke(app, ['demo', '--env', 'clinicl-v0', '--out', sys.argv[1]]); "
        "print(r.exit_code); print(r.output); print('torch' in sys.modules, 'transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")], capture_output=True, text=True)
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "2", out.stdout + out.stderr
    text = " ".join(lines[1:-1])
    assert "no demo for env 'clinicl-v0'" in text and "clinical-v0" in text and "deepsearch-v0" in text
    assert lines[-1] == "False False"  # refused before torch (and the model) loaded
    assert not (tmp_path / "run").exists()


def test_env_and_suite_together_are_refused():
    r = CliRunner().invoke(app, ["demo", "--env", "clinical-v0", "--suite"])
    assert r.exit_code == 2 and "drop --env clinical-v0" in r.output


def test_solved_counts_the_outcome_reward_threshold():
    """clinical: a wrong diagnosis with every key exam ordered pays (0.5 * 1) / 1.6 = 0.3125, not solved; a right
    one with no exam pays 1.1 / 1.6 = 0.6875, solved. Deep search pays 0 wrong, >= 0.7 right."""
    before = EvalResult.of("base", 0, ["a", "b", "c", "d"], [0.1, 0.2, 0.3, 0.4], [0.3125, 0.0, 0.0, 0.7])
    after = EvalResult.of("trained", 3, ["a", "b", "c", "d"], [0.5, 0.2, 0.3, 0.6], [0.6875, 0.0, 1.0, 0.7])
    assert solved(before).rewards == [0.0, 0.0, 0.0, 1.0] and SOLVED_AT == 0.5
    lines = comparison_lines("clinical", before, after)
    assert "4 held-out tasks" in lines[0]
    assert "rubric reward" in lines[1] and "gain +0.150" in lines[1]  # (0.4 + 0 + 0 + 0.2) / 4
    assert "solve rate" in lines[2] and "base 0.250" in lines[2] and "trained 0.750" in lines[2]
    assert "gain +0.500" in lines[2]


def test_env_demo_end_to_end_on_a_tiny_model(tiny_model_dir, tmp_path):
    """The --env path warm-starts, trains, evaluates three rows and reports: solve rate and rubric reward with CIs
    and paired gains, in the console and at the top of summary.html (a tiny random model: the mechanics, not the
    learning)."""
    console = Console(record=True, width=200)
    rc = run_demo(
        30,
        run_dir=tmp_path / "run",
        console=console,
        env="clinical-v0",
        arena=False,
        overrides={
            "model.name": str(tiny_model_dir),
            "steps": 1,
            "tasks_per_step": 1,
            "group_size": 2,
            "save_every": 0,
            "live": False,
            "plots": False,
            "env.train_tasks": 2,
            "env.eval_tasks": 2,
            "env.kwargs": {"specialty": "cardiology", "max_steps": 2},
            "generation.max_new_tokens": 8,
            "warm_start.allow_cut_turns": True,  # a tiny cap for speed: the mechanics, not a policy that can answer
            "warm_start.tasks": 2,
            "warm_start.steps": 1,
            "warm_start.batch_size": 2,
            "warm_start.train_layers": 1,
        },
    )
    assert rc == 0
    text = console.export_text()
    for needle in ("test: 2 held-out tasks", "warm start + GRPO", "solve rate", "rubric reward", "paired gain"):
        assert needle in text
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 1 and len(summary["base"]["task_ids"]) == 2
    page = (tmp_path / "run" / "summary.html").read_text()
    assert "GRPO over warm start" in page and page.index("warm start + GRPO") < page.index("GRPO steps")
