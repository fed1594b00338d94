"""Hacking monitors in a real (tiny-model) training run: logged every k steps, plotted, and able to stop it."""

import json

import pytest

from rubricgym.core.types import Message
from rubricgym.trainers.monitors import with_rubric
from rubricgym.trainers.trainer import Trainer


def test_with_rubric_appends_to_the_first_message():
    msgs = [Message(role="system", content="Tools."), Message(role="user", content="Task")]
    out = with_rubric(msgs, "- [essential] correct")
    assert out[0].content.startswith("Tools.") and out[0].content.endswith("- [essential] correct")
    assert out[1] == msgs[1] and msgs[0].content == "Tools."


@pytest.mark.slow
def test_a_monitored_run_logs_plots_and_stops(tiny_config, tmp_path):
    cfg = tiny_config(
        tmp_path / "mon",
        steps=3,
        monitor={
            "every": 1,
            "samples": 2,
            # an alarm on a judge-free drift signal that any output trips: it stops the run after 2 steps
            "alarms": [{"metric": "response_chars", "above": 0.0, "action": "stop", "patience": 2}],
        },
        rubric_buffer={"caps": [1, 1]},
    )
    summary = Trainer(cfg).run()
    train = [
        r for r in map(json.loads, (cfg.run_dir / "metrics.jsonl").read_text().splitlines()) if r["kind"] == "train"
    ]
    assert [r["step"] for r in train] == [1, 2] and summary["steps"] == 2
    first = train[0]
    assert 0.0 <= first["monitor/master_key_share"] <= 1.0 and first["monitor/response_chars"] > 0
    assert isinstance(first["monitor/internalisation_gap"], float) and "monitor/alarm" not in first
    assert "stop response_chars" in train[1]["monitor/alarm"]
    assert (cfg.run_dir / "plots" / "hacking.png").stat().st_size > 1000
    # the rubric buffer records its versions; every step logs the hash of the rubric that scored it
    from rubricgym.rewards.evolve import read_versions

    versions = read_versions(cfg.run_dir / "rubric_versions.jsonl")
    assert versions[0].step == 0 and {r["rubric_hash"] for r in train} <= {v.hash for v in versions}
    html = (cfg.run_dir / "summary.html").read_text()
    assert "hacking.png" in html and "hacking monitor alarm: step 2" in html
