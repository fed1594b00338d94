"""The sampler's forward for Llama-architecture models, without the Hugging Face module stack.

On CPU a decode step of SmolLM2-135M multiplies a few rows by every weight once: ~55 ms of GEMMs on packed
weights (``agents/packed.py``), around which ``LlamaModel.forward`` spends ~10 ms per step in Python: 30 layers
x (decoder layer, attention, MLP, two norms, seven linears) module calls with their hooks and keyword plumbing,
the causal-mask builder, the output dataclasses, and a lock plus a dict lookup per packed linear. ``LeanLlama``
computes the same function directly:

- RMSNorm, rotary embedding (the model's own ``rotary_emb``), grouped-query attention (``scaled_dot_product_attention``
  with ``enable_gqa``), SiLU-gated MLP, residuals: the formulas of ``transformers``' ``modeling_llama``;
- the query/key/value projections as one GEMM and the gate/up projections as one GEMM, on packs of the
  concatenated weights resolved once per ``sample`` call (the weights cannot change inside one);
- keys and values written into the sampler's ``PreallocatedLayer`` cache exactly as the Hugging Face attention
  writes them, so the two paths can hand one cache to each other.

It runs where the result is the model's own function up to fp32 summation order: a ``llama`` config with SiLU, the
default rotary embedding and no tensor-parallel slicing, every projection a bare ``nn.Linear`` (no LoRA adapters,
hooks or quantised layers), fp32 weights, no autocast, packed weights on CPU (``lean_for`` returns None
otherwise, and the sampler keeps the Hugging Face forward).

Reduced precision (``PackedLinears(dtype=torch.bfloat16)``, the ``bf16-lean`` engine, ``agents/engines/lean_bf16.py``):
the packs are bf16 copies of the fp32 weights and every projection's GEMM runs in bf16 (oneDNN's AVX512-BF16
kernels stream half the bytes); the residual stream, the norms, the rotary embedding and the softmax over the
vocabulary stay fp32 (a bf16 projection's output is added to the fp32 residual), and keys and values are stored in
the packs' ``kv_dtype`` (fp32 by default, the attention then runs in fp32). The fp32 path is unchanged: with fp32
packs every cast below is the identity.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from rubricgym.agents.kvcache import PreallocatedLayer
from rubricgym.agents.packed import PackedLinears


def lean_supported(lm: Any) -> bool:
    """Whether ``lm`` is a model ``LeanLlama`` computes exactly (see the module docstring)."""
    cfg = getattr(lm, "config", None)
    body = getattr(lm, getattr(lm, "base_model_prefix", ""), None)
    if cfg is None or body is None or getattr(cfg, "model_type", None) != "llama":
        return False
    rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    return (
        _plain_layers(body, cfg.num_hidden_layers)
        and getattr(cfg, "hidden_act", None) == "silu"
        and rope.get("rope_type", "default") == "default"
        and getattr(cfg, "pretraining_tp", 1) == 1
        and getattr(body, "rotary_emb", None) is not None
        and next(lm.parameters()).dtype == torch.float32
        and not torch.is_autocast_enabled("cpu")
    )


PROJECTIONS = tuple(f"self_attn.{x}_proj" for x in "qkvo") + tuple(f"mlp.{x}_proj" for x in ("gate", "up", "down"))


def _plain_layers(body: Any, n: int) -> bool:
    """Whether every projection is a bare ``nn.Linear`` with its own forward (or ``PackedLinears``' route to its
    weights): a LoRA wrapper (``peft``), an accelerate hook or a quantised linear computes something ``LeanLlama``
    would not."""
    layers = getattr(body, "layers", None)
    if layers is None or len(layers) < n:
        return False
    for layer in layers[:n]:
        for path in PROJECTIONS:
            m = layer.get_submodule(path)
            hook = m.__dict__.get("forward")
            if type(m) is not torch.nn.Linear or (hook is not None and not getattr(hook, "packed", False)):
                return False
    return True


def lean_for(lm: Any, packs: PackedLinears | None) -> LeanLlama | None:
    """A ``LeanLlama`` over ``lm`` where it applies (CPU packs in use, a supported model), else None."""
    if packs is None or not lean_supported(lm):
        return None
    return LeanLlama(lm, packs, dtype=packs.dtype or torch.float32, kv_dtype=packs.kv_dtype or torch.float32)


class _Layer:
    """One decoder layer's weights, the fused projections packed."""

    def __init__(self, layer: Any, packs: PackedLinears, dtype: torch.dtype):
        attn, mlp = layer.self_attn, layer.mlp
        self.norm1, self.eps1 = layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon
        self.norm2, self.eps2 = layer.post_attention_layernorm.weight, layer.post_attention_layernorm.variance_epsilon
        self.qkv = packs.pack_fused([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight], dtype)
        self.qkv_bias = _cast(_fused_bias([attn.q_proj, attn.k_proj, attn.v_proj]), dtype)
        self.split = (attn.q_proj.out_features, attn.k_proj.out_features, attn.v_proj.out_features)
        self.o, self.o_bias = packs.pack(attn.o_proj.weight, dtype), _cast(_bias(attn.o_proj), dtype)
        self.gate_up = packs.pack_fused([mlp.gate_proj.weight, mlp.up_proj.weight], dtype)
        self.gate_up_bias = _cast(_fused_bias([mlp.gate_proj, mlp.up_proj]), dtype)
        self.inter = mlp.gate_proj.out_features
        self.down, self.down_bias = packs.pack(mlp.down_proj.weight, dtype), _cast(_bias(mlp.down_proj), dtype)
        self.scaling = attn.scaling


def _cast(t: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """``t`` in ``dtype`` (the identity where it already is)."""
    return None if t is None else t.to(dtype)


def _bias(m: torch.nn.Linear) -> torch.Tensor | None:
    return None if m.bias is None else m.bias.detach()


def _fused_bias(ms: list[torch.nn.Linear]) -> torch.Tensor | None:
    if all(m.bias is None for m in ms):
        return None
    return torch.cat([m.bias.detach() if m.bias is not None else m.weight.new_zeros(m.out_features) for m in ms])


def _linear(x: torch.Tensor, pack: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, pack, bias, "none", [], "")


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``LlamaRMSNorm`` on fp32 activations."""
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LeanLlama:
    """``lm``'s body as plain tensor code over packed weights, for one ``sample`` call (see the module docstring)."""

    def __init__(
        self,
        lm: Any,
        packs: PackedLinears,
        dtype: torch.dtype = torch.float32,
        kv_dtype: torch.dtype = torch.float32,
    ):
        """``dtype``: what the projections' packs hold and their GEMMs compute in; ``kv_dtype``: what the cache
        stores (the attention computes in it). Both fp32: the model's own function (see the module docstring)."""
        body = getattr(lm, lm.base_model_prefix)
        self.dtype, self.kv_dtype = dtype, kv_dtype
        cfg = lm.config
        self.embed = body.embed_tokens.weight
        self.rotary = body.rotary_emb
        self.final, self.final_eps = body.norm.weight, body.norm.variance_epsilon
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.layers = [_Layer(layer, packs, dtype) for layer in body.layers[: cfg.num_hidden_layers]]

    @torch.inference_mode()
    def hidden(
        self,
        cache: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        last_only: bool = False,
    ) -> torch.Tensor:
        """The body's final hidden states (rows, T, hidden) for ``input_ids`` (rows, T) after what ``cache`` holds,
        appending their keys and values to it; ``attention_mask`` (rows, cached + T) marks the real positions
        (None: all), ``position_ids`` (rows, T) their rotary positions (None: counting on from the cache).
        ``last_only``: the final norm of the last position only, (rows, 1, hidden)."""
        rows, t = input_ids.shape
        past = cache.layers[0].get_seq_length() if cache.layers and cache.layers[0].is_initialized else 0
        if position_ids is None:
            position_ids = torch.arange(past, past + t, device=input_ids.device).expand(rows, t)
        x = F.embedding(input_ids, self.embed)
        cos, sin = self.rotary(x, position_ids=position_ids)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        mask = self._mask(attention_mask, rows, past, t, x.device)
        dt, kv = self.dtype, self.kv_dtype  # fp32, fp32: every .to below returns its input
        for i, layer in enumerate(self.layers):
            h = _rms(x, layer.norm1, layer.eps1)
            q, k, v = _linear(h.to(dt), layer.qkv, layer.qkv_bias).split(layer.split, dim=-1)
            q = q.view(rows, t, self.heads, self.head_dim).transpose(1, 2)
            k = k.view(rows, t, self.kv_heads, self.head_dim).transpose(1, 2)
            v = v.view(rows, t, self.kv_heads, self.head_dim).transpose(1, 2)
            q = q * cos + _rotate_half(q) * sin  # fp32: the rotary tables are
            k = k * cos + _rotate_half(k) * sin
            keys, values = cache.layers[i].update(k.to(kv), v.to(kv))
            a = F.scaled_dot_product_attention(
                q.to(kv), keys, values, attn_mask=mask, scale=layer.scaling, enable_gqa=self.kv_heads != self.heads
            )
            x = x + _linear(a.transpose(1, 2).reshape(rows, t, -1).to(dt), layer.o, layer.o_bias)
            h = _rms(x, layer.norm2, layer.eps2)
            gate, up = _linear(h.to(dt), layer.gate_up, layer.gate_up_bias).split(layer.inter, dim=-1)
            x = x + _linear(F.silu(gate) * up, layer.down, layer.down_bias)
        if last_only:
            x = x[:, -1:]
        return _rms(x, self.final, self.final_eps)

    @staticmethod
    def _mask(
        attention_mask: torch.Tensor | None, rows: int, past: int, t: int, device: torch.device
    ) -> torch.Tensor | None:
        """(rows, 1, T, past + T) booleans: query i sees key j where j is real and not after it. A query always sees
        itself, so a padding position (whose output nothing reads) never has an empty row, which would give NaN
        keys and values to the layers above it."""
        if attention_mask is None and t == 1:
            return None
        total = past + t
        query_at = torch.arange(past, total, device=device)
        causal = torch.arange(total, device=device)[None, :] <= query_at[:, None]  # (T, total)
        if attention_mask is None:
            return causal[None, None]
        seen = causal[None] & attention_mask[:, None, :total].bool()
        seen |= torch.arange(total, device=device)[None, None, :] == query_at[None, :, None]
        return seen[:, None]


def check_cache(cache: Any) -> bool:
    """Whether every layer of ``cache`` is a ``PreallocatedLayer`` (the layout ``LeanLlama`` writes)."""
    return all(isinstance(layer, PreallocatedLayer) for layer in cache.layers)
