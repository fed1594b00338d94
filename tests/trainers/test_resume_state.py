"""``resume=True`` continues the rubric buffer and the hacking monitor exactly where the checkpoint left them."""

import json

import pytest

from rubricgym.core.rubric import Rubric
from rubricgym.trainers.checkpoint import latest_checkpoint
from rubricgym.trainers.trainer import Trainer

MONITOR = {
    "every": 1,
    "samples": 2,
    "internalisation_gap": False,
    # fires on the third step in a row with any output: only a resumed run that kept the streak fires at step 3
    "alarms": [{"metric": "response_chars", "above": 0.0, "action": "warn", "patience": 3}],
}


def _train(run_dir):
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if '"train"' in x]


@pytest.mark.slow
def test_resume_restores_the_rubric_buffer_and_the_monitor(tiny_config, tmp_path):
    over = {"monitor": MONITOR, "rubric_buffer": {"caps": [2, 2], "retire_after": 1}, "group_size": 4}
    full = tiny_config(tmp_path / "full", steps=3, **over)
    Trainer(full).run()
    part = tiny_config(tmp_path / "part", steps=2, **over)
    first = Trainer(part)
    first.run()
    saved = json.loads((latest_checkpoint(part.run_dir) / "state.json").read_text())
    assert saved["step"] == 2 and saved["buffer"]["current"] and saved["monitor"]["streak"] == {"0": 2}

    resumed = Trainer(part.with_overrides(steps=3))
    assert resumed.resume()
    # the checkpointed state is what the resumed trainer holds, and the rubric it scores with is the buffer's
    assert resumed.buffer.state_dict() == first.buffer.state_dict() == saved["buffer"]
    assert resumed.prm.rubric.hash == first.prm.rubric.hash == Rubric.model_validate(saved["buffer"]["current"]).hash
    assert resumed.monitor.state_dict() == first.monitor.state_dict() == saved["monitor"]
    resumed.run(resume=True)

    keys = ("step", "rubric_hash", "monitor/credit_drift", "monitor/alarm", "reward_mean")
    assert [{k: r.get(k) for k in keys} for r in _train(full.run_dir)] == [
        {k: r.get(k) for k in keys} for r in _train(part.run_dir)
    ]
    assert "step 3: warn response_chars" in _train(part.run_dir)[-1]["monitor/alarm"]
    assert (part.run_dir / "rubric_versions.jsonl").read_text() == (full.run_dir / "rubric_versions.jsonl").read_text()
