"""LoRA adapters on the trained policy (PEFT), the reference policy they give for free, and merged weights.

LoRA (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models") freezes the base weights ``W`` and
trains ``W + (alpha / r) B A`` with ``A`` (r x in) and ``B`` (out x r), ``B`` starting at zero, so the adapted
policy starts as the base. PEFT injects its ``lora.Linear`` layers *into* the loaded model in place: the
``transformers`` network the sampler holds (``LocalAgent.lm``) is the adapted policy, and generation (packed
weights included: the base layer and both factors are plain ``nn.Linear``s) samples from it with no copy.

- ``add_adapters``: wrap the policy (seeded initialisation of ``A``, independent of the global RNG stream).
- ``reference``: the KL reference of a LoRA run is the same network with its adapters disabled (no second copy).
- ``merged_state_dict``: ``W + (alpha / r) B A`` under the base model's key names (vLLM weight pushes, export).

A run's checkpoint as a merged model directory is ``engine/export.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from rubricgym.trainers.config import LoraConfig

ADAPTER_FILE = "adapter_model.safetensors"
"""What ``PeftModel.save_pretrained`` writes: a checkpoint holding it is a LoRA checkpoint."""
ADAPTER_CONFIG = "adapter_config.json"
"""The adapter's PEFT config (a sharded LoRA checkpoint keeps its weights in ``dcp/``)."""
INSTALL_PEFT = "model.lora needs the peft package: pip install 'rubricgym[train]' (or pip install peft)"


def add_adapters(lm: torch.nn.Module, cfg: LoraConfig, seed: int) -> Any:
    """Inject LoRA adapters into ``lm`` in place and freeze its base weights; returns the ``PeftModel`` around it
    (for saving, loading and disabling the adapters). ``A`` is initialised from ``seed`` inside a forked RNG, so
    two runs with one seed start from the same adapters and the global random stream is left as it was."""
    try:
        from peft import LoraConfig as PeftLoraConfig
        from peft import get_peft_model
    except ImportError:
        raise ImportError(INSTALL_PEFT) from None
    config = PeftLoraConfig(
        r=cfg.r,
        lora_alpha=cfg.alpha,
        lora_dropout=cfg.dropout,
        target_modules=cfg.target_modules,
        bias="none",
        task_type="CAUSAL_LM",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return get_peft_model(lm, config)


def is_peft(model: Any) -> bool:
    """Whether ``model`` is a ``PeftModel`` (what ``add_adapters`` returns)."""
    return type(model).__module__.startswith("peft.") and hasattr(model, "disable_adapter")


def has_adapters(model: torch.nn.Module) -> bool:
    """Whether ``model`` (a ``PeftModel`` or the network inside it) carries LoRA layers."""
    return any(hasattr(m, "lora_A") for m in model.modules())


@contextlib.contextmanager
def reference(ref_model: Any) -> Iterator[torch.nn.Module]:
    """The module whose forward is the KL reference policy: for a ``PeftModel``, its network with the adapters
    disabled (the frozen base, while inside); any other module is its own reference (a frozen copy)."""
    if not is_peft(ref_model):
        yield ref_model
        return
    with ref_model.disable_adapter():
        yield ref_model.get_base_model()


def trainable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The parameters the optimizer updates: all of them in full fine-tuning, the adapters' under LoRA."""
    return [p for p in model.parameters() if p.requires_grad]


@torch.no_grad()
def merged_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``model``'s weights with every active LoRA adapter merged in (``W + (alpha / r) B A``), under the base
    model's key names (no ``base_layer`` or ``lora_`` entries), without changing ``model``; for a model without
    adapters, its ``state_dict``. Tied weights stay tied (the same tensor under both names)."""
    net: Any = model.get_base_model() if is_peft(model) else model  # type: ignore[operator]
    deltas: dict[str, torch.Tensor] = {}
    for name, m in net.named_modules():
        if hasattr(m, "lora_A") and hasattr(m, "get_delta_weight") and not getattr(m, "disable_adapters", False):
            for adapter in m.active_adapters:
                if adapter in m.lora_A:
                    d = m.get_delta_weight(adapter)
                    key = f"{name}.weight"
                    deltas[key] = deltas[key] + d if key in deltas else d
    out: dict[str, torch.Tensor] = {}
    for key, value in net.state_dict().items():
        if ".lora_" in key:
            continue
        key = key.replace(".base_layer.", ".")
        out[key] = (value + deltas[key].to(value.dtype)) if key in deltas else value
    return out


def save_adapter(peft_model: Any, path: Path) -> None:
    """The adapter weights and ``adapter_config.json`` in ``path`` (what ``PeftModel.from_pretrained`` loads)."""
    peft_model.save_pretrained(str(path), safe_serialization=True)


def load_adapter(peft_model: Any, path: Path) -> None:
    """Restore the adapter weights saved by ``save_adapter`` into ``peft_model`` in place, exactly."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    saved = load_file(str(path / ADAPTER_FILE))
    result: Any = set_peft_model_state_dict(peft_model, saved)
    missing = [k for k in result.missing_keys if "lora_" in k]
    if missing or result.unexpected_keys:
        raise RuntimeError(
            f"the adapter in {path} does not fit model.lora (missing {missing[:3]}, unexpected "
            f"{list(result.unexpected_keys)[:3]}): resume with the run's own model.lora settings"
        )
