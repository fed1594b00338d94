"""``resume=True`` continues the rubric buffer and the hacking monitor exactly where the checkpoint left them."""

import asyncio
import json

import pytest

from rubricgym.core.agent import BaseAgent
from rubricgym.core.registry import make
from rubricgym.core.rollout import rollout
from rubricgym.core.rubric import Rubric
from rubricgym.envs.toy.agents import CalculatorOracle
from rubricgym.rewards.evolve import read_versions
from rubricgym.rewards.prm import ScoredTrajectory
from rubricgym.trainers.engine.checkpoint import latest_checkpoint
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
    entry = saved["entries"][part.env.id]
    assert saved["step"] == 2 and entry["buffer"]["current"] and entry["monitor"]["streak"] == {"0": 2}

    resumed = Trainer(part.with_overrides(steps=3))
    assert resumed.resume()
    # the checkpointed state is what the resumed trainer holds, and the rubric it scores with is the buffer's
    (a,) = first.entries.values()
    (b,) = resumed.entries.values()
    assert b.state_dict() == a.state_dict() == entry
    assert b.rubric.hash == a.rubric.hash == Rubric.model_validate(entry["buffer"]["current"]).hash
    resumed.run(resume=True)

    keys = ("step", "rubric_hash", "monitor/credit_drift", "monitor/alarm", "reward_mean")
    assert [{k: r.get(k) for k in keys} for r in _train(full.run_dir)] == [
        {k: r.get(k) for k in keys} for r in _train(part.run_dir)
    ]
    assert "step 3: warn response_chars" in _train(part.run_dir)[-1]["monitor/alarm"]
    assert (part.run_dir / "rubric_versions.jsonl").read_text() == (full.run_dir / "rubric_versions.jsonl").read_text()


class Mumbler(BaseAgent):
    """Never calls a tool: an episode that ends without an answer."""

    async def act(self, messages, tools):
        return "hmm"


@pytest.mark.slow
def test_an_evolved_rubric_survives_a_checkpoint_and_scores_the_resumed_steps(tiny_config, tmp_path):
    cfg = tiny_config(tmp_path / "evolve", steps=2, rubric_buffer={"caps": [2, 2]})
    first = Trainer(cfg)
    first.run()
    # one contrasting group: the oracle answers, the mumbler does not, so the buffer adds an unused check that
    # separates them (`answer_grounded`, the first by name since the toy rubric v3 grounds answers in its own check)
    task = first.tasks_at(0, 1)[0]
    group = [
        asyncio.run(rollout(make(cfg.env.id, **cfg.env.kwargs), a, task, seed=1))
        for a in (CalculatorOracle(), Mumbler())
    ]
    (entry,) = first.entries.values()
    scored = asyncio.run(entry.path.score_many(group))
    assert entry.buffer is not None
    evolved = asyncio.run(
        entry.buffer.update(2, [[ScoredTrajectory(t, b) for t, b in zip(group, scored, strict=True)]])
    )
    assert evolved is not None and "evolved_answer_grounded" in {c.id for c in evolved.criteria}
    entry.path.set_entry(evolved)
    first.checkpoint()

    resumed = Trainer(cfg.with_overrides(steps=3))
    resumed.run(resume=True)
    (again,) = resumed.entries.values()
    assert again.buffer is not None and again.buffer.versions[-1].hash == evolved.hash
    assert [c.id for c in again.buffer.buffered] == [c.id for c in entry.buffer.buffered]
    assert _train(cfg.run_dir)[-1]["rubric_hash"] == evolved.hash  # step 3 was scored with the evolved rubric
    versions = read_versions(cfg.run_dir / "rubric_versions.jsonl")
    assert [v.hash for v in versions] == [v.hash for v in entry.buffer.versions] and len(versions) == 2
