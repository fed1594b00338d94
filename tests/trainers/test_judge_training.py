"""Training with an LLM-judged criterion against a real vLLM server (issue #24 item 2; slow): verdicts are recorded
and logged per step, errors stay errors, and the persistent verdict cache is reused by a resumed run."""

import json

import pytest
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.trainers.trainer import Trainer

pytestmark = pytest.mark.slow


def _records(run_dir):
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if '"train"' in x]


def test_training_scores_an_llm_criterion_with_the_configured_judge(tiny_config, tmp_path, vllm_server, toy_rubric):
    rubric = {**toy_rubric, "criteria": [*toy_rubric["criteria"], {"id": "clear", "text": "Explains each step."}]}
    cache = str(tmp_path / "verdicts.sqlite")  # shared by both runs, as one run's cache is across its resume
    judge = {"base_url": vllm_server.base_url, "model": vllm_server.model, "cache": cache, "max_tokens": 96}
    over = {"env": {"rubric": rubric}, "judge": judge}
    full = tiny_config(tmp_path / "full", steps=2, **over)
    Trainer(full).run()
    rows = _records(full.run_dir)
    assert all(r["judge/verdicts"] >= 1 for r in rows)  # the LLM criterion was judged every step
    assert all(r["judge/errors"] <= r["judge/verdicts"] for r in rows)
    part = tiny_config(tmp_path / "part", steps=1, **over)
    Trainer(part).run()
    Trainer(part.with_overrides(steps=2)).run(resume=True)
    resumed, last = _records(part.run_dir)[-1], rows[-1]
    assert resumed["step"] == 2 and resumed["judge/verdicts"] == last["judge/verdicts"]  # the same rollouts
    # every verdict the uninterrupted run got is served from the cache; only its failures (never cached) are retried
    assert resumed["judge/cache_hits"] == last["judge/verdicts"] - last["judge/errors"]
    if last["judge/errors"] == 0 == resumed["judge/errors"]:  # a retried failure may now parse (vLLM batches vary)
        assert resumed["reward_mean"] == last["reward_mean"]

    # `rubricgym score` on the full run's kept rollouts asks the run's own judge (same settings: same cache keys)
    # and gives every rollout that trained the total it trained on
    scored = CliRunner().invoke(app, ["score", str(full.run_dir)])
    assert scored.exit_code == 0, scored.output
    assert "judging with the run's own judge" in scored.output
    again = json.loads((full.run_dir / "scores_summary.json").read_text())["training_totals"]
    rollouts = full.tasks_per_step * full.group_size * len(rows)
    assert again["trained"] == rollouts - sum(r["masked"] for r in rows) > 0
    assert again["identical"] == again["trained"], again


@pytest.fixture
def toy_rubric() -> dict:
    import rubricgym

    return rubricgym.spec("toy-calculator-v0").load().default_rubric().model_dump(exclude_none=True)
