"""Candidate CPU sampling engines behind the sampler's interface (``LocalAgent``: ``act`` / ``generate`` -> ``Turn``).

Each engine samples from a copy of a trainer's fp32 policy (the master weights are never touched) and records,
per generated token, the log-prob of the distribution it drew the token from, so a trainer can weigh its samples
exactly as it weighs ``LocalAgent``'s. ``sync()`` brings an engine's copy up to date after an update and returns
the seconds it took (the per-step weight-sync cost).

- ``engines.lowp``: reduced-precision PyTorch decode: a bf16 copy of the weights, or int8 weight-only
  (``torch.ao`` dynamic quantisation of the decoder's linears, the LM head kept fp32).
- ``engines.lean_bf16``: today's lean sampler with the decoder's GEMMs on bf16 packs of the fp32 weights (oneDNN
  AVX512-BF16), the residual stream, attention and logits kept fp32 (engine ``bf16-lean`` in ``bench/rollouts.py``).
- ``engines.llamacpp``: llama.cpp through ``llama-cpp-python``; the policy is exported to GGUF after each update
  (``gguf_export``).

vLLM's CPU server is the third candidate; its engine is the trainer's ``VLLMBackend`` (server mode, weights
pushed after each update), measured by ``bench/rollouts.py``.
"""
