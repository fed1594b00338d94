"""Checkpoints that resume exactly: weights, optimizer state, RNG states, the data cursor and the state of the
rubric buffer and the hacking monitor.

Layout: ``RUN/checkpoints/step-000012/`` with ``model.safetensors`` (+ config and tokenizer, so the folder
loads as a Hugging Face model), ``optimizer.pt``, ``rng.pt`` and ``state.json``. A LoRA run (``model.lora``)
saves its adapter instead of the model (``adapter_model.safetensors`` + ``adapter_config.json``, which PEFT's
``PeftModel.from_pretrained`` loads onto the base; ``rubricgym export --merge`` writes the merged model). The
newest complete checkpoint is the one ``--resume`` continues from; a half-written one (no ``state.json``) is
ignored.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file

from rubricgym.trainers.lora import ADAPTER_FILE, is_peft, load_adapter, save_adapter


@dataclass
class TrainState:
    step: int
    cursor: int
    elapsed_s: float = 0.0
    base_eval: dict[str, Any] | None = None
    entries: dict[str, Any] | None = None
    """``RewardEntry.state_dict()`` by entry: its rubric buffer (the evolved rubric and its criteria's history) and
    hacking monitor (drift baseline, alarm streaks and alarms)."""
    guidance: dict[str, Any] | None = None
    """``Guide.state_dict()``: each task's guidance level."""


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def save_checkpoint(
    run_dir: Path, model: Any, tokenizer: Any, optimizer: torch.optim.Optimizer, state: TrainState, keep: int = 2
) -> Path:
    """Write a checkpoint atomically (temp dir then rename) and keep only the ``keep`` newest."""
    root = run_dir / "checkpoints"
    final = root / f"step-{state.step:06d}"
    tmp = root / f".tmp-step-{state.step:06d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if is_peft(model):
        save_adapter(model, tmp)
    else:
        model.save_pretrained(tmp, safe_serialization=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp)
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(rng_state(), tmp / "rng.pt")
    (tmp / "state.json").write_text(json.dumps(asdict(state), indent=2), encoding="utf-8")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    for old in sorted(p for p in root.glob("step-*") if p.is_dir())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(run_dir: Path) -> Path | None:
    root = run_dir / "checkpoints"
    done = sorted(p for p in root.glob("step-*") if (p / "state.json").exists()) if root.exists() else []
    return done[-1] if done else None


def load_checkpoint(path: Path, model: Any, optimizer: torch.optim.Optimizer) -> TrainState:
    """Restore weights (in place; a ``PeftModel``'s adapter), optimizer and RNG states; returns the rest of the
    run's state."""
    adapter = (path / ADAPTER_FILE).exists()
    if adapter != is_peft(model):
        held, wanted = ("a LoRA adapter", "set model.lora") if adapter else ("full weights", "remove model.lora")
        raise RuntimeError(f"checkpoint {path} holds {held}: {wanted} as in the run's config.yaml to resume it")
    if adapter:
        load_adapter(model, path)
    else:
        weights = load_file(str(path / "model.safetensors"))
        missing, unexpected = model.load_state_dict(weights, strict=False)
        tied = {"lm_head.weight"}
        if set(missing) - tied or unexpected:
            raise RuntimeError(f"checkpoint {path} does not fit the model: missing {missing}, unexpected {unexpected}")
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=False))
    set_rng_state(torch.load(path / "rng.pt", weights_only=False))
    state = json.loads((path / "state.json").read_text(encoding="utf-8"))
    if "buffer" in state or "monitor" in state:  # written before entries: the one entry's state
        one = {"buffer": state.pop("buffer", None), "monitor": state.pop("monitor", None)}
        state["entries"] = {"*": one}
    return TrainState(**state)
