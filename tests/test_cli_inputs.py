"""The command line under hostile or careless input: clear errors naming what is wrong, never a traceback, never a
run directory that lies (issue 10, items 9-13)."""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time

import pytest
from typer.testing import CliRunner

from rubricgym.cli import app

runner = CliRunner()


def flat(result) -> str:
    return " ".join(result.output.split())


def run(*args: str):
    return runner.invoke(app, list(args))


def test_resume_refuses_a_run_dir_of_another_agent_or_group_size(tmp_path):
    out = str(tmp_path / "r")
    assert run("run", "toy-calculator-v0", "--agent", "oracle", "--tasks", "3", "--out", out).exit_code == 0
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    for flags, named in ((["--agent", "random"], "--agent"), (["--group-size", "2"], "--group-size")):
        r = run("run", "toy-calculator-v0", *flags, "--tasks", "3", "--out", out)
        assert r.exit_code == 2 and named in flat(r) and "different run" in flat(r), r.output
    assert json.loads((tmp_path / "r" / "run.json").read_text()) == meta, "run.json was rewritten"
    again = run("run", "toy-calculator-v0", "--agent", "oracle", "--tasks", "5", "--out", out)
    assert again.exit_code == 0 and "3 tasks already there" in flat(again)


def _hold_lock(run_dir: str, ready, release) -> None:
    from rubricgym.core.rundir import RunDirLock

    with RunDirLock(run_dir):
        ready.set()
        release.wait(30)


def test_a_second_run_into_a_held_run_dir_stops_and_names_the_holder(tmp_path):
    out = str(tmp_path / "r")
    ctx = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(out, ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        r = run("run", "toy-calculator-v0", "--tasks", "3", "--out", out)
        assert r.exit_code == 2 and "in use by another run" in flat(r) and f"pid {holder.pid}" in flat(r), r.output
        assert not (tmp_path / "r" / "trajectories.jsonl").exists()
    finally:
        release.set()
        holder.join(30)
    assert run("run", "toy-calculator-v0", "--tasks", "3", "--out", out).exit_code == 0  # released at exit


@pytest.mark.parametrize(
    "flag, value",
    [("--tasks", "-3"), ("--concurrency", "0"), ("--group-size", "0"), ("--max-steps", "-1"), ("--max-steps", "0")],
)
def test_impossible_numbers_are_refused(tmp_path, flag, value):
    r = run("run", "toy-calculator-v0", flag, value, "--out", str(tmp_path / "r"))
    assert r.exit_code == 2 and flag in flat(r) and "Traceback" not in r.output
    assert not (tmp_path / "r").exists()


def test_binary_empty_and_incomplete_task_files(tmp_path):
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(os.urandom(64) + b"\xff\xfe")
    r = run("run", "toy-calculator-v0", "--task-file", str(binary), "--out", str(tmp_path / "a"))
    assert r.exit_code == 2 and "bin.jsonl:1" in flat(r) and "binary" in flat(r)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    r = run("run", "toy-calculator-v0", "--task-file", str(empty), "--out", str(tmp_path / "b"))
    assert r.exit_code == 2 and "no tasks" in flat(r)
    hidden = tmp_path / "hidden.jsonl"
    hidden.write_text(json.dumps({"id": "t1", "env_id": "toy-calculator-v0", "prompt": "1+1?", "hidden": {}}) + "\n")
    r = run("run", "toy-calculator-v0", "--task-file", str(hidden), "--out", str(tmp_path / "c"))
    assert r.exit_code == 1 and "hidden.answer" in flat(r) and "KeyError" not in flat(r)


def test_agent_choices_have_no_dangling_comma(tmp_path):
    from rubricgym.core.registry import register, unregister
    from rubricgym.envs.toy.calculator import CalculatorEnv

    class Bare(CalculatorEnv):
        env_id = "bare-calc-v0"
        scripted_agents = {}

    register("bare-calc-v0", Bare)
    try:
        r = run("run", "bare-calc-v0", "--agent", "wizard", "--out", str(tmp_path / "r"))
        assert r.exit_code == 2 and "choose from: openai, local" in flat(r) and "local, " not in flat(r)
        assert not flat(r).rstrip().endswith(",")
    finally:
        unregister("bare-calc-v0")


def test_check_flags_one_id_for_two_tasks_and_generation_keeps_repeats_once():
    from rubricgym.core.registry import register, unregister
    from rubricgym.core.tasks import TaskFileError, TaskSet
    from rubricgym.env_checker import check_env_id
    from rubricgym.envs.toy.calculator import CalculatorEnv

    class SameId(CalculatorEnv):
        env_id = "same-id-v0"

        def sample_task(self, rng, split="train"):
            return super().sample_task(rng, split).model_copy(update={"id": "always-the-same"})

    register("same-id-v0", SameId)
    try:
        rows = {name: (ok, detail) for name, ok, detail in check_env_id("same-id-v0", fuzz=20).rows}
        ok, detail = rows["distinct task ids"]
        assert not ok and "always-the-same" in detail
        with pytest.raises(TaskFileError, match="two different tasks share the id"):
            TaskSet.generate("same-id-v0", 5)
    finally:
        unregister("same-id-v0")
    assert 1 <= len(TaskSet.generate("swe-v0", 10, split="all")) <= 10  # a fixed pool drawn again: each task kept once


def test_a_plugin_whose_registration_raises_does_not_take_the_cli_down(monkeypatch):
    import importlib.metadata as md

    from rubricgym.core import registry

    class EP:
        name, value, group = "broken", "broken_plugin:register", registry.ENTRY_POINT_GROUP

        def load(self):
            def register():
                raise RuntimeError("plugin bug")

            return register

    real = md.entry_points
    monkeypatch.setattr(
        registry.importlib.metadata,
        "entry_points",
        lambda group=None: [EP()] if group == registry.ENTRY_POINT_GROUP else real(group=group),
    )
    monkeypatch.setattr(registry._REGISTRY, "discovered", False)
    with pytest.warns(UserWarning, match="broken.*failed to register.*plugin bug"):
        r = run("envs", "--json")
    assert r.exit_code == 0 and "toy-calculator-v0" in r.output


def test_local_agent_without_torch_says_which_extra_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # as if torch were not installed
    r = run("run", "toy-calculator-v0", "--agent", "local", "--tasks", "1", "--out", str(tmp_path / "r"))
    assert r.exit_code == 2 and "rubricgym[train]" in flat(r)


def test_lock_is_released_when_the_holder_dies(tmp_path):
    from rubricgym.core.rundir import RunDirLock

    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    p = ctx.Process(target=lambda: (RunDirLock(tmp_path).acquire(), ready.set(), time.sleep(60)))
    p.start()
    assert ready.wait(30)
    p.kill()
    p.join()
    with RunDirLock(tmp_path):
        pass
