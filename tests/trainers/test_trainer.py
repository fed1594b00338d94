"""The training loop end to end on a tiny random model: artefacts, exact resume, gradient accumulation."""

import json

import pytest
import torch

from rubricgym.trainers.trainer import Trainer


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["grpo", "stage", "tournament", "step"])
def test_a_run_writes_metrics_plots_summary_and_checkpoints(tiny_config, tmp_path, estimator):
    cfg = tiny_config(tmp_path / estimator, advantage={"estimator": estimator})
    summary = Trainer(cfg).run()
    records = [json.loads(x) for x in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2]
    assert [r["tag"] for r in records if r["kind"] == "eval"] == ["base", "trained"]
    assert all(r["tokens"] > 0 and r["samples"] > 0 for r in train)
    assert {"stage/compute", "stage/answer", "kl", "entropy", "response_tokens"} <= set(train[0])
    if estimator == "tournament":
        assert all(r["comparisons"] == 2 * (2 * 2 - 2) for r in train)  # 2 groups x (2N-2)
    for name in ("reward", "stages", "length"):
        assert (cfg.run_dir / "plots" / f"{name}.png").stat().st_size > 1000
    assert not (cfg.run_dir / "plots" / "kl.png").exists()  # KL is off (null) in the tiny config: no flat panel
    assert "base" in (cfg.run_dir / "summary.html").read_text()
    assert summary["steps"] == 2 and len(summary["trained"]["rewards"]) == 2
    assert (cfg.run_dir / "checkpoints" / "step-000002" / "optimizer.pt").exists()


@pytest.mark.slow
def test_resume_reproduces_the_uninterrupted_run(tiny_config, tmp_path):
    full = tiny_config(tmp_path / "full", steps=3)
    Trainer(full).run()
    part = tiny_config(tmp_path / "part", steps=1)
    Trainer(part).run()
    resumed = Trainer(part.with_overrides(steps=3))
    resumed.run(resume=True)

    def train_records(run):
        return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if '"train"' in x]

    keys = ("step", "cursor", "reward_mean", "loss", "grad_norm", "entropy", "response_tokens", "tokens")
    a = [{k: r.get(k) for k in keys} for r in train_records(full.run_dir)]
    b = [{k: r.get(k) for k in keys} for r in train_records(part.run_dir)]
    assert a == b
    from safetensors.torch import load_file

    fa = load_file(str(full.run_dir / "checkpoints" / "step-000003" / "model.safetensors"))
    fb = load_file(str(part.run_dir / "checkpoints" / "step-000003" / "model.safetensors"))
    assert all(torch.equal(fa[k], fb[k]) for k in fa)
