import asyncio

import pyarrow.parquet as pq
import pytest

import rubricgym
from rubricgym.core.store import TrajectoryStore
from rubricgym.envs.toy.agents import CalculatorOracle


def oracle_trajs(n, seed=0):
    tasks = rubricgym.TaskSet.generate("toy-calculator-v0", n, seed=seed)
    return asyncio.run(
        rubricgym.rollout_many("toy-calculator-v0", CalculatorOracle(), tasks, progress=False)
    ).trajectories


def test_append_load_filter_and_parquet(tmp_path):
    store = TrajectoryStore(tmp_path)
    trajs = oracle_trajs(4)
    for t in trajs:
        store.append(t)
    loaded = store.load()
    assert [t.id for t in loaded] == [t.id for t in trajs] and loaded[0] == trajs[0]
    assert len(store.load(agent="oracle")) == 4 and store.load(agent="other") == []
    assert len(store.load(where=lambda t: len(t.steps) > 100)) == 0
    table = pq.read_table(store.to_parquet())
    assert table.num_rows == 4 and set(table.column("env_reward").to_pylist()) == {1.0}


def test_torn_last_line_is_reported_skipped_and_appends_continue(tmp_path):
    store = TrajectoryStore(tmp_path)
    trajs = oracle_trajs(3)
    store.extend(trajs[:2])
    with open(store.path, "ab") as f:  # a crash in the middle of a write
        f.write(trajs[2].model_dump_json().encode()[:150])
    loaded = store.load()
    assert [t.id for t in loaded] == [t.id for t in trajs[:2]]
    assert store.report.torn_tail and store.report.torn_lines == [3]
    store.append(trajs[2])  # the next write starts on a fresh line: nothing earlier is damaged
    assert [t.id for t in store.load()] == [t.id for t in trajs]
    assert store.report.torn_lines == [3] and not store.report.torn_tail


def test_resume_skips_finished_tasks(tmp_path):
    tasks = rubricgym.TaskSet.generate("toy-calculator-v0", 6, seed=0)
    store = TrajectoryStore(tmp_path)
    first = asyncio.run(
        rubricgym.rollout_many("toy-calculator-v0", CalculatorOracle(), tasks[:4], store=store, progress=False)
    )
    second = asyncio.run(
        rubricgym.rollout_many("toy-calculator-v0", CalculatorOracle(), tasks, store=store, progress=False)
    )
    assert len(first.trajectories) == 4
    assert sorted(second.skipped) == sorted(t.id for t in tasks[:4]) and len(second.trajectories) == 2
    assert store.finished_task_ids() == {t.id for t in tasks}


def test_text_that_is_not_unicode_never_fails_a_store(tmp_path):
    store = TrajectoryStore(tmp_path)
    (traj,) = oracle_trajs(1)
    bad = traj.model_copy(update={"model": "m\ud83d", "metrics": {"note\udcff": 1.0}})
    bad.steps[0].info["path"] = "bad\udcffname.py"
    store.append(bad)
    (loaded,) = store.load()
    assert loaded.model == "m\ufffd" and loaded.steps[0].info["path"] == "bad\ufffdname.py"
    assert loaded.id == traj.id


def test_a_deeply_nested_line_is_skipped_and_reported_by_every_command(tmp_path):
    """Issue 23, item 8: one line nested past the recursion limit made show, export, score and run all fail."""
    from typer.testing import CliRunner

    from rubricgym.cli import app

    run = tmp_path / "run"
    runner = CliRunner()
    args = ["run", "toy-calculator-v0", "--agent", "oracle", "--tasks", "3", "--out", str(run)]
    assert runner.invoke(app, args).exit_code == 0
    store = TrajectoryStore(run)
    with open(store.path, "ab") as f:
        f.write(b"[" * 100_000 + b"]" * 100_000 + b"\n")  # valid JSON, nested 100,000 deep
        f.write(b'{"a": ' * 5000 + b"1" + b"}" * 5000 + b"\n")
    assert len(store.load()) == 3
    assert [n for n, _ in store.report.bad_lines] == [4, 5]
    assert "nested too deeply" in store.report.bad_lines[0][1]
    for cmd in (
        ["show", str(run)],
        ["export", str(run), "--format", "sft", str(tmp_path / "sft.jsonl")],
        ["score", str(run)],
        [*args[:-2], "--tasks", "4", "--out", str(run)],
    ):
        result = runner.invoke(app, cmd)
        assert result.exit_code == 0, (cmd, result.output[-1500:], repr(result.exception))
    assert len(store.load()) == 4


def test_appends_never_follow_a_symlinked_store(tmp_path):
    """Issue 23, item 8: `run` appended through a symlinked trajectories.jsonl to a file outside the run."""
    try:  # the old store had no such error: it wrote through the link
        from rubricgym.core.safeio import UnsafePathError
    except ImportError:
        UnsafePathError = OSError

    outside = tmp_path / "outside.jsonl"
    outside.write_text("")
    run = tmp_path / "run"
    run.mkdir()
    (run / "trajectories.jsonl").symlink_to(outside)
    store = TrajectoryStore(run)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        store.append(oracle_trajs(1)[0])
    assert outside.read_text() == ""


def test_no_file_of_a_run_directory_is_written_through_a_symlink(tmp_path):
    """Issue 23, item 7: run.json, scores.jsonl and the trainer's metrics are never written through a link."""
    from typer.testing import CliRunner

    from rubricgym.cli import app
    from rubricgym.trainers.report import MetricsLog

    outside = tmp_path / "outside.txt"
    outside.write_text("not the run's\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").symlink_to(outside)
    runner = CliRunner()
    args = ["run", "toy-calculator-v0", "--agent", "oracle", "--tasks", "2", "--out", str(run)]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2 and "symbolic link" in " ".join(refused.output.split()), refused.output
    (run / "run.json").unlink()
    assert runner.invoke(app, args).exit_code == 0
    (run / "scores.jsonl").symlink_to(outside)
    assert runner.invoke(app, ["score", str(run)]).exit_code == 0
    assert not (run / "scores.jsonl").is_symlink()
    metrics = run / "metrics.jsonl"
    metrics.symlink_to(outside)
    with pytest.raises(OSError, match="symbolic link"):
        MetricsLog(metrics).write({"step": 1})
    assert outside.read_text() == "not the run's\n"


def _groups(store):
    out: dict[str, int] = {}
    for t in store.load():
        out[t.task.id] = out.get(t.task.id, 0) + 1
    return out


@pytest.mark.parametrize("group_size", [1, 2])
def test_run_resume_rolls_out_a_torn_rollout_again_and_says_so(tmp_path, group_size):
    """Issue 40, item 4: a kill that tore the last trajectory of a group left 17 of 18 kept and the task skipped
    in silence (with one per task, the torn task came back, but nothing said a line was dropped)."""
    from typer.testing import CliRunner

    from rubricgym.cli import app

    run = tmp_path / "run"
    args = ["run", "toy-calculator-v0", "--tasks", "9", "--group-size", str(group_size), "--out", str(run)]
    runner = CliRunner()
    assert runner.invoke(app, args).exit_code == 0
    store = TrajectoryStore(run)
    whole = store.path.read_bytes()
    store.path.write_bytes(whole[:-200])  # the last line cut short, as a kill in the middle of the write leaves it
    result = runner.invoke(app, args)
    said = " ".join(result.output.split())
    assert result.exit_code == 0, said
    assert f"(line {9 * group_size})" in said
    assert "cut short by an interrupted write" in said and "rolled out again" in said
    if group_size == 2:
        assert "1 incomplete group(s)" in said and "(1 of 2)" in said
    assert f"wrote {group_size} trajectories" in said
    assert len(store.load()) == 9 * group_size and set(_groups(store).values()) == {group_size}
    assert not store.report.torn_lines
    aside = (run / "trajectories.jsonl.removed").read_bytes().splitlines()
    assert len(aside) == group_size and aside[-1] == whole.splitlines()[-1][:-199]


def test_a_line_cut_inside_a_character_is_a_torn_line(tmp_path):
    store = TrajectoryStore(tmp_path)
    (traj,) = oracle_trajs(1)
    traj.steps[0].info["note"] = "é" * 200
    store.append(traj)
    line = store.path.read_bytes()
    cut = line.index(("é" * 200).encode()) + 101  # inside the 51st two-byte character of the note
    store.path.write_bytes(line + line[:cut])
    assert len(store.load()) == 1
    assert store.report.torn_lines == [2] and store.report.torn_tail and not store.report.bad_lines
