"""``--resume`` never unpickles (issue 40 item 2) and survives a crash (item 3): crafted checkpoint files are refused
without running, damaged checkpoints are skipped for the one before them with a note naming the file, lines a kill
cut short are set aside, and a run killed at random points resumes to the end."""

import json
import os
import pickle
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from rubricgym.trainers.engine.checkpoint import (
    CheckpointError,
    TrainState,
    UnsafeCheckpointError,
    complete_checkpoints,
    load_checkpoint,
    resume_checkpoint,
    save_checkpoint,
)

REPO = Path(__file__).parents[2]


class Canary:
    """Unpickling it creates ``path``: proof that a load ran code from the file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


@pytest.fixture
def tiny(tiny_model_dir):
    """The tiny Llama and an AdamW that has taken one step (so its state holds tensors)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss.backward()
    optimizer.step()
    return model, optimizer


def _two_checkpoints(run_dir: Path, model, optimizer) -> list[Path]:
    for step in (1, 2):
        save_checkpoint(run_dir, model, None, optimizer, TrainState(step=step, cursor=2 * step))
    return complete_checkpoints(run_dir)


@pytest.mark.parametrize("part", ["rng.pt", "optimizer.pt"])
@pytest.mark.parametrize("form", ["torch.save", "bare pickle"])
def test_a_crafted_checkpoint_file_is_refused_and_never_runs(tiny, tmp_path, part, form):
    model, optimizer = tiny
    newest, older = _two_checkpoints(tmp_path, model, optimizer)
    canary = tmp_path / "PWNED"
    if form == "torch.save":
        torch.save({"state": Canary(canary)}, newest / part)
    else:
        (newest / part).write_bytes(pickle.dumps({"state": Canary(canary)}))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(newest, model, optimizer)
    assert not canary.exists()  # today's code ran it: torch.load(weights_only=False)
    assert str(newest / part) in str(e.value)
    if form == "torch.save":  # code in a well-formed archive: refused outright, the resume stops there
        assert isinstance(e.value, UnsafeCheckpointError) and "could run code" in str(e.value)
        with pytest.raises(UnsafeCheckpointError):
            resume_checkpoint(tmp_path, model, optimizer)
    else:  # not an archive torch.save writes: damaged, so the resume goes on from the checkpoint before
        path, state, notes = resume_checkpoint(tmp_path, model, optimizer)
        assert path == older and state.step == 1 and str(newest / part) in notes[0]
    assert not canary.exists()


def test_a_checkpoint_written_before_this_change_still_loads(tiny, tmp_path):
    """``rng.pt`` used to hold NumPy's key as an ndarray (``torch.save`` of ``np.random.get_state()``): still read,
    under ``weights_only`` with just that array type allowed, and the streams continue exactly."""
    model, optimizer = tiny
    (newest, _) = _two_checkpoints(tmp_path, model, optimizer)
    random.seed(7), np.random.seed(7), torch.manual_seed(7)
    old = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    torch.save(old, newest / "rng.pt")
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(0), np.random.seed(0), torch.manual_seed(0)
    assert load_checkpoint(newest, model, optimizer).step == 2
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


def test_the_rng_states_written_now_round_trip_without_pickle(tiny, tmp_path):
    model, optimizer = tiny
    random.seed(3), np.random.seed(3), torch.manual_seed(3)
    np.random.randn()  # a cached Gaussian is part of NumPy's state
    path = save_checkpoint(tmp_path, model, None, optimizer, TrainState(step=1, cursor=2))
    assert torch.serialization.get_unsafe_globals_in_checkpoint(path / "rng.pt") == []
    expected = (random.random(), np.random.randn(), torch.rand(1).item())
    random.seed(0), np.random.seed(0), torch.manual_seed(0)
    load_checkpoint(path, model, optimizer)
    assert (random.random(), np.random.randn(), torch.rand(1).item()) == expected


def _damage(newest: Path, part: str) -> None:
    file = newest / part
    if part == "state.json":
        file.write_text('{"step": 2, "cur')
    else:
        file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])


@pytest.mark.parametrize("part", ["state.json", "model.safetensors", "optimizer.pt", "rng.pt"])
def test_a_damaged_checkpoint_is_skipped_for_the_one_before_it(tiny, tmp_path, part):
    """Today each ends the resume in a traceback naming no file (JSONDecodeError, SafetensorError, a zip error)."""
    model, optimizer = tiny
    newest, older = _two_checkpoints(tmp_path, model, optimizer)
    _damage(newest, part)
    with pytest.raises(CheckpointError, match=str(newest / part)):
        load_checkpoint(newest, model, optimizer)
    path, state, notes = resume_checkpoint(tmp_path, model, optimizer)
    assert (path, state.step, state.cursor) == (older, 1, 2)
    assert len(notes) == 1 and str(newest / part) in notes[0]
    _damage(older, part)
    with pytest.raises(CheckpointError) as e:
        resume_checkpoint(tmp_path, model, optimizer)
    message = str(e.value)
    assert str(newest / part) in message and str(older / part) in message and "fresh run_dir" in message


@pytest.mark.slow
def test_torn_log_lines_and_a_damaged_checkpoint_resume_to_the_end(tiny_config, tmp_path):
    from rubricgym.trainers.trainer import Trainer

    cfg = tiny_config(tmp_path / "run", steps=2, keep_rollouts=True)
    Trainer(cfg).run()
    run = cfg.run_dir
    for name in ("metrics.jsonl", "trajectories.jsonl"):
        with open(run / name, "ab") as f:  # what a kill in the middle of a write leaves
            f.write(b'{"kind": "train", "step": 3, "rew')
    _damage(complete_checkpoints(run)[0], "model.safetensors")
    resumed = Trainer(cfg.with_overrides(steps=3))
    summary = resumed.run(resume=True)
    notes = "\n".join(resumed.resume_notes)
    assert str(run / "metrics.jsonl") in notes and str(run / "trajectories.jsonl") in notes
    assert "step-000002" in notes and "model.safetensors" in notes
    assert summary["steps"] == 3
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines() if '"train"' in x]
    assert steps == [1, 2, 3]
    assert (run / "metrics.jsonl.removed").read_bytes() == b'{"kind": "train", "step": 3, "rew\n'


def _train_cli(config: Path, resume: bool) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    args = [sys.executable, "-m", "rubricgym", "train", "-c", str(config), *(["--resume"] if resume else [])]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
def test_a_run_killed_at_random_points_resumes_to_the_end(tiny_config, tmp_path):
    """SIGKILL a real ``rubricgym train`` at seeded random moments, tear its logs as a kill mid-write would, and
    resume each time: the last resume finishes with every step logged once, as an uninterrupted run logs them."""
    steps = 4

    def config(name: str) -> Path:
        cfg = tiny_config(tmp_path / name, steps=steps, keep_rollouts=True)
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(cfg.model_dump(mode="json", by_alias=True)))
        return path

    whole = _train_cli(config("whole"), resume=False)
    assert whole.wait(timeout=600) == 0, whole.stdout.read() if whole.stdout else ""
    elapsed = [r["elapsed_s"] for r in _train_records(tmp_path / "whole")]
    step_s = (elapsed[-1] - elapsed[0]) / (steps - 1)
    killed, run = config("killed"), tmp_path / "killed"
    rng = random.Random(40)
    kills = 0
    for attempt in range(3):  # killed at a random moment of step attempt + 2 (a rollout, an update, a save)
        proc = _train_cli(killed, resume=attempt > 0)
        while proc.poll() is None and len(_train_records(run)) < attempt + 1:
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 1.0) * step_s)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        if attempt == 1:  # what a kill in the middle of a write leaves
            for name in ("metrics.jsonl", "trajectories.jsonl"):
                with open(run / name, "ab") as f:
                    f.write(b'{"kind": "train", "st')
    assert kills >= 2
    last = _train_cli(killed, resume=True)
    out = last.communicate(timeout=600)[0]
    assert last.returncode == 0, out
    assert json.loads((run / "summary.json").read_text())["steps"] == steps
    for name in ("whole", "killed"):
        assert [r["step"] for r in _train_records(tmp_path / name)] == list(range(1, steps + 1)), out
    for name in ("metrics.jsonl", "trajectories.jsonl"):  # set aside by a resume, not lost
        assert b'{"kind": "train", "st' in (run / f"{name}.removed").read_bytes().splitlines()


def _train_records(run: Path) -> list[dict]:
    """The train records of ``run``'s metrics so far (a line being written is not one yet)."""
    path = run / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(x) for x in lines if '"train"' in x and x.endswith("}")]


@pytest.mark.slow
def test_train_resume_with_only_unsafe_checkpoints_ends_in_a_clear_error(tiny_config, tmp_path):
    from rubricgym.trainers.trainer import Trainer

    cfg = tiny_config(tmp_path / "run", steps=1)
    Trainer(cfg).run()
    canary = tmp_path / "PWNED"
    for ckpt in complete_checkpoints(cfg.run_dir):
        torch.save({"state": Canary(canary)}, ckpt / "rng.pt")
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json", by_alias=True)))
    proc = _train_cli(path, resume=True)
    out = proc.communicate(timeout=600)[0]
    assert proc.returncode == 2, out  # a message, not a traceback
    assert "error:" in out and "rng.pt" in out and "Traceback" not in out
    assert not canary.exists()
