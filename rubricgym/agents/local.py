"""``LocalAgent``: a transformers causal LM on the CPU (by default the embedded SmolLM2-135M-Instruct).

Concurrent ``act`` calls (several episodes of a group in flight) are micro-batched into one ``decode.sample``
call, several times the throughput of one-at-a-time on CPU; the batch's common prompt prefix and each distinct
prompt are prefilled once, and finished rows leave the batch (``rubricgym/agents/decode.py``). Generation stops
at ``stop`` strings (default: the end of a tool call), so the model does not ramble past its action. Each episode
view records a ``Turn`` per call (prompt ids, completion ids, sampling log-probs) so the trainer can score exactly
what was generated. A seeded agent seeds each batch from its first request, so samples are reproducible only with
``max_batch=1`` or identical batches. ``bf16_autocast`` runs an fp32 model's generation under
``torch.autocast(bfloat16)`` (faster on CPUs with AVX512-BF16/AMX; sampled log-probs are then bf16-accurate).
``packed_weights`` (default on) samples on CPU with oneDNN-prepacked copies of the linear weights, same
precision, ~2x faster decoding (``rubricgym/agents/packed.py``); ``release_packed`` frees them.
``kv_reuse_tokens`` (default 0: off) keeps up to that many positions of finished rows' keys and values, so the
next turn of an episode prefills only its new tokens (``rubricgym/agents/kvreuse.py``); ``release_packed`` drops
them too, since an update makes them stale.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from rubricgym.agents.models import DEFAULT_MODEL, model_path
from rubricgym.core.agent import BaseAgent
from rubricgym.core.types import Message, Task, ToolSpec


@dataclass
class Turn:
    """One generation: the exact tokens the policy saw and produced, and its sampling log-probs."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    text: str
    greedy: bool = False
    """Decoded at temperature 0: ``logprobs`` are then the temperature-1 log-probs of the argmax tokens, not
    the (deterministic) behaviour policy's, so importance corrections treat them as unknown."""
    plain_prompt_ids: list[int] | None = None
    """For a turn sampled with a hint in its prompt (the trainer's guidance): the prompt without the hint, the one
    the policy faces unguided (``None`` for an unguided turn)."""
    version: int = 0
    """The policy version that generated it (the number of updates behind its weights; set by the trainer)."""


@dataclass(frozen=True)
class GenParams:
    temperature: float
    top_p: float
    max_new_tokens: int


@dataclass
class _Request:
    prompt_ids: list[int]
    params: GenParams
    seed: int | None
    future: asyncio.Future[Turn]


@dataclass
class _Shared:
    """The loaded model and the batching queue, shared by an agent and its episode views."""

    model: Any = None
    tokenizer: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    pending: list[_Request] = field(default_factory=list)
    worker: asyncio.Task[None] | None = None
    packed: Any = None  # PackedLinears, made with the model (torch is imported lazily)
    kv: Any = None  # KVStore when kv_reuse_tokens > 0, made with the model


def chat_dicts(messages: list[Message]) -> list[dict[str, str]]:
    """Messages as plain ``{"role", "content"}`` dicts for a chat template (tool calls rendered as text)."""
    out = []
    for m in messages:
        content = m.content or ""
        if m.tool_calls and not content:
            content = "".join(
                "<tool_call>" + json.dumps({"name": c.name, "arguments": c.arguments}) + "</tool_call>"
                for c in m.tool_calls
            )
        out.append({"role": m.role, "content": content})
    return out


class LocalAgent(BaseAgent):
    """A local Hugging Face causal LM as an agent.

    ``model`` is what every ``Agent`` calls its model: the name (a known name or a model directory), recorded on
    each trajectory; ``lm`` is the loaded ``transformers`` network and ``tokenizer`` its tokenizer.
    """

    name = "local"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        temperature: float = 0.7,
        top_p: float = 1.0,
        max_new_tokens: int = 256,
        seed: int | None = None,
        dtype: str = "float32",
        max_batch: int = 8,
        stop: tuple[str, ...] = ("</tool_call>",),
        threads: int | None = None,
        bf16_autocast: bool = False,
        share_prefix: bool = True,
        device: str = "cpu",
        packed_weights: bool = True,
        response_prefix: str = "",
        kv_reuse_tokens: int = 0,
    ):
        if temperature < 0 or not 0 < top_p <= 1 or max_new_tokens < 1 or max_batch < 1 or kv_reuse_tokens < 0:
            raise ValueError(
                "need temperature >= 0, 0 < top_p <= 1, max_new_tokens >= 1, max_batch >= 1 and kv_reuse_tokens "
                f">= 0; got {temperature}, {top_p}, {max_new_tokens}, {max_batch}, {kv_reuse_tokens}"
            )
        self.model = model
        self.params = GenParams(temperature, top_p, max_new_tokens)
        self.seed = seed
        self.dtype = dtype
        self.max_batch = max_batch
        self.stop = tuple(stop)
        self.threads = threads
        self.bf16_autocast = bf16_autocast
        self.share_prefix = share_prefix
        self.device = device
        self.packed_weights = packed_weights
        self.response_prefix = response_prefix
        self.kv_reuse_tokens = kv_reuse_tokens
        self.turns: list[Turn] = []
        self._shared = _Shared()

    # ---- model ------------------------------------------------------------------------------------------

    def load(self) -> LocalAgent:
        """Load the model and tokenizer now (otherwise the first ``act`` does)."""
        if self._shared.model is not None:  # no lock: a generation in flight holds it
            return self
        with self._shared.lock:
            if self._shared.model is None:
                import torch
                import transformers
                from transformers import AutoModelForCausalLM, AutoTokenizer

                transformers.logging.set_verbosity_error()
                transformers.utils.logging.disable_progress_bar()
                if self.threads:
                    torch.set_num_threads(self.threads)
                path = model_path(self.model or DEFAULT_MODEL)
                tok = AutoTokenizer.from_pretrained(path)
                tok.padding_side = "left"
                if tok.pad_token_id is None:
                    tok.pad_token = tok.eos_token
                lm: Any = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, self.dtype))
                device = self.device
                if device == "auto":
                    device = "cuda" if torch.cuda.is_available() else "cpu"
                lm.to(device).eval()
                from rubricgym.agents.packed import PackedLinears

                self._shared.packed = PackedLinears()
                self._shared.kv = self._kv_store()
                self._shared.tokenizer, self._shared.model = tok, lm
        return self

    def _kv_store(self) -> Any:
        from rubricgym.agents.kvreuse import KVStore

        return KVStore(self.kv_reuse_tokens) if self.kv_reuse_tokens else None

    def with_model(self, lm: Any) -> LocalAgent:
        """An agent with these settings that samples from ``lm`` (a copy of this one's network, say) with its own
        batching queue, lock and packed weights; it shares the tokenizer."""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.turns = []
        other._shared = _Shared(model=lm, tokenizer=self.tokenizer)
        from rubricgym.agents.packed import PackedLinears

        other._shared.packed = PackedLinears()
        other._shared.kv = other._kv_store()
        return other

    @property
    def lm(self) -> Any:
        """The loaded ``transformers`` causal LM (the trainer updates its weights in place)."""
        return self.load()._shared.model

    @property
    def tokenizer(self) -> Any:
        return self.load()._shared.tokenizer

    def forget_kv(self) -> None:
        """Drop the stored keys and values (``kv_reuse_tokens``): the trainer starts every collection from none,
        so a step's rollouts never depend on what an earlier collection left (a resumed run replays exactly)."""
        if self._shared.kv is not None:
            self._shared.kv.clear()

    def release_packed(self) -> None:
        """Free the sampler's packed weights and stored keys and values: an update makes them stale, and needs the
        memory meanwhile."""
        if self._shared.packed is not None:
            self._shared.packed.clear()
        self.forget_kv()

    def prompt_ids(self, messages: list[Message]) -> list[int]:
        """The chat template applied to ``messages`` with the assistant turn opened."""
        ids = self.tokenizer.apply_chat_template(chat_dicts(messages), add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        return list(ids)

    def render(self, messages: list[Message]) -> list[int]:
        """The prompt ``act`` sends for ``messages``: the chat template, then the ``response_prefix`` tokens."""
        prompt = self.prompt_ids(messages)
        if self.response_prefix:
            prompt += list(self.tokenizer.encode(self.response_prefix, add_special_tokens=False))
        return prompt

    # ---- agent ------------------------------------------------------------------------------------------

    def episode(self, task: Task, seed: int | None) -> LocalAgent:
        view = object.__new__(type(self))
        view.__dict__.update(self.__dict__)
        view.turns = []
        view.seed = seed if seed is not None else self.seed
        return view

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        """The next action; a ``response_prefix`` (e.g. ``<tool_call>{"name": "``) prefills the turn: it is part
        of the prompt (never trained on) and of the action text the env sees."""
        turn = await self.generate(self.render(messages))
        if self.response_prefix:
            turn.text = self.response_prefix + turn.text
        self.turns.append(turn)
        return turn.text

    async def generate(self, prompt_ids: list[int]) -> Turn:
        """Queue one prompt; concurrent calls are batched together."""
        self.load()
        loop = asyncio.get_running_loop()
        seed = None if self.seed is None else self.seed * 1000 + len(self.turns)
        req = _Request(prompt_ids, self.params, seed, loop.create_future())
        shared = self._shared
        shared.pending.append(req)
        if shared.worker is None or shared.worker.done():
            shared.worker = loop.create_task(self._drain())
        return await req.future

    async def _drain(self) -> None:
        shared = self._shared
        await asyncio.sleep(0)  # let the other episodes of this tick queue their prompts
        while shared.pending:
            head = shared.pending[0]
            batch = [r for r in shared.pending if r.params == head.params][: self.max_batch]
            for r in batch:
                shared.pending.remove(r)
            try:
                turns = await asyncio.to_thread(
                    self._generate_batch, [r.prompt_ids for r in batch], head.params, head.seed
                )
            except Exception as e:
                for r in batch:
                    if not r.future.done():
                        r.future.set_exception(e)
                continue
            for r, t in zip(batch, turns, strict=True):
                if not r.future.done():
                    r.future.set_result(t)

    def _generate_batch(self, prompts: list[list[int]], params: GenParams, seed: int | None) -> list[Turn]:
        import torch

        from rubricgym.agents.decode import sample

        shared = self._shared
        tok, lm = shared.tokenizer, shared.model
        eos = set(_as_list(lm.generation_config.eos_token_id)) | {tok.eos_token_id}
        tails = [""] * len(prompts)
        longest = max((len(s) for s in self.stop), default=0)

        def is_end(row: int, tokens: list[int]) -> bool:
            """Up to the first end-of-turn token or completed stop string (incremental per-token decode)."""
            if tokens[-1] in eos:
                return True
            if not self.stop:
                return False
            tails[row] = (tails[row] + tok.decode([tokens[-1]]))[-(longest + 32) :]
            return any(s in tails[row] for s in self.stop)

        autocast = (
            torch.autocast(lm.device.type, dtype=torch.bfloat16) if self.bf16_autocast else contextlib.nullcontext()
        )
        with shared.lock, autocast:
            gen = None if seed is None else torch.Generator(lm.device).manual_seed(seed)
            rows = sample(
                lm,
                prompts,
                max_new_tokens=params.max_new_tokens,
                temperature=params.temperature,
                top_p=params.top_p,
                pad_id=tok.pad_token_id,
                is_end=is_end,
                generator=gen,
                share_prefix=self.share_prefix,
                packed=shared.packed if self.packed_weights else None,
                kv_store=shared.kv,
            )
        turns = []
        for prompt, row in zip(prompts, rows, strict=True):
            text = tok.decode([t for t in row.tokens if t not in eos], skip_special_tokens=True)
            turns.append(
                Turn(
                    prompt_ids=list(prompt),
                    completion_ids=row.tokens,
                    logprobs=row.logprobs,
                    text=text,
                    greedy=params.temperature == 0,
                )
            )
        return turns


def _as_list(x: Any) -> list[int]:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [int(x)]
