"""Token log-probs of the generated tokens under a causal LM: the one forward the update, the entropy pass and the
reference policy share.

Log-probs are computed only where they are needed: the transformer body runs on the whole sequence, but the
vocabulary projection and ``log_softmax`` run only on the positions that predict a generated token, fused and in
row chunks (``loss.selected_logprobs``: no tokens x vocab tensor is kept for backward), always in fp32. How the
forward runs on a sharded model (the FSDP2 root's registered method) is ``trainers/engine/update.logprobs_of``.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from rubricgym.agents.kvcache import cache_kwargs
from rubricgym.trainers.algo.loss import selected_logprobs


def _body_and_head(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module]:
    body = getattr(model, getattr(model, "base_model_prefix", "model"), None)
    get_head = getattr(model, "get_output_embeddings", None)  # a transformers method, not an nn.Module one
    head = get_head() if get_head is not None else None
    if body is None or head is None:
        raise TypeError(f"{type(model).__name__} is not a causal LM with a base model and an output embedding")
    return body, head


def generated_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    loss_mask: torch.Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
    entropy_grad: bool = False,
    share_prefix: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs (B, T) of ``input_ids`` under ``model`` at ``temperature``, where ``loss_mask`` is 1.

    Entry ``[b, t]`` is log p(token t | tokens < t); positions off the mask (and t = 0) are 0. With
    ``with_entropy`` the per-token entropy of the same distribution comes back too, differentiable only with
    ``entropy_grad`` (a logged-only entropy keeps no vocabulary-sized tensors alive for backward). With
    ``share_prefix`` the rows' common prompt prefix is run once (``shared_prefix_len``) and its KV cache extended
    by each row (not with gradient checkpointing, which disables the cache).
    """
    body, head = _body_and_head(model)
    select = loss_mask[:, 1:] > 0
    prefix = shared_prefix_len(input_ids, attention_mask, loss_mask) if share_prefix else 0
    checkpointing = getattr(model, "is_activation_checkpointing", None)
    if checkpointing is None:
        checkpointing = getattr(model, "is_gradient_checkpointing", False)
    if prefix and not checkpointing:
        # the rows' common prompt runs once; its keys/values (still in the autograd graph) serve every row
        cache = DynamicCache(config=getattr(model, "config", None))
        body(input_ids=input_ids[:1, :prefix], **cache_kwargs(body, cache))
        cache.batch_repeat_interleave(input_ids.shape[0])
        pos = torch.arange(prefix, input_ids.shape[1], device=input_ids.device).expand(input_ids.shape[0], -1)
        hidden = body(
            input_ids=input_ids[:, prefix:],
            attention_mask=attention_mask,
            position_ids=pos,
            **cache_kwargs(body, cache),
        ).last_hidden_state
        h = hidden[:, :-1][select[:, prefix:]]
    else:
        hidden = body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        h = hidden[:, :-1][select]
    targets = input_ids[:, 1:][select]
    entropy = None
    if (with_entropy and entropy_grad and torch.is_grad_enabled()) or getattr(head, "bias", None) is not None:
        with torch.autocast(h.device.type, enabled=False):  # the LM head and log-softmax stay fp32
            logp_all = (head(h.float()) / temperature).log_softmax(-1)
        picked = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        ent = -(logp_all.exp() * logp_all).sum(-1) if with_entropy else None
    else:  # fused, chunked: no (tokens x vocab) tensor is kept for backward
        weight = head.weight
        assert isinstance(weight, torch.Tensor)
        picked, ent = selected_logprobs(h, weight, targets, temperature, with_entropy)
    out = torch.zeros(input_ids.shape, dtype=picked.dtype, device=picked.device)
    out[:, 1:][select] = picked
    if ent is not None:
        entropy = torch.zeros(input_ids.shape, dtype=ent.dtype, device=ent.device)
        entropy[:, 1:][select] = ent
    return out, entropy


def shared_prefix_len(input_ids: torch.Tensor, attention_mask: torch.Tensor, loss_mask: torch.Tensor) -> int:
    """Tokens every row shares from the start, unpadded and untrained, short enough that no position inside it
    predicts a trained token (so the prefix needs no LM head); 0 for a single row."""
    if input_ids.shape[0] < 2:
        return 0
    same = (input_ids == input_ids[:1]).all(0) & (attention_mask > 0).all(0) & ~(loss_mask > 0).any(0)
    return max(int(same.long().cumprod(0).sum()) - 1, 0)
