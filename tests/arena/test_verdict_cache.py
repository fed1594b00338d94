"""The arena's verdict cache is checked, not believed (issue 23, item 7): bad lines are skipped and reported,
edited or stale verdicts are judged again, and a symlinked cache is refused rather than followed."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from rubricgym.cli import app

runner = CliRunner()
TOY = {"name": "toy", "version": "1", "entries": [{"env": "toy-calculator-v0", "name": "toy", "tasks": 6}]}
AGENTS = {
    "agents": [
        {"name": "oracle", "kind": "scripted", "agent": "oracle"},
        {"name": "random", "kind": "scripted", "agent": "random"},
    ]
}


def _files(tmp_path):
    suite, agents = tmp_path / "suite.yaml", tmp_path / "agents.yaml"
    suite.write_text(yaml.safe_dump(TOY))
    agents.write_text(yaml.safe_dump(AGENTS))
    return suite, agents


def _arena(tmp_path, out, code: int = 0):
    suite, agents = _files(tmp_path)
    args = ["arena", "--suite", str(suite), "--agents", str(agents), "--out", str(out), "--resamples", "20"]
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output + repr(result.exception)
    return json.loads((out / "arena.json").read_text()) if code == 0 else result


def _ratings(rep) -> dict[str, float]:
    return {a["name"]: a["rating"] for a in rep["agents"]}


def test_lines_of_the_wrong_shape_or_not_utf8_are_skipped_and_reported(tmp_path):
    out = tmp_path / "arena"
    first = _arena(tmp_path, out)
    verdicts = out / "verdicts.jsonl"
    with open(verdicts, "ab") as f:
        f.write(b"[1, 2]\n")  # JSON, not a record: crashed the arena with a TypeError
        f.write(b'{"key": "x"}\n')
        f.write(b'{"key": "\xff\xfe"}\n')  # not UTF-8: blocked every resume
        f.write(b"[" * 100_000 + b"\n")  # nested past the recursion limit
    again = _arena(tmp_path, out)
    assert again["judge_calls"] == 0 and again["cached_verdicts"] == first["judge_calls"]
    skipped = again["verdict_cache_skipped"]
    assert len(skipped) == 4 and all(s.startswith("line ") for s in skipped), skipped
    assert "not UTF-8" in skipped[2] and "nested too deeply" in skipped[3]
    assert _ratings(again) == _ratings(first)


def test_an_edited_verdict_is_judged_again_not_believed(tmp_path):
    out = tmp_path / "arena"
    first = _arena(tmp_path, out)
    verdicts = out / "verdicts.jsonl"
    lines = verdicts.read_text().splitlines()
    rec = json.loads(lines[0])
    flip = {"a": "b", "b": "a", "tie": "tie"}
    rec["result"]["winner"] = flip[rec["result"]["winner"]]
    rec["result"]["score_a"], rec["result"]["score_b"] = rec["result"]["score_b"], rec["result"]["score_a"]
    verdicts.write_text("\n".join([json.dumps(rec), *lines[1:]]) + "\n")
    again = _arena(tmp_path, out)
    assert again["judge_calls"] == 1, "the flipped verdict was used as cached"
    assert _ratings(again) == _ratings(first)


def test_a_stale_verdict_of_changed_trajectories_is_judged_again(tmp_path):
    out = tmp_path / "arena"
    _arena(tmp_path, out)
    store = next((out / "trajectories" / "random").rglob("trajectories.jsonl"))
    lines = store.read_text().splitlines()
    traj = json.loads(lines[0])
    traj["outcome"]["answer"] = "a different answer under the same id"
    store.write_text("\n".join([json.dumps(traj), *lines[1:]]) + "\n")
    again = _arena(tmp_path, out)
    assert again["judge_calls"] == 1  # the game of the changed trajectory, and only it


def test_a_symlinked_verdict_cache_is_refused_not_followed(tmp_path):
    out = tmp_path / "arena"
    out.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("not the arena's\n")
    (out / "verdicts.jsonl").symlink_to(outside)
    result = _arena(tmp_path, out, code=2)
    assert "symbolic link" in " ".join(result.output.split())
    assert outside.read_text() == "not the arena's\n"
