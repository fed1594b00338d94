import json

import pytest

from rubricgym.core.tasks import TaskFileError, TaskSet
from rubricgym.core.types import Task


def test_generated_sets_are_deterministic_and_split_aware():
    a = TaskSet.generate("toy-calculator-v0", 5, seed=1)
    b = TaskSet.generate("toy-calculator-v0", 5, seed=1)
    c = TaskSet.generate("toy-calculator-v0", 5, seed=1, split="test")
    assert [t.id for t in a] == [t.id for t in b]
    assert not {t.id for t in a} & {t.id for t in c}
    assert TaskSet.generate("toy-calculator-v0", 3, seed=1).tasks == a.tasks[:3]  # prefix-stable


def test_jsonl_parquet_round_trip_and_splits(tmp_path):
    ts = TaskSet(
        [
            *TaskSet.generate("toy-calculator-v0", 3, seed=0),
            *TaskSet.generate("toy-calculator-v0", 2, seed=0, split="test"),
        ]
    )
    ts.to_jsonl(tmp_path / "t.jsonl")
    ts.to_parquet(tmp_path / "t.parquet")
    for name in ("t.jsonl", "t.parquet"):
        loaded = TaskSet.from_file(tmp_path / name)
        assert loaded.tasks == ts.tasks
        assert loaded.splits() == {"train": 3, "test": 2}
        assert [t.id for t in loaded.split("test")] == [t.id for t in ts.tasks[3:]]
    with pytest.raises(KeyError, match="splits present"):
        ts.split("validation")


def test_hf_dataset_on_disk(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = [{"id": f"q{i}", "prompt": f"question {i}", "params": json.dumps({"n": i})} for i in range(4)]
    dd = datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(rows[:3]), "test": datasets.Dataset.from_list(rows[3:])}
    )
    dd.save_to_disk(str(tmp_path / "ds"))
    ts = TaskSet.from_file(tmp_path / "ds", env_id="toy-calculator-v0")
    assert ts.splits() == {"train": 3, "test": 1}
    assert ts[0].params == {"n": 0} and ts[0].env_id == "toy-calculator-v0"


def test_bad_files_name_file_line_and_field(tmp_path):
    p = tmp_path / "bad.jsonl"
    good = Task(id="a", env_id="toy-calculator-v0", prompt="p").model_dump_json()
    p.write_text(good + "\n" + '{"id": "b", "env_id": "toy-calculator-v0"}\n')
    with pytest.raises(TaskFileError, match=r"bad.jsonl:2: field 'prompt': Field required"):
        TaskSet.from_file(p)
    p.write_text(good + "\n{not json\n")
    with pytest.raises(TaskFileError, match=r"bad.jsonl:2: not valid JSON"):
        TaskSet.from_file(p)
    p.write_text(good + "\n" + good + "\n")
    with pytest.raises(TaskFileError, match="duplicate task id 'a'"):
        TaskSet.from_file(p)
    with pytest.raises(TaskFileError, match="no such file"):
        TaskSet.from_file(tmp_path / "missing.jsonl")
