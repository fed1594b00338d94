"""Keys and values kept from earlier generations, so a multi-turn episode's next prompt prefills only what is new.

An agent's prompt at turn t+1 is its prompt at turn t, the completion it generated, and the env's reply. Without
reuse the sampler prefills that whole history again every turn: on a 12-turn clinical episode of SmolLM2-135M the
prompt grows by ~200 tokens a turn to ~2,700, and on 2 CPU cores the prefill of the last turns takes 4-5 s of a
~6.5 s turn. ``KVStore`` keeps each finished row's keys and values (prompt plus completion, without the last
token, which was never fed); ``decode.sample`` looks up the stored row sharing the longest token prefix with each
new prompt, starts the row's cache from it and prefills only the rest.

Reused keys and values are the ones a full prefill would compute up to floating-point summation order (they were
computed at the same positions by the same weights, in another batch shape), so a reusing sampler is not bit-equal
to one that recomputes: the trainer's importance weight (``min(pi_old / mu, cap)``) already covers that
difference, as it covers any sampler/learner mismatch. Entries are valid only for the weights and precision that
made them: ``valid_for`` drops them all when a parameter changed in place (its ``_version``) or autocast differs,
and the agent clears the store when the trainer says its weights changed (``LocalAgent.release_packed``).

The store holds at most ``max_tokens`` positions (least recently used rows go first); an entry that a newer entry
extends (the same episode one turn later) is dropped when the newer one is stored.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass
class Entry:
    """One generated row's tokens and, per cache layer, its keys and values ``(kv_heads, len(tokens), head_dim)``."""

    tokens: np.ndarray
    keys: list[torch.Tensor]
    values: list[torch.Tensor]


def shared_len(a: np.ndarray, b: np.ndarray) -> int:
    """The length of the longest common prefix of two token arrays."""
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


def weights_signature(lm: torch.nn.Module) -> tuple[Any, ...]:
    """What the cached keys and values depend on besides the tokens: every parameter's in-place version counter
    and identity, and the autocast state the forward runs under."""
    device = next(lm.parameters()).device.type
    autocast = torch.is_autocast_enabled(device)
    dtype = torch.get_autocast_dtype(device) if autocast else None
    return (sum(p._version for p in lm.parameters()), tuple(id(p) for p in lm.parameters()), autocast, dtype)


class KVStore:
    """Finished rows' keys and values, looked up by longest shared token prefix (see the module docstring)."""

    def __init__(self, max_tokens: int):
        if max_tokens < 1:
            raise ValueError(f"KVStore holds at least 1 token, got max_tokens={max_tokens}")
        self.max_tokens = max_tokens
        self.entries: OrderedDict[int, Entry] = OrderedDict()
        self.held = 0
        self.signature: tuple[Any, ...] | None = None
        self._next = 0
        self.hits = 0
        """Rows started from a stored entry, since the store was made."""
        self.reused_tokens = 0
        """Prompt positions those rows did not prefill."""

    def clear(self) -> None:
        self.entries.clear()
        self.held = 0

    def valid_for(self, lm: torch.nn.Module) -> None:
        """Drop every entry if the weights or the precision changed since they were stored."""
        sig = weights_signature(lm)
        if sig != self.signature:
            self.clear()
            self.signature = sig

    def lookup(self, prompt: Sequence[int]) -> tuple[Entry | None, int]:
        """The entry sharing the longest prefix with ``prompt`` and that length, at most ``len(prompt) - 1`` (the
        sampler needs one prompt token to predict from); ``(None, 0)`` if none shares a token."""
        ids = np.asarray(prompt, dtype=np.int64)
        best: tuple[int, int] | None = None
        for key, entry in self.entries.items():
            n = min(shared_len(entry.tokens, ids), len(ids) - 1)
            if n > 0 and (best is None or n > best[1]):
                best = (key, n)
        if best is None:
            return None, 0
        self.entries.move_to_end(best[0])
        return self.entries[best[0]], best[1]

    def store(self, tokens: Sequence[int], keys: list[torch.Tensor], values: list[torch.Tensor]) -> None:
        """Keep a row (``keys[i]``/``values[i]``: layer i, ``(kv_heads, len(tokens), head_dim)``, owned copies)."""
        ids = np.asarray(tokens, dtype=np.int64)
        if not len(ids) or len(ids) > self.max_tokens:
            return
        extended = [
            k
            for k, e in self.entries.items()
            if len(e.tokens) <= len(ids) and shared_len(e.tokens, ids) == len(e.tokens)
        ]
        for k in extended:
            self._drop(k)
        self.entries[self._next] = Entry(ids, keys, values)
        self._next += 1
        self.held += len(ids)
        while self.held > self.max_tokens:
            self._drop(next(iter(self.entries)))

    def _drop(self, key: int) -> None:
        self.held -= len(self.entries.pop(key).tokens)
