"""Candidate sampling engines (``agents/engines``): their recorded log-probs are those the trainer recomputes in
fp32 within tolerance, an update reaches them through ``sync`` (and not before), and the fp32 master is untouched."""

from __future__ import annotations

import asyncio

import pytest
import torch

from rubricgym.agents.engines.lowp import LowPrecisionSampler, low_precision_copy
from rubricgym.agents.local import LocalAgent, Turn
from rubricgym.core.types import Message
from rubricgym.trainers.algo.logprobs import generated_logprobs

TEMPERATURE = 0.7
MESSAGES = [Message(role="user", content="Name three colours of the rainbow.")]


@pytest.fixture
def policy(tiny_model_dir):
    return LocalAgent(str(tiny_model_dir), temperature=TEMPERATURE, max_new_tokens=6, seed=3, threads=1, stop=()).load()


def sample(agent: LocalAgent, n: int = 3) -> list[Turn]:
    prompt = agent.render(MESSAGES)

    async def run() -> list[Turn]:
        return list(await asyncio.gather(*(agent.episode(None, 7).generate(prompt) for _ in range(n))))

    return asyncio.run(run())


def fp32_logprobs(model, turn: Turn) -> torch.Tensor:
    """The trainer's recomputation of the turn's sampled tokens' log-probs (``trainers.update``)."""
    ids = torch.tensor([turn.prompt_ids + turn.completion_ids])
    loss_mask = torch.zeros_like(ids)
    loss_mask[0, len(turn.prompt_ids) :] = 1
    with torch.no_grad():
        out, _ = generated_logprobs(model, ids, torch.ones_like(ids), loss_mask, TEMPERATURE)
    return out[0, len(turn.prompt_ids) :]


def max_diff(model, turns: list[Turn]) -> float:
    return max(float((fp32_logprobs(model, t) - torch.tensor(t.logprobs)).abs().max()) for t in turns)


def perturb(model) -> None:
    """An 'update': every decoder weight moves (what an optimizer step does to all of them)."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.model.layers.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.5 * p.abs().mean().clamp(min=0.02))


@pytest.mark.parametrize(("precision", "tol", "own"), [("bf16", 0.05, 1e-3), ("int8", 0.05, 0.02)])
def test_low_precision_logprobs_agree_with_the_trainers_fp32_recomputation(policy, precision, tol, own):
    engine = LowPrecisionSampler(policy, precision)
    turns = sample(engine.agent)
    assert all(t.completion_ids for t in turns)
    assert max_diff(policy.lm, turns) <= tol
    # the recorded log-probs are the copy's own distribution: what the copy recomputes, up to summation order
    # (int8: and to activations quantised per call, so a whole-sequence forward rounds them a little otherwise)
    assert max_diff(engine.agent.lm, turns) <= own


def test_low_precision_copies_leave_the_fp32_master_untouched(policy):
    before = {k: v.clone() for k, v in policy.lm.state_dict().items()}
    for precision in ("bf16", "int8"):
        copy = low_precision_copy(policy.lm, precision)
        assert copy is not policy.lm
    for k, v in policy.lm.state_dict().items():
        assert v.dtype == torch.float32 and torch.equal(v, before[k]), k
    assert next(LowPrecisionSampler(policy, "bf16").agent.lm.parameters()).dtype == torch.bfloat16


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_an_update_reaches_the_engine_after_sync_and_not_before(policy, precision):
    engine = LowPrecisionSampler(policy, precision)
    old = sample(engine.agent)[0]
    perturb(policy.lm)
    stale = sample(engine.agent)[0]
    assert stale.logprobs == pytest.approx(old.logprobs, abs=1e-6)  # the copy is stale until sync
    assert engine.sync() >= 0
    new = sample(engine.agent)[0]
    assert new.completion_ids != old.completion_ids or new.logprobs != pytest.approx(old.logprobs, abs=1e-3)
    assert max_diff(policy.lm, [new]) <= 0.05  # and it follows the updated master


def test_unknown_precision_and_non_fp32_master_are_refused(tiny_model_dir):
    fp32 = LocalAgent(str(tiny_model_dir)).load()
    with pytest.raises(ValueError, match="choose one of bf16, int8"):
        LowPrecisionSampler(fp32, "fp8")  # type: ignore[arg-type]
    bf16 = LocalAgent(str(tiny_model_dir), dtype="bfloat16").load()
    with pytest.raises(ValueError, match="copies fp32 master weights"):
        LowPrecisionSampler(bf16, "bf16")


# ---- llama.cpp ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer_meta():
    pytest.importorskip("gguf")
    from rubricgym.agents.engines.gguf_export import tokenizer_fields

    return tokenizer_fields()  # parsing the 49k-token vocabulary: seconds (tens under load), once


@pytest.mark.slow
def test_gguf_export_is_the_same_model_for_transformers_gguf_loader(tiny_model_dir, tokenizer_meta, tmp_path):
    from transformers import AutoModelForCausalLM

    from rubricgym.agents.engines.gguf_export import export_gguf

    lm = LocalAgent(str(tiny_model_dir)).load().lm
    perturb(lm)  # not the saved weights: the export must write the in-memory ones
    export_gguf(lm, tmp_path / "m.gguf", dtype="f32", tokenizer=tokenizer_meta)
    for f in tiny_model_dir.iterdir():
        if f.suffix != ".safetensors":
            (tmp_path / f.name).write_bytes(f.read_bytes())
    back = AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file="m.gguf", dtype=torch.float32).eval()
    ids = torch.tensor([[1, 2, 30, 400, 5000, 600, 7]])
    with torch.no_grad():
        assert torch.allclose(back(ids).logits, lm(ids).logits, atol=1e-5)


@pytest.mark.slow
def test_llamacpp_logprobs_agree_and_updates_reach_it(policy, tokenizer_meta, tmp_path, monkeypatch):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (docs/guides/rollout-speed.md)")
    from rubricgym.agents.engines import llamacpp

    monkeypatch.setattr(llamacpp, "tokenizer_fields", lambda path=None: tokenizer_meta)
    engine = llamacpp.LlamaCppSampler(policy, dtype="f32", contexts=2, n_ctx=512, threads=1, workdir=tmp_path)
    try:
        old = sample(engine.agent)
        assert max_diff(policy.lm, old) <= 1e-3
        perturb(policy.lm)
        assert sample(engine.agent)[0].logprobs == pytest.approx(old[0].logprobs, abs=1e-6)  # stale until sync
        assert engine.sync() > 0
        new = sample(engine.agent)
        assert new[0].logprobs != pytest.approx(old[0].logprobs, abs=1e-3)
        assert max_diff(policy.lm, new) <= 1e-3
    finally:
        engine.close()
