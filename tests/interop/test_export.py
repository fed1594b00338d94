"""`rubricgym export`: Parquet and datasets round trips, SFT chats from the best trajectories, preference pairs."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

import rubricgym
from rubricgym.cli import app
from rubricgym.core.store import TrajectoryStore
from rubricgym.envs.toy.agents import CalculatorOracle, RandomAgent
from rubricgym.interop.export import ExportError, export, read_trajectories

ENV = "toy-calculator-v0"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """Three tasks, each played by the oracle and by a random agent, plus one trajectory the rubric failed on."""
    out = tmp_path_factory.mktemp("run")
    store = TrajectoryStore(out)
    tasks = rubricgym.TaskSet.generate(ENV, 3, seed=0)
    for agent in (CalculatorOracle(), RandomAgent(seed=1)):
        asyncio.run(rubricgym.rollout_many(ENV, agent, tasks, store=store, resume=False, progress=False))
    trajectories = list(store)
    unscorable = trajectories[0]
    with open(out / "scores.jsonl", "w") as f:
        f.write(json.dumps({"trajectory_id": unscorable.id, "total": None}) + "\n")
    return out


def test_parquet_and_datasets_exports_round_trip_every_trajectory(run_dir, tmp_path):
    original = list(TrajectoryStore(run_dir))
    assert export(run_dir, "parquet", tmp_path / "t.parquet") == 6
    assert read_trajectories(tmp_path / "t.parquet") == original
    assert export(run_dir, "hf", tmp_path / "ds") == 6
    assert read_trajectories(tmp_path / "ds") == original
    import datasets

    ds = datasets.load_from_disk(str(tmp_path / "ds"))
    assert set(ds["agent"]) == {"oracle", "random"} and "env_reward" in ds.column_names


def test_sft_keeps_each_tasks_best_trajectory_as_a_chat(run_dir, tmp_path):
    trajectories = {t.id: t for t in TrajectoryStore(run_dir)}
    n = export(run_dir, "sft", tmp_path / "sft.jsonl", min_score=1.0)
    rows = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert n == len(rows) >= 2
    for row in rows:
        best = trajectories[row["trajectory_id"]]
        assert best.agent == "oracle" and row["score"] == 1.0
        assert row["messages"] == [m.to_openai() for m in best.messages]
        assert {t["function"]["name"] for t in row["tools"]} == {"calculator", "answer"}
    unscorable = json.loads((run_dir / "scores.jsonl").read_text())["trajectory_id"]
    assert unscorable not in {r["trajectory_id"] for r in rows}  # a None score is left out, not ranked as 0


def test_preferences_pair_the_best_against_the_worst_of_a_task(run_dir, tmp_path):
    trajectories = {t.id: t for t in TrajectoryStore(run_dir)}
    export(run_dir, "preferences", tmp_path / "prefs.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "prefs.jsonl").read_text().splitlines()]
    assert rows
    for row in rows:
        chosen, rejected = trajectories[row["chosen_id"]], trajectories[row["rejected_id"]]
        assert chosen.task.id == rejected.task.id == row["task_id"]
        assert row["score_chosen"] > row["score_rejected"]
        assert row["prompt"] + row["chosen"] == [m.to_openai() for m in chosen.messages]
        assert row["prompt"] + row["rejected"] == [m.to_openai() for m in rejected.messages]
        assert [m["role"] for m in row["prompt"]] == ["system", "user"] and row["chosen"][0]["role"] == "assistant"


def test_cli_export_and_its_errors(run_dir, tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["export", str(run_dir), str(tmp_path / "x.parquet"), "--format", "parquet"])
    assert result.exit_code == 0 and "wrote 6 parquet rows" in result.output
    bad = runner.invoke(app, ["export", str(tmp_path), str(tmp_path / "y"), "--format", "hf"])
    assert bad.exit_code == 2 and "trajectories.jsonl" in " ".join(bad.output.split())
    wrong = runner.invoke(app, ["export", str(run_dir), str(tmp_path / "z"), "--format", "csv"])
    assert wrong.exit_code == 2 and "parquet" in wrong.output
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "trajectories.jsonl").write_text((run_dir / "trajectories.jsonl").read_text())
    (tmp_path / "broken" / "scores.jsonl").write_text("{oops\n")
    with pytest.raises(ExportError, match="scores.jsonl:1"):
        export(tmp_path / "broken", "sft", tmp_path / "s.jsonl")


def test_an_export_never_overwrites_the_runs_inputs(run_dir, tmp_path):
    """Issue 23, item 9: `export RUN --format sft RUN/trajectories.jsonl` replaced 18 trajectories with 6 rows."""
    runner = CliRunner()
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    link = tmp_path / "link.jsonl"
    link.symlink_to(run_dir / "trajectories.jsonl")
    for target, fmt in [
        (run_dir / "trajectories.jsonl", "sft"),
        (run_dir / "trajectories.jsonl", "parquet"),
        (run_dir / "scores.jsonl", "preferences"),
        (link, "sft"),  # a link to an input is that input
        (run_dir, "hf"),
    ]:
        for force in ([], ["--force"]):
            r = runner.invoke(app, ["export", str(run_dir), str(target), "--format", fmt, *force])
            assert r.exit_code == 2 and "never overwrites its input" in " ".join(r.output.split()), (target, r.output)
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before


def test_an_existing_output_needs_force_and_a_link_is_replaced_not_followed(run_dir, tmp_path):
    runner = CliRunner()
    out = tmp_path / "sft.jsonl"
    out.write_text("keep me\n")
    r = runner.invoke(app, ["export", str(run_dir), str(out), "--format", "sft"])
    assert r.exit_code == 2 and "--force" in r.output and out.read_text() == "keep me\n"
    assert runner.invoke(app, ["export", str(run_dir), str(out), "--format", "sft", "--force"]).exit_code == 0
    assert out.read_text() != "keep me\n"
    victim = tmp_path / "victim.txt"
    victim.write_text("not an export\n")
    link = tmp_path / "out.parquet"
    link.symlink_to(victim)
    assert runner.invoke(app, ["export", str(run_dir), str(link), "--format", "parquet", "--force"]).exit_code == 0
    assert victim.read_text() == "not an export\n" and not link.is_symlink()
    assert len(read_trajectories(link)) == 6


def test_unwritable_outputs_and_bad_score_lines_are_errors_not_tracebacks(run_dir, tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["export", str(run_dir), "/proc/rubricgym-export.jsonl", "--format", "sft"])
    assert r.exit_code == 2 and "cannot write /proc/rubricgym-export.jsonl" in " ".join(r.output.split()), r.output
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "trajectories.jsonl").write_bytes((run_dir / "trajectories.jsonl").read_bytes())
    for line, where in [(b"[1, 2]\n", "scores.jsonl:1"), (b'{"trajectory_id": 3}\n', "scores.jsonl:1")]:
        (broken / "scores.jsonl").write_bytes(line)
        r = runner.invoke(app, ["export", str(broken), str(tmp_path / "s.jsonl"), "--format", "sft"])
        assert r.exit_code == 2 and where in " ".join(r.output.split()), r.output
    (broken / "scores.jsonl").write_bytes(b'{"trajectory_id": "\xff"}\n')
    r = runner.invoke(app, ["export", str(broken), str(tmp_path / "s.jsonl"), "--format", "sft"])
    assert r.exit_code == 2 and "scores.jsonl:1: not UTF-8" in " ".join(r.output.split()), r.output
