"""The lean Llama forward (``agents/lean.py``) against the Hugging Face modules it replaces in the sampler."""

import pytest
import torch

from rubricgym.agents.kvcache import cache_kwargs, preallocated_cache
from rubricgym.agents.lean import LeanLlama, lean_for
from rubricgym.agents.packed import PackedLinears


def _lm(model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    return tok, AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()


@torch.inference_mode()
def test_lean_hidden_states_equal_the_models_with_padding_a_prefix_and_decode_steps(tiny_model_dir):
    _, lm = _lm(tiny_model_dir)
    torch.manual_seed(1)
    with torch.no_grad():  # random weights with biases nowhere; make the norms non-trivial too
        for m in lm.modules():
            if hasattr(m, "variance_epsilon"):
                m.weight.uniform_(0.5, 1.5)
    lean = LeanLlama(lm, PackedLinears())
    body = lm.model
    prefix = torch.randint(5, 500, (1, 6))
    suffix = torch.randint(5, 500, (3, 4))
    suffix[0, :2] = 0  # row 0 is left-padded by 2 after the prefix
    mask = torch.ones(3, 10, dtype=torch.long)
    mask[0, 6:8] = 0
    pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, 6:]
    caches = [preallocated_cache(lm.config, 32) for _ in range(2)]
    ref_prefix = body(input_ids=prefix, **cache_kwargs(body, caches[0])).last_hidden_state
    ours_prefix = lean.hidden(caches[1], prefix)
    torch.testing.assert_close(ours_prefix, ref_prefix, atol=1e-5, rtol=1e-4)
    for c in caches:
        c.batch_repeat_interleave(3)
    ref = body(input_ids=suffix, attention_mask=mask, position_ids=pos, **cache_kwargs(body, caches[0]))
    ours = lean.hidden(caches[1], suffix, attention_mask=mask, position_ids=pos)
    real = mask[:, 6:].bool()  # padding positions' outputs are read by nothing
    torch.testing.assert_close(ours[real], ref.last_hidden_state[real], atol=1e-5, rtol=1e-4)
    next_pos = mask.sum(-1, keepdim=True)
    for _ in range(3):
        tok = torch.randint(5, 500, (3, 1))
        mask = torch.cat([mask, mask.new_ones(3, 1)], dim=1)
        ref = body(input_ids=tok, attention_mask=mask, position_ids=next_pos, **cache_kwargs(body, caches[0]))
        ours = lean.hidden(caches[1], tok, attention_mask=mask, position_ids=next_pos, last_only=True)
        torch.testing.assert_close(ours, ref.last_hidden_state, atol=1e-5, rtol=1e-4)
        next_pos = next_pos + 1
    real = mask.bool()  # the keys and values both paths wrote at real positions
    for a, b in zip(caches[0].layers, caches[1].layers, strict=True):
        for row in range(3):
            torch.testing.assert_close(b.keys[row][:, real[row]], a.keys[row][:, real[row]], atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(b.values[row][:, real[row]], a.values[row][:, real[row]], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_sampling_with_the_lean_forward_draws_what_the_modules_draw(tiny_model_dir, temperature, monkeypatch):
    from rubricgym.agents.decode import sample
    from rubricgym.agents.kvreuse import KVStore

    tok, lm = _lm(tiny_model_dir)
    calls = []
    real_hidden = LeanLlama.hidden
    monkeypatch.setattr(LeanLlama, "hidden", lambda self, *a, **k: calls.append(1) or real_hidden(self, *a, **k))
    prompts = [tok.encode("Compute 2 + 3."), tok.encode("Compute 17 * 4 - 1."), tok.encode("Compute 2 + 3.")]

    def run(lean, share_prefix=True, store=None):
        return sample(
            lm,
            prompts,
            max_new_tokens=12,
            temperature=temperature,
            pad_id=0,
            is_end=lambda r, t: len(t) >= 4 + 3 * r,
            generator=torch.Generator().manual_seed(3),
            packed=PackedLinears(),
            share_prefix=share_prefix,
            kv_store=store,
            lean=lean,
        )

    plain = run(False)
    assert not calls
    for kwargs in ({}, {"share_prefix": False}):
        fast = run(True, **kwargs)
        assert calls  # the lean path ran
        calls.clear()
        for a, b in zip(plain, fast, strict=True):
            assert a.tokens == b.tokens
            torch.testing.assert_close(torch.tensor(b.logprobs), torch.tensor(a.logprobs), atol=1e-4, rtol=0)
    store = KVStore(1 << 16)
    run(True, store=store)  # fills the store; the second call starts from stored keys and values
    again = run(True, store=store)
    assert store.hits > 0
    assert [r.tokens for r in again] == [r.tokens for r in plain]


def test_the_lean_forward_applies_only_where_it_computes_the_models_function(tiny_model_dir):
    _, lm = _lm(tiny_model_dir)
    packs = PackedLinears()
    assert lean_for(lm, packs) is not None
    assert lean_for(lm, None) is None  # no packs: not on CPU, or packing off
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert lean_for(lm, packs) is None  # autocast runs the body in bf16: the modules do that
    from peft import LoraConfig, get_peft_model

    adapted = get_peft_model(lm, LoraConfig(r=2, target_modules=["q_proj", "v_proj"])).base_model.model
    assert lean_for(adapted, packs) is None  # a LoRA projection adds its adapter: the modules must run
    _, lm = _lm(tiny_model_dir)
    lm.model.layers[1].mlp.down_proj.forward = lambda x: x  # an accelerate-style hook on one instance
    assert lean_for(lm, packs) is None
    _, lm = _lm(tiny_model_dir)
    assert lean_for(lm.to(torch.bfloat16), packs) is None
    lm.config.hidden_act = "gelu"
    assert lean_for(lm.float(), packs) is None
