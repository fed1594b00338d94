"""Experiment trackers (``trainers/trackers.py``): they get exactly ``metrics.jsonl``'s records at its steps."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rubricgym.trainers.config import ConfigError, validate_config
from rubricgym.trainers.trackers import scalars
from rubricgym.trainers.trainer import Trainer


def records(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def event_scalars(run_dir: Path) -> dict[str, dict[int, float]]:
    """``{tag: {step: value}}`` of the run's TensorBoard events, as TensorBoard itself reads them back."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}


def expected(run_dir: Path) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    for r in records(run_dir):
        step, values = scalars(r)
        for tag, v in values.items():
            out.setdefault(tag, {})[step] = float(np.float32(v))  # event files hold 32-bit scalars
    return out


def test_scalars_are_a_records_numeric_fields_by_kind():
    rec = {"kind": "eval", "step": 3, "tag": "step 3", "eval_mean": 0.5, "samples": 4, "bad": None, "ok": True}
    assert scalars(rec) == (3, {"eval/eval_mean": 0.5, "eval/samples": 4.0})
    assert scalars({"kind": "train", "step": 1, "loss": float("nan"), "kl": 0.0}) == (1, {"train/kl": 0.0})


@pytest.mark.slow
def test_tensorboard_events_equal_metrics_jsonl(tiny_config, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = tiny_config(tmp_path / "run", eval_every=1, steps=2, report_to=["tensorboard"])
    Trainer(cfg).run()
    got, want = event_scalars(cfg.run_dir), expected(cfg.run_dir)
    assert got == want
    assert {"train/loss", "train/reward_mean", "eval/eval_mean"} <= set(got)
    assert sorted(got["train/loss"]) == [1, 2] and sorted(got["eval/eval_mean"]) == [0, 1, 2]
    acc = EventAccumulator(str(cfg.run_dir / "tensorboard"))
    acc.Reload()
    (text,) = acc.Tensors("config/text_summary")  # the config, once
    assert "group_size: 2" in text.tensor_proto.string_val[0].decode()


@pytest.mark.slow
def test_a_resumed_run_keeps_tensorboard_equal_to_metrics_jsonl(tiny_config, tmp_path):
    part = tiny_config(tmp_path / "run", steps=1, report_to=["tensorboard"])
    Trainer(part).run()
    Trainer(part.with_overrides(steps=3)).run(resume=True)
    got = event_scalars(part.run_dir)
    assert got == expected(part.run_dir)
    assert sorted(got["train/loss"]) == [1, 2, 3]


def test_no_trackers_by_default_and_a_missing_package_fails_at_validation(tiny_config, tmp_path, monkeypatch):
    cfg = tiny_config(tmp_path / "run", steps=0)
    assert cfg.report_to == []
    with pytest.raises(ConfigError, match="report_to.0"):
        validate_config({"report_to": ["mlflow"]})
    with pytest.raises(ConfigError, match="named twice"):
        validate_config({"report_to": ["tensorboard", "tensorboard"]})
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(
        ConfigError, match=r"report_to 'wandb' needs the wandb package: pip install 'rubricgym\[trackers\]'"
    ):
        validate_config({"report_to": ["tensorboard", "wandb"]})


RECORDS = [
    {"kind": "eval", "step": 0, "tag": "base", "eval_mean": 0.25},
    {"kind": "train", "step": 1, "loss": 0.125, "reward_mean": 0.5},
    {"kind": "train", "step": 2, "loss": -0.0625, "reward_mean": 0.75},
]


def run_script(body: str, tmp_path: Path, **env: str) -> dict:
    """Run ``body`` in a fresh interpreter (the trackers read their directories from the environment at import);
    what it prints after ``RESULT`` (JSON) comes back."""
    script = textwrap.dedent(
        f"""
        import json, sys
        from pathlib import Path
        from rubricgym.trainers.trackers import TrackedLog
        run_dir = Path({str(tmp_path / "run")!r})
        records = {RECORDS!r}
        """
    ) + textwrap.dedent(body)
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    (line,) = (x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


@pytest.mark.slow
def test_wandb_offline_gets_the_records(tmp_path):
    pytest.importorskip("wandb")
    body = """
        log = TrackedLog(run_dir / "metrics.jsonl", ["wandb"], {"steps": 2})
        for r in records:
            log.write(r)
        run = log.trackers[0].run
        summary, config = dict(run.summary), dict(run.config)
        log.close()
        (saved,) = (run_dir / "wandb").glob("offline-run-*/run-*.wandb")  # what `wandb sync` uploads
        print("RESULT", json.dumps({"summary": summary, "config": config, "bytes": saved.stat().st_size}))
    """
    env = {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DISABLE_GIT": "true", "HOME": str(tmp_path)}
    got = run_script(body, tmp_path, **env)
    assert got["summary"]["train/loss"] == -0.0625 and got["summary"]["eval/eval_mean"] == 0.25
    assert got["summary"]["step"] == 2
    assert got["config"] == {"steps": 2} and got["bytes"] > 0


@pytest.mark.slow
def test_trackio_stores_the_records_locally(tmp_path):
    pytest.importorskip("trackio")
    body = """
        log = TrackedLog(run_dir / "metrics.jsonl", ["trackio"], {"steps": 2})
        for r in records:
            log.write(r)
        log.close()
        from trackio.sqlite_storage import SQLiteStorage
        logs = SQLiteStorage.get_logs(project="rubricgym", run="run")
        print("RESULT", json.dumps([{k: v for k, v in x.items() if "/" in k or k == "step"} for x in logs]))
    """
    got = run_script(body, tmp_path, TRACKIO_DIR=str(tmp_path / "trackio"), HF_HUB_OFFLINE="1")
    assert [(x["step"], x.get("train/loss"), x.get("eval/eval_mean")) for x in got] == [
        (0, None, 0.25),
        (1, 0.125, None),
        (2, -0.0625, None),
    ]
