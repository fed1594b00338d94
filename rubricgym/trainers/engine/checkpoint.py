"""Checkpoints that resume exactly: weights, optimizer state, RNG states, the data cursor and the state of the
rubric buffer and the hacking monitor.

Layout: ``RUN/checkpoints/step-000012/`` with ``model.safetensors`` (+ config and tokenizer, so the folder
loads as a Hugging Face model), ``optimizer.pt``, ``rng.pt`` and ``state.json``. A LoRA run (``model.lora``)
saves its adapter instead of the model (``adapter_model.safetensors`` + ``adapter_config.json``, which PEFT's
``PeftModel.from_pretrained`` loads onto the base; ``rubricgym export --merge`` writes the merged model). The
newest complete checkpoint is the one ``--resume`` continues from; a half-written one (no ``state.json``) is
ignored, and one whose files a crash or a full disk damaged is skipped, with a note naming the file, for the one
before it. Every file is fsynced before the folder is renamed into place.

Nothing in a checkpoint is unpickled: ``optimizer.pt`` and ``rng.pt`` hold only tensors and plain values and are read
with ``torch.load(weights_only=True)``; a file that holds anything else (a crafted one that would run code) is
refused (``UnsafeCheckpointError``), naming it, and the resume stops there.

A sharded run (``model.parallel.strategy: fsdp2``) writes a ``torch.distributed.checkpoint`` directory instead of
the weights and optimizer files: ``dcp/``, where every rank writes its own shards of the trained parameters (the
adapters only, under LoRA) and of their optimizer state, beside the same ``rng.pt``, ``state.json``, tokenizer
and model config. It loads into any world size, sharded or not (DCP reshards on load), and ``rubricgym export``
turns it into a Hugging Face model directory.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import TypeAdapter, ValidationError
from safetensors import SafetensorError
from safetensors.torch import load_file

from rubricgym.trainers.engine.distributed import rank_world
from rubricgym.trainers.engine.lora import ADAPTER_CONFIG, ADAPTER_FILE, is_peft, load_adapter, save_adapter
from rubricgym.trainers.engine.sharding import is_sharded


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


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be resumed from: a file missing or damaged, or weights that do not fit the model."""


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint file that holds more than tensors and plain values: loading it could run code, so it is refused."""


RNG_FILE, OPTIMIZER_FILE, STATE_FILE, WEIGHTS_FILE = "rng.pt", "optimizer.pt", "state.json", "model.safetensors"


def rng_state() -> dict[str, Any]:
    """Python's, NumPy's and torch's RNG states as tensors and plain values, so ``weights_only`` loading reads them."""
    version, internal, gauss = random.getstate()
    kind, key, pos, has_gauss, cached = np.random.get_state(legacy=True)
    return {
        "python": [version, list(internal), gauss],
        "numpy": [str(kind), torch.from_numpy(np.asarray(key, dtype=np.int64)), int(pos), int(has_gauss), cached],
        "torch": torch.get_rng_state(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore ``rng_state()``'s states (also those of checkpoints written before it, with a NumPy key array)."""
    version, internal, gauss = state["python"]
    kind, key, pos, has_gauss, cached = state["numpy"]
    key = key.numpy() if isinstance(key, torch.Tensor) else np.asarray(key)
    random.setstate((int(version), tuple(int(x) for x in internal), None if gauss is None else float(gauss)))
    np.random.set_state((str(kind), key.astype(np.uint32), int(pos), int(has_gauss), float(cached)))
    torch.set_rng_state(state["torch"])


def _fsync_tree(folder: Path) -> None:
    """Flush every file under ``folder`` (and the folders) to disk, so a power cut cannot leave a renamed
    checkpoint whose files are empty."""
    for path in [*sorted(folder.rglob("*")), folder]:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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
        torch.save(optimizer.state_dict(), tmp / OPTIMIZER_FILE)
    torch.save(rng_state(), tmp / RNG_FILE)
    (tmp / STATE_FILE).write_text(json.dumps(asdict(state), indent=2), encoding="utf-8")  # last: marks it complete
    _fsync_tree(tmp)
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


def complete_checkpoints(run_dir: Path) -> list[Path]:
    """The run's checkpoints that were written to the end (``state.json`` present), newest first."""
    root = run_dir / "checkpoints"
    done = [p for p in root.glob("step-*") if (p / STATE_FILE).exists()] if root.exists() else []
    return sorted(done, reverse=True)


def latest_checkpoint(run_dir: Path) -> Path | None:
    done = complete_checkpoints(run_dir)
    return done[0] if done else None


def resume_checkpoint(
    run_dir: Path, model: Any, optimizer: torch.optim.Optimizer
) -> tuple[Path, TrainState, list[str]] | None:
    """Load the newest usable checkpoint of ``run_dir``: ``(its path, its state, notes on the newer ones skipped)``,
    or ``None`` when there is none. A damaged checkpoint is skipped for the one before it; an unsafe file stops the
    resume (``UnsafeCheckpointError``); ``CheckpointError`` when none is usable, naming each and what to do."""
    found = complete_checkpoints(run_dir)
    if not found:
        return None
    if (found[0] / DCP_DIR).is_dir():  # every rank loads its shards: ranks cannot fall back one by one
        return found[0], load_checkpoint(found[0], model, optimizer), []
    skipped: list[str] = []
    for path in found:
        try:
            state = load_checkpoint(path, model, optimizer)
        except UnsafeCheckpointError:
            raise
        except CheckpointError as e:
            skipped.append(f"skipped checkpoint {path}: {e}")
            continue
        return path, state, skipped
    raise CheckpointError(
        "no checkpoint of "
        + str(run_dir)
        + " can be resumed from:\n  "
        + "\n  ".join(skipped)
        + "\nmove the damaged checkpoint folders out of "
        + str(run_dir / "checkpoints")
        + " and resume again (the run restarts from step 0), or train into a fresh run_dir"
    )


_STATE = TypeAdapter(TrainState)
_NUMPY_RNG: list[Any] = [np.zeros(1).__reduce__()[0], np.ndarray, np.dtype, type(np.dtype(np.uint32))]
"""What a ``rng.pt`` written before the RNG states became tensors holds besides them: NumPy's uint32 key array."""
_ALLOWED = {f"{g.__module__}.{g.__name__}" for g in _NUMPY_RNG} | {"numpy.core.multiarray._reconstruct"}


def safe_load(file: Path) -> Any:
    """``torch.load(file, weights_only=True)``: tensors and plain values only. A damaged file raises
    ``CheckpointError``, one that holds anything else ``UnsafeCheckpointError``; both name the file."""
    if not file.is_file():
        raise CheckpointError(f"{file} is missing")
    if not zipfile.is_zipfile(file):  # torch.save writes a zip archive; a short or foreign file is not one
        raise CheckpointError(f"{file} is damaged: not the complete archive torch.save writes (a write cut short?)")
    try:
        unsafe = sorted(set(torch.serialization.get_unsafe_globals_in_checkpoint(file)) - _ALLOWED)
    except Exception as e:  # noqa: BLE001  (a damaged archive fails here in many ways)
        raise CheckpointError(f"{file} is damaged: {type(e).__name__}: {str(e).splitlines()[0][:200]}") from None
    if unsafe:
        raise UnsafeCheckpointError(_unsafe(file, ", ".join(unsafe[:5])))
    try:
        with torch.serialization.safe_globals(_NUMPY_RNG):
            return torch.load(file, weights_only=True)
    except pickle.UnpicklingError as e:
        raise UnsafeCheckpointError(_unsafe(file, str(e).strip().splitlines()[-1][:200])) from None
    except Exception as e:  # noqa: BLE001  (truncated records, bad CRCs: the file is damaged)
        raise CheckpointError(f"{file} is damaged: {type(e).__name__}: {str(e).splitlines()[0][:200]}") from None


def _unsafe(file: Path, what: str) -> str:
    return (
        f"refused {file}: it holds objects other than tensors and plain values ({what}), which rubricgym never "
        "writes, and loading it could run code. Do not resume from it unless you wrote it: delete its checkpoint "
        f"folder {file.parent} to resume from an older one, or train into a fresh run_dir"
    )


def _read_state(path: Path) -> TrainState:
    file = path / STATE_FILE
    try:
        state = json.loads(file.read_text(encoding="utf-8"))
        if isinstance(state, dict) and ("buffer" in state or "monitor" in state):  # written before entries
            one = {"buffer": state.pop("buffer", None), "monitor": state.pop("monitor", None)}
            state["entries"] = {"*": one}
        return _STATE.validate_python(state)
    except (OSError, UnicodeDecodeError, ValueError) as e:  # ValidationError is a ValueError
        why = str(e).splitlines()[0] if not isinstance(e, ValidationError) else f"{e.error_count()} wrong field(s)"
        raise CheckpointError(f"{file} is damaged ({why})") from None


def _read_weights(file: Path) -> dict[str, torch.Tensor]:
    try:
        return load_file(str(file))
    except (SafetensorError, OSError) as e:
        raise CheckpointError(f"{file} is damaged or missing ({e})") from None


def load_checkpoint(path: Path, model: Any, optimizer: torch.optim.Optimizer) -> TrainState:
    """Restore weights (in place; a ``PeftModel``'s adapter), optimizer and RNG states; returns the rest of the
    run's state. Every file is read (and checked) before anything is restored, so a damaged checkpoint changes
    nothing but the weights of a model that does not fit it."""
    distributed = (path / DCP_DIR).is_dir()
    adapter = (path / (ADAPTER_CONFIG if distributed else ADAPTER_FILE)).exists()
    if adapter != is_peft(model):
        held, wanted = ("a LoRA adapter", "set model.lora") if adapter else ("full weights", "remove model.lora")
        raise RuntimeError(f"checkpoint {path} holds {held}: {wanted} as in the run's config.yaml to resume it")
    if not distributed and is_sharded(model):
        raise RuntimeError(
            f"checkpoint {path} was written by a replicated (ddp) run: resume it with model.parallel.strategy 'ddp'"
        )
    state = _read_state(path)
    rng = safe_load(path / RNG_FILE)
    optim = None if distributed else safe_load(path / OPTIMIZER_FILE)
    weights = None if distributed or adapter else _read_weights(path / WEIGHTS_FILE)
    if distributed:
        load_distributed(model, optimizer, path / DCP_DIR)
    elif adapter:
        try:
            load_adapter(model, path)
        except (SafetensorError, OSError) as e:
            raise CheckpointError(f"{path / ADAPTER_FILE} is damaged or missing ({e})") from None
    else:
        assert weights is not None
        missing, unexpected = model.load_state_dict(weights, strict=False)
        tied = {"lm_head.weight"}
        if set(missing) - tied or unexpected:
            raise RuntimeError(f"checkpoint {path} does not fit the model: missing {missing}, unexpected {unexpected}")
    try:
        if optim is not None:
            optimizer.load_state_dict(optim)
    except (KeyError, ValueError, TypeError, RuntimeError) as e:
        raise CheckpointError(f"{path / OPTIMIZER_FILE} does not fit the optimizer ({e})") from None
    try:
        set_rng_state(rng)
    except (KeyError, ValueError, TypeError, RuntimeError, AttributeError) as e:
        raise CheckpointError(f"{path / RNG_FILE} holds no RNG states rubricgym can restore ({e})") from None
    return state
