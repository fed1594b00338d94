"""A training run as a plain Hugging Face model directory (``rubricgym export --merge``, the warm start's model):
its newest checkpoint with a LoRA adapter merged into the base model, a sharded run's
``torch.distributed.checkpoint`` directory gathered into one process, or a full fine-tuning checkpoint as it is.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
import yaml

from rubricgym.agents.models import model_path
from rubricgym.trainers.engine.checkpoint import DCP_DIR, latest_checkpoint, load_distributed
from rubricgym.trainers.engine.lora import ADAPTER_CONFIG, ADAPTER_FILE


class MergeError(ValueError):
    """A run directory that cannot be exported as a merged model; the message says why and what to do."""


def export_merged(run_dir: Path, out: Path) -> Path:
    """Write ``run_dir``'s newest checkpoint to ``out`` as a Hugging Face model directory that
    ``AutoModelForCausalLM.from_pretrained`` loads: a LoRA checkpoint's adapter merged into the base model named
    in the run's ``config.yaml``, a full fine-tuning checkpoint's weights as they are. ``out`` is written beside
    itself and renamed into place (replacing what is there: the caller decides whether it may)."""
    ckpt = latest_checkpoint(run_dir)
    if ckpt is None:
        raise MergeError(f"{run_dir} has no complete checkpoint (checkpoints/step-*/state.json): nothing to export")
    tmp = out.parent / f".{out.name}.tmp-merge"
    shutil.rmtree(tmp, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        if (ckpt / "dcp").is_dir():  # a sharded run's checkpoint: gathered into one process here
            _write_distributed(ckpt, *_base_model_of(run_dir, ckpt), tmp)
        elif (ckpt / ADAPTER_FILE).exists():
            _write_merged(ckpt, *_base_model_of(run_dir, ckpt), tmp)
        else:
            tmp.mkdir()
            for f in ckpt.iterdir():  # the checkpoint is a model directory already, beside the training state
                if f.is_file() and f.name not in ("optimizer.pt", "rng.pt", "state.json"):
                    shutil.copy2(f, tmp / f.name)
        if out.is_symlink() or out.is_file():
            out.unlink()
        elif out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _base_model_of(run_dir: Path, ckpt: Path) -> tuple[Path, str]:
    """The base model directory a LoRA run adapted and its dtype: its ``config.yaml``'s ``model.name`` and
    ``model.dtype``, else the adapter's own ``base_model_name_or_path`` in float32."""
    model: dict[str, Any] = {}
    config = run_dir / "config.yaml"
    if config.exists():
        model = (yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("model") or {}
    name = model.get("name")
    if name is None and (ckpt / ADAPTER_CONFIG).exists():
        name = json.loads((ckpt / ADAPTER_CONFIG).read_text(encoding="utf-8")).get("base_model_name_or_path")
    if not name:
        raise MergeError(f"{run_dir}: no config.yaml names the base model the adapter in {ckpt} belongs to")
    return Path(model_path(str(name))), str(model.get("dtype") or "float32")


def _write_merged(ckpt: Path, base: Path, dtype: str, dest: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    lm = AutoModelForCausalLM.from_pretrained(base, dtype=getattr(torch, dtype))
    merged = PeftModel.from_pretrained(lm, str(ckpt)).merge_and_unload()
    merged.save_pretrained(dest, safe_serialization=True)
    AutoTokenizer.from_pretrained(ckpt if (ckpt / "tokenizer_config.json").exists() else base).save_pretrained(dest)


def _write_distributed(ckpt: Path, base: Path, dtype: str, dest: Path) -> None:
    """A ``torch.distributed.checkpoint`` checkpoint (any world size) as one model directory: its weights (or
    its adapters, merged) loaded into the base model in this process."""
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    lm = AutoModelForCausalLM.from_pretrained(base, dtype=getattr(torch, dtype))
    if (ckpt / ADAPTER_CONFIG).exists():
        peft_model = get_peft_model(lm, PeftLoraConfig.from_pretrained(str(ckpt)))
        load_distributed(peft_model, None, ckpt / DCP_DIR)
        # peft >= 0.22 types the merged model as a plain ``nn.Module``; it is the base model, adapters folded in.
        peft_model.merge_and_unload()
    else:
        load_distributed(lm, None, ckpt / DCP_DIR)
    lm.save_pretrained(dest, safe_serialization=True)
    AutoTokenizer.from_pretrained(ckpt if (ckpt / "tokenizer_config.json").exists() else base).save_pretrained(dest)
