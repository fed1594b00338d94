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


# ---- bf16-lean ------------------------------------------------------------------------------------------------


def body_pack_dtypes(engine) -> set[torch.dtype]:
    head = engine.agent.lm.get_output_embeddings().weight.data_ptr()
    return {dtype for (ptrs, dtype) in engine.packs._packs if ptrs != (head,)}


@pytest.mark.parametrize("kv", ["fp32", "bf16"])
def test_bf16_lean_samples_on_bf16_packs_and_agrees_with_the_trainers_fp32_recomputation(tiny_model_dir, kv):
    from rubricgym.agents.engines.lean_bf16 import LeanBf16Sampler

    policy = LocalAgent(
        str(tiny_model_dir), temperature=TEMPERATURE, max_new_tokens=6, seed=3, threads=1, stop=(), kv_reuse_tokens=512
    ).load()
    before = {k: v.clone() for k, v in policy.lm.state_dict().items()}
    engine = LeanBf16Sampler(policy, kv=kv)
    turns = sample(engine.agent)
    assert all(t.completion_ids for t in turns)
    # the decoder's projections ran on bf16 packs, the LM head on an fp32 one (logits stay fp32)
    assert body_pack_dtypes(engine) == {torch.bfloat16}
    head = engine.agent.lm.get_output_embeddings().weight.data_ptr()
    assert engine.packs._packs[((head,), torch.float32)][1].dtype == torch.float32
    # keys and values were stored in the dtype asked for
    stored = next(iter(engine.agent._shared.kv.entries.values()))
    assert stored.keys[0].dtype == {"fp32": torch.float32, "bf16": torch.bfloat16}[kv]
    # what the engine recorded is close to what the trainer recomputes in fp32, yet not fp32's own numbers
    assert max_diff(policy.lm, turns) <= 0.05
    assert any(torch.tensor(t.logprobs).ne(fp32_logprobs(policy.lm, t)).any() for t in turns), (
        "bf16 GEMMs must change the recorded log-probs at least slightly"
    )
    # the fp32 master is read, never written
    for k, v in policy.lm.state_dict().items():
        assert v.dtype == torch.float32 and torch.equal(v, before[k]), k


def test_bf16_lean_follows_an_update_and_sync_prepacks_it(policy):
    from rubricgym.agents.engines.lean_bf16 import LeanBf16Sampler

    engine = LeanBf16Sampler(policy)
    old = sample(engine.agent)[0]
    perturb(policy.lm)
    assert engine.sync() > 0
    packs = {k: v[1] for k, v in engine.packs._packs.items()}
    assert body_pack_dtypes(engine) == {torch.bfloat16} and len(packs) == 4 * 2 + 1  # 4 per layer + the head
    new = sample(engine.agent)[0]
    # sampling after sync used the packs sync built (no repack on the rollout's clock)
    assert all(engine.packs._packs[k][1] is p for k, p in packs.items())
    assert new.completion_ids != old.completion_ids or new.logprobs != pytest.approx(old.logprobs, abs=1e-3)
    assert max_diff(policy.lm, [new]) <= 0.05  # it follows the updated master


def test_bf16_lean_never_samples_stale_packs_even_without_sync(policy):
    """An update the trainer forgets to ``sync`` still reaches the engine: packs are keyed on weight versions."""
    from rubricgym.agents.engines.lean_bf16 import LeanBf16Sampler

    engine = LeanBf16Sampler(policy)
    sample(engine.agent)
    perturb(policy.lm)
    assert max_diff(policy.lm, sample(engine.agent)) <= 0.05


def test_bf16_packs_through_the_hugging_face_forward_keep_its_activation_dtype(tiny_model_dir):
    """Where the lean forward does not apply, bf16 packs routed into the HF forward return fp32 activations (a bf16
    value projection next to fp32 rotary queries would make the attention refuse mixed dtypes)."""
    from rubricgym.agents.decode import sample as decode_sample
    from rubricgym.agents.packed import PackedLinears

    lm = LocalAgent(str(tiny_model_dir)).load().lm
    kw = dict(max_new_tokens=5, temperature=0.0, is_end=lambda r, t: False, lean=False)
    prompts = [[1, 2, 3, 4], [5, 6, 7]]
    bf16 = decode_sample(lm, prompts, packed=PackedLinears(dtype=torch.bfloat16), **kw)
    fp32 = decode_sample(lm, prompts, packed=PackedLinears(), **kw)
    for a, b in zip(bf16, fp32, strict=True):
        assert len(a.tokens) == 5
        assert torch.tensor(a.logprobs) == pytest.approx(torch.tensor(b.logprobs), abs=0.05)


def test_bf16_lean_refuses_what_it_cannot_run(tiny_model_dir):
    from rubricgym.agents.engines.lean_bf16 import LeanBf16Sampler
    from rubricgym.agents.packed import PackedLinears

    fp32 = LocalAgent(str(tiny_model_dir)).load()
    with pytest.raises(ValueError, match="choose one of fp32, bf16"):
        LeanBf16Sampler(fp32, kv="fp8")
    with pytest.raises(ValueError, match="not packable"):
        PackedLinears(dtype=torch.float16)
    bf16 = LocalAgent(str(tiny_model_dir), dtype="bfloat16").load()
    with pytest.raises(ValueError, match="copies of fp32 master weights"):
        LeanBf16Sampler(bf16)
    hooked = LocalAgent(str(tiny_model_dir)).load()
    layer = hooked.lm.model.layers[0].self_attn
    layer.q_proj.forward = lambda x: torch.nn.functional.linear(x, layer.q_proj.weight) * 2  # an adapter's hook
    with pytest.raises(ValueError, match="use the 'fp32' sampler"):
        LeanBf16Sampler(hooked)
