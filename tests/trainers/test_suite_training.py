"""Training against a suite on the tiny model: two toy entries, SEC curriculum, per-entry metrics, exact resume."""

import json
import math

import pytest
import yaml

from rubricgym.rewards.evolve import read_versions
from rubricgym.trainers.config import ConfigError, TrainConfig, validate_config
from rubricgym.trainers.trainer import Trainer

ENTRIES = [
    {
        "env": "toy-calculator-v0",
        "name": "expr",
        "tasks": 2,
        "kwargs": {"style": "expression", "min_ops": 1, "max_ops": 1, "max_steps": 2},
    },
    {
        "env": "toy-calculator-v0",
        "name": "word",
        "tasks": 2,
        "weight": 3.0,
        "kwargs": {"style": "word", "min_ops": 1, "max_ops": 1, "max_steps": 2},
    },
]


@pytest.fixture
def suite_config(tiny_config, tmp_path):
    suite = tmp_path / "two-toys.yaml"
    suite.write_text(yaml.safe_dump({"name": "two-toys", "entries": ENTRIES}))

    def make(run_dir, steps=3, method="sec", **over) -> TrainConfig:
        data = tiny_config(run_dir, steps=steps).model_dump(mode="json")
        data["env"] = {"suite": str(suite), "train_tasks": 6, "curriculum": {"method": method, "alpha": 0.5}}
        return TrainConfig.model_validate({**data, **over})

    return make


def records(run_dir):
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_a_suite_trains_with_per_entry_metrics_and_sec_updates(suite_config, tmp_path):
    cfg = suite_config(tmp_path / "run")
    trainer = Trainer(cfg)
    assert trainer.data.suite is not None and list(trainer.entries) == ["expr", "word"]
    summary = trainer.run()
    recs = records(cfg.run_dir)
    train = [r for r in recs if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2, 3]
    q = {"expr": 0.0, "word": 0.0}
    for r in train:
        p = {n: r[f"curriculum/{n}/p"] for n in q}
        z = sum(math.exp(v / 0.2) for v in q.values())
        assert p == pytest.approx({n: math.exp(v / 0.2) / z for n, v in q.items()})  # Boltzmann over last Q
        assert r["env/expr/tasks"] + r["env/word/tasks"] == cfg.tasks_per_step
        for n in q:
            gain = r[f"curriculum/{n}/gain"]
            assert (gain is None) == (r[f"env/{n}/tasks"] == 0)
            if gain is not None:
                q[n] += 0.5 * (gain - q[n])  # TD(0)
            assert r[f"curriculum/{n}/q"] == pytest.approx(q[n])
    per_env = [(r["tag"], r["entry"]) for r in recs if r["kind"] == "eval_env"]
    assert per_env == [("base", "expr"), ("base", "word"), ("trained", "expr"), ("trained", "word")]
    assert set(summary["per_env"]) == {"expr", "word"} and summary["per_env"]["word"]["weight"] == 0.75
    assert len(summary["trained"]["rewards"]) == 4  # the suite's own held-out tasks, 2 per entry
    assert (cfg.run_dir / "plots" / "per_env.png").stat().st_size > 1000
    assert len({r["rubric_hash"] for r in train}) == 1
    assert "expr:" in (cfg.run_dir / "summary.html").read_text()


MONITOR = {"every": 1, "samples": 2, "internalisation_gap": False, "alarms": []}


@pytest.mark.slow
def test_a_suite_runs_a_monitor_and_a_rubric_buffer_per_entry(suite_config, tmp_path):
    stop = {**MONITOR, "alarms": [{"metric": "response_chars", "above": 0.0, "action": "stop"}]}
    cfg = suite_config(tmp_path / "m", steps=3, monitor=stop, rubric_buffer={"caps": [2, 2]})
    trainer = Trainer(cfg)
    assert {n: (e.monitor is not None, e.buffer is not None) for n, e in trainer.entries.items()} == {
        "expr": (True, True),
        "word": (True, True),
    }
    summary = trainer.run()
    train = [r for r in records(cfg.run_dir) if r["kind"] == "train"]
    # each entry's monitor observes its own rollouts and logs under its name; the first alarm stops the run
    assert len(train) == 1
    drawn = [n for n in ("expr", "word") if train[0][f"env/{n}/tasks"]]
    for n in drawn:
        assert train[0][f"monitor/{n}/response_chars"] > 0 and train[0][f"monitor/{n}/masked_share"] == 0.0
    assert f"monitor/{drawn[0]}/alarm" in train[0] and f"  {drawn[0]}:" in summary["lines"]
    # each entry's buffer records the versions of its own rubric
    for n in ("expr", "word"):
        (v0,) = read_versions(cfg.run_dir / "entries" / n / "rubric_versions.jsonl")
        assert v0.hash == trainer.entries[n].rubric.hash
    assert {n: e.rubric.id for n, e in trainer.entries.items()} == {"expr": "toy-calculator", "word": "toy-calculator"}


@pytest.mark.slow
def test_suite_training_resumes_exactly(suite_config, tmp_path):
    over = {"monitor": MONITOR, "rubric_buffer": {"caps": [2, 2], "retire_after": 1}}
    full = suite_config(tmp_path / "full", **over)
    Trainer(full).run()
    part = suite_config(tmp_path / "part", steps=1, **over)
    Trainer(part).run()
    Trainer(part.with_overrides(steps=3)).run(resume=True)
    keys = ("step", "cursor", "reward_mean", "loss", "env/expr/tasks", "curriculum/word/q", "curriculum/expr/p")
    keys += ("rubric_hash", "monitor/expr/credit_drift", "monitor/word/credit_drift")

    def train(run):
        return [{k: r.get(k) for k in keys} for r in records(run) if r["kind"] == "train"]

    assert train(full.run_dir) == train(part.run_dir)


def test_weights_curriculum_and_config_errors(suite_config, tmp_path):
    cfg = suite_config(tmp_path / "w", method="weights")
    trainer = Trainer(cfg)
    assert trainer.data.sampler is not None
    assert trainer.data.sampler.probabilities() == {"expr": 0.25, "word": 0.75}
    one = Trainer(TrainConfig.model_validate({**cfg.model_dump(mode="json"), "env": {"id": "toy-calculator-v0"}}))
    assert one.data.suite is None and one.data.sampler is None  # a single env: a one-entry run, no curriculum
    assert list(one.entries) == ["toy-calculator-v0"] and one.entry_dir("toy-calculator-v0") == one.run_dir
    with pytest.raises(ConfigError, match="env.suite replaces kwargs"):
        validate_config({"env": {"suite": "toy", "kwargs": {"max_ops": 1}}}, "t.yaml")
    with pytest.raises(ConfigError, match="field 'env': .*not a built-in suite"):
        validate_config({"env": {"suite": "nope"}}, "t.yaml")
    # a suite runs on every backend, as a single env does
    assert validate_config({"env": {"suite": "toy"}, "ray": True}, "t.yaml").ray
    assert validate_config({"env": {"suite": "toy"}, "generation": {"backend": "vllm"}}, "t.yaml").env.suite == "toy"
