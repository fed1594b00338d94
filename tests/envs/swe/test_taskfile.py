"""Portable tasks files: paths relative to the file, data beside it, and messages that say what is missing."""

from __future__ import annotations

import shutil

import pytest

from rubricgym.envs.swe.builtin import builtin_instances
from rubricgym.envs.swe.taskfile import load_instances, save_instances


def test_saved_snapshots_are_content_addressed_beside_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path / "cache"))
    insts = builtin_instances()[:2]
    out = save_instances(insts + insts[:1], tmp_path / "a" / "tasks.jsonl")
    text = out.read_text()
    assert str(tmp_path) not in text and len(text.splitlines()) == 3
    assert len(list((tmp_path / "a" / "tasks.data" / "snapshots").iterdir())) == 2  # the repeat is stored once
    shutil.move(tmp_path / "a", tmp_path / "b")
    shutil.rmtree(tmp_path / "cache")
    loaded = load_instances(tmp_path / "b" / "tasks.jsonl")
    assert [i.instance_id for i in loaded] == [i.instance_id for i in insts + insts[:1]]
    assert all(i.snapshot.startswith(str(tmp_path / "b" / "tasks.data")) for i in loaded)
    assert (tmp_path / "b" / "tasks.data" / loaded[0].snapshot.rsplit("tasks.data/", 1)[1] / "tinytext").is_dir()


def test_a_file_moved_without_its_data_says_what_to_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path / "cache"))
    out = save_instances(builtin_instances()[:1], tmp_path / "tasks.jsonl")
    shutil.copy(out, tmp_path / "lonely.jsonl")
    shutil.rmtree(tmp_path / "tasks.data")
    with pytest.raises(
        ValueError,
        match=r"lonely.jsonl:1: the snapshot folder .* does not exist: copy the tasks "
        r"file together with its folder tasks.data/",
    ):
        load_instances(tmp_path / "lonely.jsonl")


def test_files_with_absolute_paths_still_load(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path / "cache"))
    inst = builtin_instances()[0]
    (tmp_path / "old.jsonl").write_text(inst.model_dump_json() + "\n")
    assert load_instances(tmp_path / "old.jsonl")[0].snapshot == inst.snapshot


def test_a_task_names_its_record_in_the_users_file(tmp_path, monkeypatch):
    """``check``'s advice on an imported file names the record to change (``task_origin``: id and FILE:LINE)."""
    from rubricgym.envs.swe import SweEnv

    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path / "cache"))
    insts = builtin_instances()[:2]
    out = save_instances(insts, tmp_path / "tasks.jsonl")
    out.write_text("\n" + out.read_text())  # a blank first line: the records are on lines 2 and 3
    env = SweEnv(instances=out)
    try:
        tasks = {t.id: t for t in env.task_set(2, split="all")}  # one train and one held-out record
        assert env.task_origin(tasks[insts[1].instance_id]) == f"{insts[1].instance_id} at {out}:3"
    finally:
        env.close()
    builtin = SweEnv()
    try:
        assert builtin.task_origin(builtin.task_set(1)[0]) == ""
    finally:
        builtin.close()
