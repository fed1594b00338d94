"""Generation on a vLLM server (server mode), with the policy's new weights pushed after every update.

Rollouts go through vLLM's OpenAI-compatible ``/v1/completions`` with the chat-templated prompt as token ids,
so the trainer gets back exactly the generated token ids and their sampling log-probs
(``return_tokens_as_token_ids``). After each update the learner saves its weights as safetensors and asks the
server to reload them in place (``/collective_rpc`` -> ``reload_weights``, a dev-mode route: a server this
backend starts runs with ``VLLM_SERVER_DEV_MODE=1``), then clears the prefix cache, whose KV entries were
computed with the old weights. Works with the CPU build (``make vllm``) and on GPUs.

Log-probs: each turn records, per token, the log-prob of the distribution vLLM drew it from (temperature, then
top-p renormalised over the kept tokens: vLLM's ``processed_logprobs``), which is the behaviour policy ``mu`` of the
trainer's importance weight ``min(pi_old / mu, cap)``. vLLM's default ``raw_logprobs`` (temperature 1, before top-p)
would bias that weight at any temperature != 1 or top_p < 1 (greedy turns are unaffected: both modes give
their temperature-1 log-probs, which the trainer does not use).
A server this backend starts runs with ``--logprobs-mode processed_logprobs`` (``agents/serve.py``); one given by
``vllm_base_url`` is probed once (``check_processed_logprobs``) and refused if it returns raw log-probs.

Tied embeddings: vLLM's in-place reload only re-processes layers whose weights it loads, and a tied ``lm_head``
loads none (it shares ``embed_tokens``), so on the CPU build, which prepacks every projection for oneDNN, the
logits kept using the *old* embedding matrix after a push. A server this backend starts therefore serves an
untied copy of the model (``untied_model_dir``: ``tie_word_embeddings: false`` and an explicit
``lm_head.weight``), and every push writes ``lm_head.weight`` explicitly.

LoRA (``model.lora``): ``generation.vllm_push`` picks what a push sends. ``merged`` (the default) writes every
projection with its adapter merged in, ``W + (alpha / r) B A``, and reloads them in place as above. ``adapter``
serves the frozen base and sends only the adapter: a server this backend starts runs with ``--enable-lora``
(``--max-lora-rank`` >= r, one adapter at a time) and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``; each push writes the
adapter (``adapter_config.json`` + ``adapter_model.safetensors``, PEFT's format) to a fresh directory, loads it
under a fresh name (``/v1/load_lora_adapter``), unloads the previous one, and completions then name it as their
``model``. vLLM keys its prefix cache by the adapter's name and path, so no stale KV entry is reused.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import httpx
import torch
from safetensors.torch import save_file

from rubricgym.agents.local import LocalAgent, Turn, chat_dicts
from rubricgym.agents.models import DEFAULT_MODEL, model_path
from rubricgym.agents.serve import VLLMServer
from rubricgym.core.types import Message, Task, ToolSpec
from rubricgym.trainers.algo.rollouts import Group
from rubricgym.trainers.config import GenerationConfig
from rubricgym.trainers.engine.lora import ADAPTER_FILE, is_peft, merged_state_dict
from rubricgym.trainers.engine.sampling import EnvOf, ToolLimits, play_groups


def base_state_dict(model: Any) -> dict[str, Any]:
    """A LoRA-adapted model's frozen base weights ``W`` under the base model's key names (no adapters merged)."""
    net = model.get_base_model() if is_peft(model) else model
    return {k.replace(".base_layer.", "."): v for k, v in net.state_dict().items() if ".lora_" not in k}


def untied_state_dict(model: Any, *, merge: bool = True) -> dict[str, Any]:
    """``model``'s weights in bf16 as separate contiguous tensors, ``lm_head.weight`` written out even when tied.
    A LoRA-adapted model's are its merged weights ``W + (alpha / r) B A`` under the base model's key names
    (``trainers/engine/lora.py``): the server runs the plain base architecture; ``merge=False``: its base weights."""
    state = merged_state_dict(model) if merge else base_state_dict(model)
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is not None:
        state.setdefault("lm_head.weight", head.weight)
    out = {}
    seen: set[int] = set()
    for name, tensor in state.items():
        t = tensor.detach()
        if t.dtype == torch.float32:
            t = t.to(torch.bfloat16)  # already a tensor of its own
        elif t.data_ptr() in seen:
            t = t.clone()
        seen.add(tensor.data_ptr())
        out[name] = t.contiguous()
    return out


def untied_model_dir(model: Any, src: Path, dest: Path, *, merge: bool = True) -> Path:
    """A copy of the model directory ``src`` in ``dest`` whose ``lm_head`` is its own (untied) weight.

    Tokenizer and generation files are copied; ``config.json`` gets ``tie_word_embeddings: false``; the weights
    are ``model``'s current ones (bf16), so the server starts from exactly the policy being trained (``merge=False``:
    a LoRA-adapted model's base weights, for a server that applies the adapter itself).
    """
    dest.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and not f.name.endswith((".safetensors", ".bin", ".safetensors.index.json")):
            shutil.copy2(f, dest / f.name)
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    config["tie_word_embeddings"] = False
    config["torch_dtype"] = config["dtype"] = "bfloat16"
    (dest / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    save_file(untied_state_dict(model, merge=merge), str(dest / "model.safetensors"), metadata={"format": "pt"})
    return dest


def adapter_config(model: Any) -> Any:
    """The PEFT ``LoraConfig`` of ``model``'s adapter (a ``PeftModel``, or the network PEFT injected it into)."""
    net = model.get_base_model() if is_peft(model) else model
    config = getattr(net, "peft_config", {}).get("default")
    if config is None:
        raise ValueError("generation.vllm_push 'adapter' needs a policy with LoRA adapters: set model.lora")
    return config


def save_adapter_dir(model: Any, path: Path) -> Path:
    """``model``'s adapter in ``path`` as ``PeftModel.save_pretrained`` writes it (``adapter_config.json`` and
    ``adapter_model.safetensors`` with ``base_model.model.`` keys), from the PEFT-injected network itself: the
    trainer pushes that network, not the ``PeftModel`` around it."""
    from peft import get_peft_model_state_dict

    net = model.get_base_model() if is_peft(model) else model
    config = adapter_config(net)
    state = get_peft_model_state_dict(net, adapter_name="default", save_embedding_layers=False)
    path.mkdir(parents=True)
    weights = {f"base_model.model.{k}": v.detach().contiguous() for k, v in state.items()}
    save_file(weights, str(path / ADAPTER_FILE), metadata={"format": "pt"})
    config.save_pretrained(str(path))
    return path


class VLLMEpisode:
    """One episode sampled from a vLLM server; records each turn's token ids and log-probs."""

    def __init__(self, backend: VLLMBackend, temperature: float, seed: int | None = None):
        self.backend, self.temperature, self.seed = backend, temperature, seed
        self.turns: list[Turn] = []

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        b = self.backend
        prompt = b.render(messages)
        seed = None if self.seed is None else self.seed * 1000 + len(self.turns)
        turn = await b.complete(prompt, self.temperature, seed)
        turn.text = b.prefix + turn.text
        self.turns.append(turn)
        return turn.text


class VLLMBackend:
    """A ``RolloutBackend`` over a vLLM OpenAI-compatible server (and the ``Recorder`` its episodes come from)."""

    name = "policy-vllm"

    def __init__(
        self,
        base_url: str,
        model: str,
        tokenizer: Any,
        env_of: EnvOf,
        *,
        temperature: float,
        top_p: float,
        max_new_tokens: int,
        prefix: str = "",
        server: Any = None,
        sync_weights: bool = True,
        push: Literal["merged", "adapter"] = "merged",
    ):
        self.base_url = base_url.rstrip("/")
        self.root = self.base_url.removesuffix("/v1")
        self.model, self.tokenizer, self.env_of = model, tokenizer, env_of
        self.temperature, self.top_p, self.max_new_tokens = temperature, top_p, max_new_tokens
        self.prefix = prefix
        self.prefix_ids = list(tokenizer.encode(prefix, add_special_tokens=False)) if prefix else []
        self.server, self.sync_weights, self.push = server, sync_weights, push
        self.base_model = model  # the served base; ``model`` names the newest adapter after an adapter push
        self.weights_dir = Path(tempfile.mkdtemp(prefix="rubricgym-vllm-weights-"))
        self.adapter_version = 0
        self.adapter_dir: Path | None = None
        self.serve_dir: Path | None = None  # the untied copy a server we started serves
        self.limits: ToolLimits | None = None  # env.tool_timeout_s / max_concurrent_tools for its episodes

    @classmethod
    def for_policy(
        cls,
        policy: LocalAgent,
        g: GenerationConfig,
        env_of: EnvOf,
        limits: ToolLimits | None = None,
        *,
        dtype: str = "bfloat16",
    ) -> VLLMBackend:
        """Connect to ``g.vllm_base_url``, or start a dev-mode ``VLLMServer`` for the policy's model (in ``dtype``;
        with ``--enable-lora`` under ``vllm_push: adapter``). An adapter push loads the policy's adapter first, so
        the served policy is the learner's from the start."""
        server, serve_dir = None, None
        name = policy.model or DEFAULT_MODEL
        adapter = g.vllm_push == "adapter"
        rank = adapter_config(policy.lm).r if adapter else None
        if g.vllm_base_url:
            base_url, served = g.vllm_base_url, name
        else:
            os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # the weight-reload route; inherited by the server
            serve_dir = Path(tempfile.mkdtemp(prefix="rubricgym-vllm-serve-"))
            untied_model_dir(policy.lm, model_path(name), serve_dir, merge=not adapter)
            try:
                server = VLLMServer(str(serve_dir), served_name=name, dtype=dtype, lora_rank=rank).start()
            except BaseException:
                shutil.rmtree(serve_dir, ignore_errors=True)
                raise
            base_url, served = server.base_url, server.model
        backend = cls(
            base_url,
            served,
            policy.tokenizer,
            env_of,
            temperature=g.temperature,
            top_p=g.top_p,
            max_new_tokens=g.max_new_tokens,
            prefix=g.response_prefix,
            server=server,
            sync_weights=g.vllm_sync_weights,
            push=g.vllm_push,
        )
        backend.serve_dir = serve_dir
        backend.limits = limits
        try:
            if adapter:
                backend.load_adapter(policy.lm)
            backend.check_processed_logprobs()
        except BaseException:
            backend.close()
            raise
        return backend

    def request_body(
        self, prompt_ids: list[int], temperature: float, seed: int | None, *, top_p: float | None = None
    ) -> dict[str, Any]:
        """The ``/v1/completions`` request for one turn: token ids in, token ids and the sampled tokens'
        (processed) log-probs out."""
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": prompt_ids,
            "max_tokens": self.max_new_tokens,
            "temperature": temperature,
            "top_p": (self.top_p if top_p is None else top_p) if temperature > 0 else 1.0,
            "logprobs": 0,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
            "include_stop_str_in_output": True,
        }
        if seed is not None:
            body["seed"] = seed
        return body

    async def complete(self, prompt_ids: list[int], temperature: float, seed: int | None) -> Turn:
        async with httpx.AsyncClient(timeout=600.0) as client:
            r = await client.post(f"{self.base_url}/completions", json=self.request_body(prompt_ids, temperature, seed))
        r.raise_for_status()
        lp = r.json()["choices"][0]["logprobs"]
        ids = [int(t.split(":", 1)[1]) for t in lp["tokens"]]
        logprobs = [float(x) if x is not None else float("nan") for x in lp["token_logprobs"]]  # NaN: unknown
        eos = {self.tokenizer.eos_token_id}
        text = self.tokenizer.decode([t for t in ids if t not in eos], skip_special_tokens=True)
        return Turn(prompt_ids=prompt_ids, completion_ids=ids, logprobs=logprobs, text=text, greedy=temperature == 0)

    def check_processed_logprobs(self) -> None:
        """Refuse a server whose log-probs are not those of the distribution it samples from.

        One token at temperature 1 and top_p 1e-6 keeps only the most likely token, so its processed log-prob is
        exactly 0; a raw one (``raw_logprobs``, vLLM's default) is log p_top < 0, a logit (``*_logits``) is
        anything. Only a model certain to fp32 precision of its first token could pass a raw server."""
        body = self.request_body(self.render([Message(role="user", content="Hello")]), 1.0, 0, top_p=1e-6)
        body["max_tokens"] = 1
        with httpx.Client(timeout=600.0) as c:
            r = c.post(f"{self.base_url}/completions", json=body)
        r.raise_for_status()
        (lp,) = r.json()["choices"][0]["logprobs"]["token_logprobs"]
        if lp is None or abs(float(lp)) > 1e-6:
            raise RuntimeError(
                f"the vLLM server at {self.base_url} returns log-probs of another distribution than the one it "
                f"samples from (a sole kept token got {lp}, not 0): the trainer's importance weights need "
                "`--logprobs-mode processed_logprobs` (vLLM >= 0.10); `rubricgym model serve` starts it so"
            )

    def render(self, messages: list[Message]) -> list[int]:
        """The prompt an episode sends for ``messages``: the chat template, then the response prefix tokens."""
        ids = self.tokenizer.apply_chat_template(chat_dicts(messages), add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        return list(ids) + self.prefix_ids

    def recording(self, task: Task, seed: int, temperature: float | None) -> VLLMEpisode:
        return VLLMEpisode(self, self.temperature if temperature is None else temperature, seed)

    async def collect(
        self,
        tasks: Sequence[Task],
        seeds: Sequence[int],
        group_size: int,
        *,
        anchor_greedy: bool = False,
        temperature: float | None = None,
        full_precision: bool = False,
        hints: Sequence[str | None] | None = None,
    ) -> list[Group]:
        """See ``RolloutBackend.collect``; the server's precision is its own (``full_precision`` is ignored)."""
        return await play_groups(
            self,
            self.env_of,
            tasks,
            seeds,
            group_size,
            anchor_greedy=anchor_greedy,
            temperature=temperature,
            hints=hints,
            limits=self.limits,
        )

    def push_weights(self, model: Any) -> None:
        """Send ``model``'s new weights to the server: its adapter under ``vllm_push: adapter`` (``load_adapter``),
        else all its weights (merged with any LoRA adapter), reloaded in place, then its prefix cache dropped."""
        if not self.sync_weights:
            return
        if self.push == "adapter":
            self.load_adapter(model)
            return
        save_file(untied_state_dict(model), str(self.weights_dir / "model.safetensors"), metadata={"format": "pt"})
        with httpx.Client(timeout=600.0) as c:
            r = c.post(
                f"{self.root}/collective_rpc",
                json={"method": "reload_weights", "kwargs": {"weights_path": str(self.weights_dir)}},
            )
            if r.status_code == 404:
                raise RuntimeError(
                    "the vLLM server has no /collective_rpc route: start it with "
                    "VLLM_SERVER_DEV_MODE=1 so the trainer can push weights"
                )
            r.raise_for_status()
            c.post(f"{self.root}/reset_prefix_cache").raise_for_status()

    def load_adapter(self, model: Any) -> None:
        """Save ``model``'s LoRA adapter to a fresh directory, load it under a fresh name, make that name the
        ``model`` of every later completion, and unload the previous adapter."""
        self.adapter_version += 1
        token = self.weights_dir.name.rsplit("-", 1)[-1]  # unique per backend: several may share one server
        name = f"{self.base_model}-lora-{token}-{self.adapter_version}"
        path = save_adapter_dir(model, self.weights_dir / f"adapter-{self.adapter_version}")
        with httpx.Client(timeout=600.0) as c:
            r = c.post(f"{self.base_url}/load_lora_adapter", json={"lora_name": name, "lora_path": str(path)})
            if r.status_code == 404:
                raise RuntimeError(
                    f"the vLLM server at {self.base_url} has no /v1/load_lora_adapter route: start it with "
                    f"--enable-lora --max-lora-rank >= {adapter_config(model).r} and "
                    "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True, or push merged weights (generation.vllm_push: merged)"
                )
            if r.status_code != 200:
                raise RuntimeError(f"the vLLM server refused the LoRA adapter in {path}: {r.status_code} {r.text}")
            previous, old_dir = self.model, self.adapter_dir
            self.model, self.adapter_dir = name, path
            if previous != self.base_model:
                c.post(f"{self.base_url}/unload_lora_adapter", json={"lora_name": previous}).raise_for_status()
        if old_dir is not None:
            shutil.rmtree(old_dir, ignore_errors=True)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
        elif self.model != self.base_model:  # a server we did not start: leave it without our adapter
            try:
                with httpx.Client(timeout=60.0) as c:
                    c.post(f"{self.base_url}/unload_lora_adapter", json={"lora_name": self.model})
            except httpx.HTTPError:
                pass  # it is gone already
        shutil.rmtree(self.weights_dir, ignore_errors=True)
        if self.serve_dir is not None:
            shutil.rmtree(self.serve_dir, ignore_errors=True)
