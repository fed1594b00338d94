"""Batched sampling for a Hugging Face causal LM with a shared-prefix KV cache and early-exit rows.

Why not ``model.generate``: a GRPO group is G rollouts of one prompt, and the prompts of a step share the system
prompt and tools. ``sample`` therefore

1. prefills the prompts' **common prefix once** (batch 1, body only: no vocabulary projection),
2. prefills each **distinct suffix once** (left-padded after the prefix, positions kept contiguous per row),
3. expands the cache to one row per request (``index_select``: identical prompts share their prefill), and
4. decodes with the **finished rows dropped** from the batch and cache (``generate`` keeps computing a row that
   hit its end-of-turn token or stop string until the longest row is done), writing each step's keys and values
   in place into a cache sized for the whole sample (``agents/kvcache.py``; ``DynamicCache`` copies itself per
   token), and, with ``packed``, multiplying by oneDNN-prepacked weights (``agents/packed.py``).

Under bf16 autocast only the transformer body runs in bf16: the LM head, the softmax over the vocabulary and the
sampling stay fp32 (fp32 islands; the final RMSNorm already computes in fp32 and the residual stream of an fp32
model stays fp32 under autocast), because bf16 logits (~3 significant digits) flip a small model's close calls.

Each step applies temperature and top-p and records the log-prob of the drawn token under exactly that
distribution (greedy rows: under the temperature-1 distribution), so the trainer gets the sampler's log-probs
without any (steps x batch x vocab) tensor. Only the current (active rows x vocab) logits ever exist.

Those recorded log-probs are the behaviour policy ``mu`` of the trainer's importance weight ``min(pi_old / mu, cap)``
(``engine/update.py``): for a token t drawn at temperature T with top-p, ``log mu(t) = log p_T(t) - log P_T(K)``,
``p_T`` the full-vocabulary softmax of logits / T and ``K`` the kept (nucleus) set, i.e. the distribution is
renormalised over ``K`` (what vLLM calls ``processed_logprobs``). The learner's ``pi_old`` is the full-vocabulary
``log p_T``; at top_p = 1, ``P_T(K) = 1`` and the two are the same distribution.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rubricgym.agents.kvcache import cache_kwargs
from rubricgym.agents.kvreuse import Entry, KVStore
from rubricgym.agents.lean import LeanLlama, check_cache, lean_for
from rubricgym.agents.packed import PackedLinears


@dataclass
class Sampled:
    """One row's generated tokens (up to and including its end token or stop string) and their log-probs under the
    distribution each was drawn from (temperature, top-p renormalised: ``_process``)."""

    tokens: list[int]
    logprobs: list[float]


def common_prefix_len(prompts: Sequence[Sequence[int]]) -> int:
    """Length of the longest prefix every prompt shares."""
    first = prompts[0]
    n = min(len(p) for p in prompts)
    for p in prompts[1:]:
        i = 0
        while i < n and p[i] == first[i]:
            i += 1
        n = i
    return n


def _process(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Temperature and nucleus filtering of (rows, vocab) fp32 logits; returns the log-probs sampled from.

    The nucleus is the smallest prefix of the tokens by descending probability whose mass reaches ``top_p``; its
    tokens get ``log p_T - log(kept mass)`` (renormalised), the others ``-inf``. ``temperature == 0``: the
    temperature-1 log-probs (the argmax is taken from them)."""
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    if temperature > 0 and top_p < 1.0:
        order = logits.argsort(-1, descending=True)
        probs = logits.gather(-1, order).softmax(-1)
        drop_sorted = probs.cumsum(-1) - probs > top_p  # keep the smallest prefix reaching top_p
        logits = logits.masked_fill(torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted), -float("inf"))
    return logits.log_softmax(-1)


def draw(logp: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row from (rows, vocab) log-probs, by inverting the CDF with one uniform per row.

    ``torch.multinomial`` draws an exponential variate per vocabulary entry (49k per row per step, ~9 ms of a
    ~125 ms CPU decode step); the inverse CDF needs a cumulative sum and one uniform per row. Entries of
    probability 0 (top-p filtered) are never drawn: ``searchsorted(right=True)`` lands where the CDF rises."""
    cdf = logp.exp().cumsum(-1)
    u = torch.rand((logp.shape[0], 1), generator=generator, device=logp.device, dtype=cdf.dtype) * cdf[:, -1:]
    return torch.searchsorted(cdf, u, right=True).clamp_(max=logp.shape[-1] - 1)


@torch.inference_mode()
def sample(
    lm: Any,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    temperature: float,
    top_p: float = 1.0,
    pad_id: int = 0,
    is_end: Callable[[int, list[int]], bool],
    generator: torch.Generator | None = None,
    share_prefix: bool = True,
    packed: PackedLinears | None = None,
    kv_store: KVStore | None = None,
    lean: bool = True,
) -> list[Sampled]:
    """Sample a completion for every prompt; ``is_end(row, tokens_so_far)`` says whether row ``row`` is done.

    ``temperature == 0`` decodes greedily. ``share_prefix=False`` prefills every row's whole prompt
    (left-padded, the reference path the shared one is tested against). ``packed`` runs the model's linear layers
    on oneDNN-prepacked weights (CPU only; ``agents/packed.py``). ``kv_store`` starts each row from the stored
    keys and values of the earlier row sharing its longest prefix and stores every finished row
    (``agents/kvreuse.py``); a batch for which that would prefill no fewer positions than prefilling the common
    prefix once is prefilled as without a store.
    """
    from rubricgym.agents.kvcache import preallocated_cache

    head = lm.get_output_embeddings()
    routed = packed.applied(lm, skip=(head,)) if packed is not None else contextlib.nullcontext()
    with routed as packs:  # None where packing is off, unsupported, or would not fit in memory
        n = len(prompts)
        device = next(lm.parameters()).device
        keys = [tuple(p) for p in prompts]
        uniq = list(dict.fromkeys(keys)) if share_prefix else keys
        row_of = torch.tensor([uniq.index(k) for k in keys] if share_prefix else list(range(n)), device=device)
        prefix = common_prefix_len(uniq) if share_prefix else 0
        prefix = min(prefix, min(len(u) for u in uniq) - 1)  # every row keeps >= 1 suffix token to predict from
        if kv_store is not None and not check_cache(preallocated_cache(lm.config, 1)):
            kv_store = None  # sliding-window or linear-attention layers: nothing to store or reuse
        hits = _reuse_plan(kv_store, lm, uniq, prefix)
        span = max((used for _, used in hits), default=prefix)  # positions before the suffixes
        starts = [used for _, used in hits] if hits else [prefix] * len(uniq)
        width = max(len(u) - n for u, n in zip(uniq, starts, strict=True))
        cache = preallocated_cache(lm.config, span + width + max_new_tokens)
        body = getattr(lm, lm.base_model_prefix)
        fast = lean_for(lm, packs) if lean and check_cache(cache) else None
        bias = getattr(head, "bias", None)
        weight, bias = head.weight.float(), None if bias is None else bias.float()  # fp32 island: no-ops on fp32

        def last_logits(**kw: Any) -> torch.Tensor:
            """The body (autocast applies if active), then the LM head in fp32 on the last position only."""
            hidden = _last_hidden(fast, body, cache, **kw)
            with torch.autocast(device.type, enabled=False):
                if packs is not None:  # packed from the weight itself, so the pack follows its version
                    return packs.linear(hidden, head.weight, bias)
                return torch.nn.functional.linear(hidden, weight, bias)

        if hits:
            _load_stored(cache, hits, span)
        elif prefix > 0:
            ids = torch.tensor([list(uniq[0][:prefix])], device=device)
            _last_hidden(fast, body, cache, input_ids=ids)
            if len(uniq) > 1:
                cache.batch_repeat_interleave(len(uniq))
        suffixes = [list(u[n:]) for u, n in zip(uniq, starts, strict=True)]
        pad = [width - len(s) for s in suffixes]
        ids = torch.tensor([[pad_id] * p + s for p, s in zip(pad, suffixes, strict=True)], device=device)
        mask = torch.tensor(
            [
                [0] * (span - n) + [1] * n + [0] * p + [1] * len(s)
                for n, p, s in zip(starts, pad, suffixes, strict=True)
            ],
            device=device,
        )
        pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, span:]
        logits = last_logits(input_ids=ids, attention_mask=mask, position_ids=pos)
        if share_prefix:
            cache.batch_select_indices(row_of)
            logits, mask = logits[row_of], mask[row_of]
        next_pos = mask.sum(-1, keepdim=True)
        active = torch.arange(n, device=device)
        results = [Sampled([], []) for _ in range(n)]
        for _ in range(max_new_tokens):
            logp = _process(logits, temperature, top_p)
            tok = draw(logp, generator) if temperature > 0 else logp.argmax(-1, keepdim=True)
            picked = logp.gather(-1, tok).squeeze(-1).tolist()
            keep = []
            for j, (r, t, lp) in enumerate(zip(active.tolist(), tok.squeeze(-1).tolist(), picked, strict=True)):
                res = results[r]
                res.tokens.append(t)
                res.logprobs.append(lp)
                if not is_end(r, res.tokens):
                    keep.append(j)
            done = not keep or len(results[int(active[0])].tokens) >= max_new_tokens
            if kv_store is not None:
                ended = set(range(len(active))) if done else set(range(len(active))) - set(keep)
                for j in sorted(ended):
                    _store_row(kv_store, cache, prompts, results, int(active[j]), j, mask[j])
            if done:
                break
            if len(keep) < len(active):  # drop the finished rows from the batch and the cache
                idx = torch.tensor(keep, device=device)
                active, tok, mask, next_pos = active[idx], tok[idx], mask[idx], next_pos[idx]
                cache.batch_select_indices(idx)
            mask = torch.cat([mask, mask.new_ones(len(active), 1)], dim=1)
            logits = last_logits(input_ids=tok, attention_mask=mask, position_ids=next_pos)
            next_pos = next_pos + 1
        return results


def _last_hidden(fast: LeanLlama | None, body: Any, cache: Any, **kw: Any) -> torch.Tensor:
    """The body's fp32 hidden state at each row's last position, through ``fast`` where there is one."""
    if fast is not None:
        return fast.hidden(cache, last_only=True, **kw)[:, -1]
    return body(**cache_kwargs(body, cache), **kw).last_hidden_state[:, -1].float()


def _reuse_plan(
    store: KVStore | None, lm: Any, uniq: list[tuple[int, ...]], prefix: int
) -> list[tuple[Entry | None, int]]:
    """Per unique prompt, the stored entry to start from and how many of its positions; ``[]`` without a store or
    where that would prefill no fewer positions than prefilling the prompts' common prefix once."""
    if store is None:
        return []
    store.valid_for(lm)
    hits = [store.lookup(u) for u in uniq]
    if sum(len(u) - n for u, (_, n) in zip(uniq, hits, strict=True)) >= prefix + sum(len(u) - prefix for u in uniq):
        return []  # prefilling the common prefix once costs no more
    store.hits += sum(n > 0 for _, n in hits)
    store.reused_tokens += sum(n for _, n in hits)
    return hits


def _load_stored(cache: Any, hits: list[tuple[Entry | None, int]], span: int) -> None:
    """Fill a fresh cache with each row's stored keys and values, right-aligned in ``span`` positions (row u's
    ``hits[u][1]`` reused positions, zeros masked out before them)."""
    ref = next(e for e, n in hits if e is not None and n > 0)
    for i, layer in enumerate(cache.layers):
        heads, dim = ref.keys[i].shape[0], ref.keys[i].shape[-1]
        k = ref.keys[i].new_zeros((len(hits), heads, span, dim))
        v = ref.values[i].new_zeros((len(hits), heads, span, dim))
        for u, (entry, n) in enumerate(hits):
            if entry is not None and n > 0:
                k[u, :, span - n :] = entry.keys[i][:, :n]
                v[u, :, span - n :] = entry.values[i][:, :n]
        layer.update(k, v)


def _store_row(
    store: KVStore,
    cache: Any,
    prompts: Sequence[Sequence[int]],
    results: list[Sampled],
    row: int,
    j: int,
    mask: torch.Tensor,
) -> None:
    """Store row ``row`` (batch position ``j``): its prompt and completion but the last token, which was never fed."""
    tokens = [*prompts[row], *results[row].tokens[:-1]]
    keep = mask.bool()
    if int(keep.sum()) != len(tokens):
        return  # a layout this function does not know: store nothing rather than keys at the wrong positions
    store.store(
        tokens,
        [layer.keys[j][:, keep] for layer in cache.layers],  # boolean indexing copies: the store owns these
        [layer.values[j][:, keep] for layer in cache.layers],
    )
