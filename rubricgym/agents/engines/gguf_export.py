"""Write a transformers Llama model's current weights as a GGUF file llama.cpp loads (``export_gguf``).

The trainer's policy changes every update, so a llama.cpp sampler needs the new weights in GGUF after each one.
This writes the file directly from the in-memory model with the ``gguf`` package (no round trip through
safetensors and llama.cpp's ``convert_hf_to_gguf.py``, which pip's llama-cpp-python does not ship):

- architecture metadata from the model's config (``llama.*`` keys);
- the tokenizer (``tokenizer.*`` keys, chat template included) copied from a GGUF of the same vocabulary, by
  default the embedded SmolLM2's, so llama.cpp's vocabulary is the one the policy was trained with;
- tensors under llama.cpp's names, the query and key projections permuted to llama.cpp's rotary layout (the
  inverse of what transformers' GGUF loader undoes), norms in F32, the rest in ``dtype``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rubricgym.agents.models import DEFAULT_MODEL, KNOWN_MODELS, gguf_path

DTYPES = {"f32": 0, "f16": 1, "q8_0": 7}
"""Weight types this exporter writes, with GGUF's ``general.file_type`` code for each."""

_LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def default_tokenizer_gguf() -> Path:
    """The embedded SmolLM2 GGUF, whose tokenizer metadata an export of a SmolLM2-vocabulary model copies."""
    return gguf_path(KNOWN_MODELS[DEFAULT_MODEL])


TokenizerFields = list[tuple[str, Any, Any, Any]]
"""``(key, value, type, element type)`` of a GGUF's ``tokenizer.*`` metadata."""


def tokenizer_fields(path: Path | None = None) -> TokenizerFields:
    """The ``tokenizer.*`` metadata of the GGUF at ``path`` (default: the embedded SmolLM2's).

    Parsing a GGUF's 100k-entry vocabulary and merges takes seconds (tens under load), so a sampler that exports
    after every update reads them once and passes them to ``export_gguf``."""
    import gguf

    reader = gguf.GGUFReader(str(path or default_tokenizer_gguf()))
    return [
        (key, f.contents(), f.types[0], f.types[1] if len(f.types) > 1 else None)
        for key, f in reader.fields.items()
        if key.startswith("tokenizer.")
    ]


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's rotary layout of a query/key projection (``convert_hf_to_gguf.py``'s ``LlamaModel.permute``)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_name(hf_name: str) -> str | None:
    """llama.cpp's name for a transformers Llama state-dict key (None: not a tensor llama.cpp loads)."""
    if hf_name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf_name == "model.norm.weight":
        return "output_norm.weight"
    if hf_name == "lm_head.weight":
        return "output.weight"
    parts = hf_name.split(".", 3)
    if len(parts) == 4 and parts[:2] == ["model", "layers"] and parts[3] in _LAYER_NAMES:
        return f"blk.{parts[2]}.{_LAYER_NAMES[parts[3]]}"
    return None


def _rope_theta(cfg: Any) -> float:
    rope = getattr(cfg, "rope_parameters", None) or {}
    theta = rope.get("rope_theta") if isinstance(rope, dict) else None
    return float(theta if theta is not None else getattr(cfg, "rope_theta", 10000.0))


def export_gguf(lm: Any, out: Path, *, dtype: str = "f16", tokenizer: TokenizerFields | None = None) -> float:
    """Write ``lm``'s weights (a transformers Llama, any float dtype) to ``out`` as GGUF; the seconds it took.

    ``tokenizer``: the vocabulary's metadata (``tokenizer_fields``; read from the embedded SmolLM2 if None)."""
    import gguf

    if dtype not in DTYPES:
        raise ValueError(f"unknown GGUF weight type {dtype!r}: choose one of {', '.join(DTYPES)}")
    cfg = lm.config
    if getattr(cfg, "model_type", None) != "llama":
        raise TypeError(f"export_gguf writes Llama models; this one is {getattr(cfg, 'model_type', None)!r}")
    t0 = time.perf_counter()
    fields = tokenizer_fields() if tokenizer is None else tokenizer
    n = next((len(v) for k, v, _, _ in fields if k == "tokenizer.ggml.tokens"), None)
    if n != cfg.vocab_size:
        raise ValueError(
            f"the tokenizer metadata has {n} tokens, the model {cfg.vocab_size}: pass tokenizer=tokenizer_fields(P) "
            "for a GGUF P of the model's own vocabulary"
        )
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_name("rubricgym policy")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(_rope_theta(cfg))
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_dimension_count(head_dim)
    w.add_vocab_size(cfg.vocab_size)
    w.add_file_type(DTYPES[dtype])
    for key, value, vtype, sub in fields:
        w.add_key_value(key, value, vtype, sub)
    state = lm.state_dict()
    tied = bool(getattr(cfg, "tie_word_embeddings", False))
    for name, tensor in state.items():
        target = gguf_name(name)
        if target is None or (tied and target == "output.weight"):
            continue
        arr = tensor.detach().to(torch.float32).cpu().numpy()
        if target.endswith("attn_q.weight"):
            arr = _permute(arr, cfg.num_attention_heads)
        elif target.endswith("attn_k.weight"):
            arr = _permute(arr, cfg.num_key_value_heads)
        if arr.ndim == 1 or dtype == "f32":
            w.add_tensor(target, np.ascontiguousarray(arr, dtype=np.float32))
        elif dtype == "f16":
            w.add_tensor(target, arr.astype(np.float16))
        else:
            q = gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(target, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return time.perf_counter() - t0
