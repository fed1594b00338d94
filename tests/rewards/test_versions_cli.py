"""`rubricgym rubric-versions RUN_DIR`: the versions an evolving-rubric run recorded, re-scored from its rollouts."""

import asyncio
import json

import typer
from typer.testing import CliRunner

from rubricgym.core.rubric import Rubric
from rubricgym.rewards.cli import register
from rubricgym.rewards.evolve import BufferConfig, RubricBuffer, check_writer
from rubricgym.rewards.judges import env_checks
from rubricgym.rewards.prm import ProcessRewardModel, ScoredTrajectory

runner = CliRunner()


async def evolved_run(run_dir, oracle_trajs, guess_trajs, toy_rubric) -> RubricBuffer:
    base = Rubric.from_dict({**toy_rubric, "criteria": [c for c in toy_rubric["criteria"] if c["id"] == "correct"]})
    buf = RubricBuffer(
        base,
        ["compute", "answer"],
        BufferConfig(caps=[2, 2]),
        check_writer(env_checks("toy-calculator-v0")),
        record=run_dir / "rubric_versions.jsonl",
    )
    wrong = next(t for t in guess_trajs if not t.steps[-1].info.get("correct"))
    for step, group in enumerate([[oracle_trajs[0], wrong.model_copy(deep=True)], [oracle_trajs[1], wrong]], 1):
        scored = await ProcessRewardModel(buf.current).score_many(group)
        await buf.update(step, [[ScoredTrajectory(t, b) for t, b in zip(group, scored, strict=True)]])
    return buf


def app() -> typer.Typer:
    a = typer.Typer()
    register(a)
    return a


def test_lists_versions_and_rescores_identically(tmp_path, oracle_trajs, guess_trajs, toy_rubric):
    buf = asyncio.run(evolved_run(tmp_path, oracle_trajs, guess_trajs, toy_rubric))
    assert len(buf.versions) == 3
    r = runner.invoke(app(), ["rubric-versions", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert [row["hash"] for row in rows] == [v.hash for v in buf.versions]
    assert [(row["rollouts"], row["identical"]) for row in rows] == [(2, 2), (2, 2), (0, 0)]
    assert rows[1]["added"] and rows[1]["criteria"] == 2

    # any version re-scores every stored rollout; the base rubric gives back exactly what step 1 recorded
    r = runner.invoke(app(), ["rubric-versions", str(tmp_path), "--hash", buf.versions[0].hash[:8], "--json"])
    assert r.exit_code == 0, r.output
    first = json.loads(r.output)["rows"][0]
    assert first["scored_with"] == buf.versions[0].hash and first["rescored"] == first["recorded"]


def test_missing_run_and_unknown_hash_fail_clearly(tmp_path, oracle_trajs, guess_trajs, toy_rubric):
    r = runner.invoke(app(), ["rubric-versions", str(tmp_path / "nope")])
    assert r.exit_code == 1 and "rubric_versions.jsonl" in r.output
    asyncio.run(evolved_run(tmp_path, oracle_trajs, guess_trajs, toy_rubric))
    r = runner.invoke(app(), ["rubric-versions", str(tmp_path), "--hash", "zzzz"])
    assert r.exit_code == 2 and "matches 0 recorded versions" in r.output
