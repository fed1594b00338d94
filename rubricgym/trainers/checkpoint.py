"""Checkpoints that resume exactly: weights, optimizer state, RNG states, the data cursor and the state of the
rubric buffer and the hacking monitor.

Layout: ``RUN/checkpoints/step-000012/`` with ``model.safetensors`` (+ config and tokenizer, so the folder
loads as a Hugging Face model), ``optimizer.pt``, ``rng.pt`` and ``state.json``. A LoRA run (``model.lora``)
saves its adapter instead of the model (``adapter_model.safetensors`` + ``adapter_config.json``, which PEFT's
``PeftModel.from_pretrained`` loads onto the base; ``rubricgym export --merge`` writes the merged model). The
newest complete checkpoint is the one ``--resume`` continues from; a half-written one (no ``state.json``) is
ignored.

A sharded run (``model.parallel.strategy: fsdp2``) writes a ``torch.distributed.checkpoint`` directory instead of
the weights and optimizer files: ``dcp/``, where every rank writes its own shards of the trained parameters (the
adapters only, under LoRA) and of their optimizer state, beside the same ``rng.pt``, ``state.json``, tokenizer
and model config. It loads into any world size, sharded or not (DCP reshards on load), and ``rubricgym export``
turns it into a Hugging Face model directory.
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

from rubricgym.trainers.distributed import rank_world
from rubricgym.trainers.lora import ADAPTER_CONFIG, ADAPTER_FILE, is_peft, load_adapter, save_adapter
from rubricgym.trainers.sharding import is_sharded


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
    """Write a checkpoint atomically (temp dir then rename) and keep only the ``keep`` newest. For a sharded
    model every rank must call it (each writes its shards); rank 0 writes the rest and renames."""
    root = run_dir / "checkpoints"
    final = root / f"step-{state.step:06d}"
    tmp = root / f".tmp-step-{state.step:06d}"
    sharded, main = is_sharded(model), rank_world()[0] == 0
    if main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    if sharded:
        _barrier()  # the directory exists before any rank writes into it
        save_distributed(model, optimizer, tmp / DCP_DIR)
        if not main:
            _barrier()
            return final
        _net(model).config.save_pretrained(tmp)
        if is_peft(model):
            model.peft_config["default"].save_pretrained(str(tmp))
    elif is_peft(model):
        save_adapter(model, tmp)
    else:
        model.save_pretrained(tmp, safe_serialization=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp)
    if not sharded:
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(rng_state(), tmp / "rng.pt")
    (tmp / "state.json").write_text(json.dumps(asdict(state), indent=2), encoding="utf-8")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    for old in sorted(p for p in root.glob("step-*") if p.is_dir())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    if sharded:
        _barrier()  # no rank goes on before the checkpoint is complete
    return final


DCP_DIR = "dcp"
"""A sharded checkpoint's ``torch.distributed.checkpoint`` directory."""


def _options(strict: bool = True) -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    # under LoRA: the adapters, not the frozen base; loading them leaves the base as it is (dcp.load itself fails
    # on a key the checkpoint lacks, so nothing trained is skipped)
    return StateDictOptions(ignore_frozen_params=True, strict=strict)


def _trained(model: Any, state: dict[str, Any]) -> dict[str, Any]:
    """``state`` without frozen parameters ``ignore_frozen_params`` lets through under another name (a head tied
    to a frozen embedding)."""
    frozen = {name for name, p in model.named_parameters(remove_duplicate=False) if not p.requires_grad}
    return {k: v for k, v in state.items() if k not in frozen}


def _state(model: Any, optimizer: torch.optim.Optimizer | None) -> dict[str, Any]:
    """What a DCP checkpoint holds for ``model`` (and ``optimizer``): the trained parameters, their AdamW state."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict

    if optimizer is None:
        return {"model": _trained(model, get_model_state_dict(model, options=_options()))}
    msd, osd = get_state_dict(model, optimizer, options=_options())
    return {"model": _trained(model, msd), "optim": osd}


def save_distributed(model: Any, optimizer: torch.optim.Optimizer | None, path: Path) -> None:
    """Every rank writes its shards of the trained parameters (and their optimizer state) to ``path``."""
    import torch.distributed.checkpoint as dcp

    dcp.save(_state(model, optimizer), checkpoint_id=str(path))


def load_distributed(model: Any, optimizer: torch.optim.Optimizer | None, path: Path) -> None:
    """Load ``path`` (written by ``save_distributed`` at any world size) into ``model`` and ``optimizer``, sharded
    or not: DCP reads each rank's part of every tensor."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_state_dict

    state = _state(model, optimizer)
    dcp.load(state, checkpoint_id=str(path))  # fills the tensors of ``state`` in place
    if optimizer is None:
        set_model_state_dict(model, state["model"], options=_options(strict=False))
    else:
        set_state_dict(
            model,
            optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optim"],
            options=_options(strict=False),
        )


def _net(model: Any) -> Any:
    return model.get_base_model() if is_peft(model) else model


def _barrier() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()


def latest_checkpoint(run_dir: Path) -> Path | None:
    root = run_dir / "checkpoints"
    done = sorted(p for p in root.glob("step-*") if (p / "state.json").exists()) if root.exists() else []
    return done[-1] if done else None


def load_checkpoint(path: Path, model: Any, optimizer: torch.optim.Optimizer) -> TrainState:
    """Restore weights (in place; a ``PeftModel``'s adapter), optimizer and RNG states; returns the rest of the
    run's state."""
    distributed = (path / DCP_DIR).is_dir()
    adapter = (path / (ADAPTER_CONFIG if distributed else ADAPTER_FILE)).exists()
    if adapter != is_peft(model):
        held, wanted = ("a LoRA adapter", "set model.lora") if adapter else ("full weights", "remove model.lora")
        raise RuntimeError(f"checkpoint {path} holds {held}: {wanted} as in the run's config.yaml to resume it")
    if distributed:
        load_distributed(model, optimizer, path / DCP_DIR)
    elif is_sharded(model):
        raise RuntimeError(
            f"checkpoint {path} was written by a replicated (ddp) run: resume it with model.parallel.strategy 'ddp'"
        )
    elif adapter:
        load_adapter(model, path)
    else:
        weights = load_file(str(path / "model.safetensors"))
        missing, unexpected = model.load_state_dict(weights, strict=False)
        tied = {"lm_head.weight"}
        if set(missing) - tied or unexpected:
            raise RuntimeError(f"checkpoint {path} does not fit the model: missing {missing}, unexpected {unexpected}")
    if not distributed:
        optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=False))
    set_rng_state(torch.load(path / "rng.pt", weights_only=False))
    state = json.loads((path / "state.json").read_text(encoding="utf-8"))
    if "buffer" in state or "monitor" in state:  # written before entries: the one entry's state
        one = {"buffer": state.pop("buffer", None), "monitor": state.pop("monitor", None)}
        state["entries"] = {"*": one}
    return TrainState(**state)
