"""Training with keys and values kept across turns: the turns reuse them, and a resumed run still replays exactly."""

import json

import pytest

from rubricgym.trainers.trainer import Trainer


@pytest.mark.slow
def test_a_run_with_kv_reuse_reuses_turns_and_resumes_exactly(tiny_config, tmp_path):
    over = {"generation": {"kv_reuse_tokens": 20_000}, "env": {"kwargs": {"min_ops": 1, "max_ops": 1, "max_steps": 3}}}
    full = Trainer(tiny_config(tmp_path / "full", steps=2, **over))
    full.run()
    assert full.policy._shared.kv.hits > 0  # later turns started from earlier ones
    Trainer(tiny_config(tmp_path / "part", steps=1, **over)).run()
    Trainer(tiny_config(tmp_path / "part", steps=2, **over)).run(resume=True)

    def train_records(run):
        rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if '"train"' in x]
        return [{k: r.get(k) for k in ("step", "reward_mean", "loss", "grad_norm", "tokens", "turns")} for r in rows]

    assert train_records(tmp_path / "full") == train_records(tmp_path / "part")
