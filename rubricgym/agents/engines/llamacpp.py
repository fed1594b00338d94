"""Sampling with llama.cpp (``llama-cpp-python``) from a GGUF export of the trainer's policy.

``LlamaCppSampler(policy)`` exports ``policy``'s fp32 weights to GGUF (``gguf_export``) and serves its ``agent``,
a ``LocalAgent`` with the policy's settings whose generations run in llama.cpp. ``sync()`` re-exports after an
update and reloads (the per-step weight-sync cost).

llama.cpp computes the logits; sampling stays ours: the same temperature / top-p processing and inverse-CDF draw
as the PyTorch sampler (``agents/decode.py``), seeded the same way, so each recorded log-prob is that of the
distribution the token was drawn from (the trainer's ``mu``) and differs from the fp32 policy's only by
llama.cpp's arithmetic and the export's weight type.

Multi-turn episodes: llama-cpp-python runs one sequence per context, so the sampler keeps a pool of up to
``contexts`` contexts over one mmap-shared model file and sends each prompt to the context whose cached tokens
share the longest prefix with it (the next turn of an episode finds its own history there and prefills only what
the env added). Rows of a batch run one after another.

Install: there is no wheel on PyPI; build it from source (see ``docs/guides/rollout-speed.md`` for the CMake flags
this class of CPU needs: the default build's AMX path segfaults here).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rubricgym.agents.decode import Sampled, _process, draw
from rubricgym.agents.engines.gguf_export import export_gguf, tokenizer_fields
from rubricgym.agents.local import GenParams, LocalAgent, Turn, _as_list

INSTALL_HINT = (
    'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF '
    '-DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF" '
    ".venv/bin/pip install llama-cpp-python==0.3.36"
)


def _llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as e:
        raise ImportError(f"llama-cpp-python is not installed (no wheel on PyPI; build it): {INSTALL_HINT}") from e
    return llama_cpp


def _common(a: Any, b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class _Context:
    """One llama.cpp context and the tokens its cache holds."""

    def __init__(self, path: Path, n_ctx: int, threads: int):
        llama_cpp = _llama_cpp()
        self.llm = llama_cpp.Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_batch=512,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )
        self.n_vocab = self.llm.n_vocab()

    @property
    def tokens(self) -> list[int]:
        return list(self.llm.input_ids[: self.llm.n_tokens])

    def feed(self, tokens: list[int]) -> torch.Tensor:
        """Append ``tokens`` to the cached sequence; the fp32 logits after the last one."""
        self.llm.eval(tokens)
        logits = np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(self.n_vocab,))
        return torch.from_numpy(logits.copy()).unsqueeze(0)

    def rewind(self, n: int) -> None:
        """Keep only the first ``n`` cached positions."""
        self.llm.n_tokens = n  # ``eval`` drops cache entries from position n on before it decodes


class LlamaCppAgent(LocalAgent):
    """A ``LocalAgent`` whose batches run in llama.cpp (made by ``LlamaCppSampler``; see the module docstring)."""

    name = "local-llamacpp"
    engine: LlamaCppSampler

    def _generate_batch(self, prompts: list[list[int]], params: GenParams, seed: int | None) -> list[Turn]:
        tok = self._shared.tokenizer
        eos = set(_as_list(self._shared.model.generation_config.eos_token_id)) | {tok.eos_token_id}
        longest = max((len(s) for s in self.stop), default=0)
        gen = None if seed is None else torch.Generator().manual_seed(seed)
        turns = []
        with self._shared.lock:
            for prompt in prompts:
                row = self.engine.sample_one(prompt, params, gen, eos, longest, self.stop, tok)
                text = tok.decode([t for t in row.tokens if t not in eos], skip_special_tokens=True)
                turns.append(Turn(list(prompt), row.tokens, row.logprobs, text=text, greedy=params.temperature == 0))
        return turns


class LlamaCppSampler:
    """llama.cpp sampling of ``policy``'s current weights (``agent``), exported as GGUF ``dtype``."""

    def __init__(
        self,
        policy: LocalAgent,
        *,
        dtype: str = "f16",
        contexts: int = 16,
        n_ctx: int = 4096,
        threads: int | None = None,
        workdir: Path | None = None,
        tokenizer_from: Path | None = None,
    ):
        """``tokenizer_from``: a GGUF of the policy's vocabulary (default: the embedded SmolLM2's)."""
        _llama_cpp()
        if contexts < 1 or n_ctx < 16:
            raise ValueError(f"need contexts >= 1 and n_ctx >= 16; got {contexts}, {n_ctx}")
        self.policy, self.dtype, self.n_ctx, self.max_contexts = policy, dtype, n_ctx, contexts
        self.threads = threads or policy.threads or torch.get_num_threads()
        self.tokenizer = tokenizer_fields(tokenizer_from)
        self._own_dir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="rubricgym-llamacpp-"))
        self.path = self.workdir / "policy.gguf"
        self.contexts: list[_Context] = []
        self.version = 0
        self.export_s = export_gguf(policy.lm, self.path, dtype=dtype, tokenizer=self.tokenizer)
        agent = policy.with_model(policy.lm)  # the fp32 model: only its generation config is read
        agent.__class__ = LlamaCppAgent
        assert isinstance(agent, LlamaCppAgent)
        agent.engine = self
        self.agent = agent

    def sync(self) -> float:
        """Export the policy's current weights and drop the contexts of the old ones; the seconds it took."""
        t0 = time.perf_counter()
        with self.agent._shared.lock:
            self.contexts.clear()  # frees the old model before the new file replaces it
            self.export_s = export_gguf(self.policy.lm, self.path, dtype=self.dtype, tokenizer=self.tokenizer)
        self.version += 1
        return time.perf_counter() - t0

    def _context_for(self, prompt: list[int]) -> tuple[_Context, int]:
        best, shared = None, -1
        for c in self.contexts:
            n = _common(c.tokens, prompt)
            if n > shared:
                best, shared = c, n
        if best is None or (shared < len(prompt) // 2 and len(self.contexts) < self.max_contexts):
            best, shared = _Context(self.path, self.n_ctx, self.threads), 0
            self.contexts.append(best)
        self.contexts.remove(best)
        self.contexts.append(best)  # most recently used last
        return best, shared

    def sample_one(
        self,
        prompt: list[int],
        params: GenParams,
        gen: torch.Generator | None,
        eos: set[int],
        longest: int,
        stop: tuple[str, ...],
        tok: Any,
    ) -> Sampled:
        """One completion of ``prompt``, up to an end token, a stop string or ``params.max_new_tokens``."""
        if len(prompt) + params.max_new_tokens > self.n_ctx:
            raise ValueError(
                f"prompt of {len(prompt)} tokens + {params.max_new_tokens} new exceeds the llama.cpp context of "
                f"{self.n_ctx}: make LlamaCppSampler(n_ctx=...) larger"
            )
        ctx, shared = self._context_for(prompt)
        shared = min(shared, len(prompt) - 1)  # at least one token to feed for fresh logits
        ctx.rewind(shared)
        logits = ctx.feed(prompt[shared:])
        out = Sampled([], [])
        tail = ""
        for _ in range(params.max_new_tokens):
            logp = _process(logits, params.temperature, params.top_p)
            t = draw(logp, gen) if params.temperature > 0 else logp.argmax(-1, keepdim=True)
            token = int(t)
            out.tokens.append(token)
            out.logprobs.append(float(logp[0, token]))
            if token in eos:
                break
            if stop:
                tail = (tail + tok.decode([token]))[-(longest + 32) :]
                if any(s in tail for s in stop):
                    break
            if len(out.tokens) < params.max_new_tokens:
                logits = ctx.feed([token])
        return out

    def close(self) -> None:
        """Free the contexts and the exported file (if this sampler made its directory)."""
        self.contexts.clear()
        if self._own_dir:
            with contextlib.suppress(OSError):
                shutil.rmtree(self.workdir)
