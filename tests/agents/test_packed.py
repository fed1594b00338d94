"""The sampler's fast paths change nothing but speed: the preallocated KV cache holds what ``DynamicLayer``
holds, and sampling on oneDNN-packed weights gives the tokens and log-probs of sampling on the model's own."""

import threading

import pytest
import torch
from transformers.cache_utils import DynamicLayer

from rubricgym.agents.kvcache import PreallocatedLayer
from rubricgym.agents.packed import PackedLinears, packing_supported


def test_preallocated_layer_holds_what_a_dynamic_layer_holds():
    g = torch.Generator().manual_seed(0)
    ours, ref = PreallocatedLayer(capacity=6), DynamicLayer()

    def step(rows, n):
        k, v = torch.randn(rows, 2, n, 4, generator=g), torch.randn(rows, 2, n, 4, generator=g)
        got, want = ours.update(k, v), ref.update(k, v)
        for a, b in zip(got, want, strict=True):
            assert torch.equal(a, b)
        assert ours.get_seq_length() == ref.get_seq_length()

    step(1, 3)  # a shared prefix, prefilled once
    ours.batch_repeat_interleave(4)
    ref.batch_repeat_interleave(4)
    step(4, 2)
    idx = torch.tensor([0, 2, 3])  # row 1 finished
    ours.batch_select_indices(idx)
    ref.batch_select_indices(idx)
    for _ in range(4):  # past the capacity of 6: the buffer grows
        step(3, 1)
    ours.crop(-2)
    ref.crop(-2)
    assert torch.equal(ours.keys, ref.keys) and torch.equal(ours.values, ref.values)
    assert ours.get_seq_length() == 7


def _lm(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    return tok, AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_packed_sampling_matches_the_models_own_weights(tiny_model_dir, temperature):
    from rubricgym.agents.decode import sample

    tok, lm = _lm(tiny_model_dir)
    assert packing_supported(lm)  # the CPU torch we install has oneDNN
    prompts = [tok.encode("Compute 2 + 3."), tok.encode("Compute 17 * 4 - 1."), tok.encode("Compute 2 + 3.")]
    packed = PackedLinears()

    def run(p):
        gen = torch.Generator().manual_seed(3)
        return sample(
            lm,
            prompts,
            max_new_tokens=16,
            temperature=temperature,
            pad_id=0,
            is_end=lambda r, t: len(t) >= 5 + 4 * r,
            generator=gen,
            packed=p,
        )

    plain, fast = run(None), run(packed)
    assert packed.nbytes > 0  # it did pack
    assert not any("forward" in m.__dict__ for m in lm.modules())  # and put the model back as it was
    for a, b in zip(plain, fast, strict=True):
        assert a.tokens == b.tokens
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4, rtol=0)


def test_packs_follow_weight_updates_and_leave_other_forwards_alone():
    lin = torch.nn.Linear(8, 5)
    model = torch.nn.Sequential(lin)
    packed = PackedLinears()
    x = torch.randn(3, 8)
    with packed.applied(model), torch.inference_mode():
        before = model(x)
    torch.testing.assert_close(before, torch.nn.functional.linear(x, lin.weight, lin.bias).detach())
    with torch.no_grad():
        lin.weight.add_(1.0)  # an optimizer step: the version counter moves, the pack is stale
    with packed.applied(model):
        with torch.inference_mode():
            after = model(x)
        y = model(x)  # autograd on: the module's own path, gradients reach the weight
        y.sum().backward()
        other: list[torch.Tensor] = []
        t = threading.Thread(target=lambda: other.append(model(x).detach()))
        t.start()
        t.join()
    want = torch.nn.functional.linear(x, lin.weight, lin.bias).detach()
    torch.testing.assert_close(after, want)
    torch.testing.assert_close(other[0], want)
    assert lin.weight.grad is not None and lin.weight.grad.abs().sum() > 0
    packed.clear()
    assert packed.nbytes == 0


def test_nothing_is_packed_when_the_copies_would_not_fit_in_memory(monkeypatch, tmp_path):
    from rubricgym.agents import packed as packed_module

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 1000 kB\nMemAvailable: 100 kB\n")  # a 64x64 fp32 weight is 16 kB: fits
    monkeypatch.setattr(packed_module, "MEMINFO", str(meminfo))
    small, big = torch.nn.Linear(64, 64), torch.nn.Linear(256, 256)  # 256 kB: does not
    for lin, packs_expected in ((small, True), (big, False)):
        packs = PackedLinears()
        x = torch.randn(2, lin.in_features)
        with packs.applied(torch.nn.Sequential(lin)), torch.inference_mode():
            out = lin(x)
        assert (packs.nbytes > 0) is packs_expected
        torch.testing.assert_close(out, torch.nn.functional.linear(x, lin.weight, lin.bias).detach())


@pytest.mark.slow
def test_packed_greedy_decoding_of_the_embedded_model_is_unchanged(local_model_dir):
    """On SmolLM2 itself (576 wide, 49k vocabulary) the packed sampler makes the same greedy decisions."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rubricgym.agents.decode import sample

    tok = AutoTokenizer.from_pretrained(local_model_dir)
    lm = AutoModelForCausalLM.from_pretrained(local_model_dir, dtype=torch.float32).eval()
    questions = ["Compute 22 / 2.", "Name a colour.", "Write one sentence about the sea.", "What is 7 * 6?"]
    prompts = []
    for q in questions:
        ids = tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True)
        prompts.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))

    def run(packed):
        return sample(
            lm,
            prompts,
            max_new_tokens=32,
            temperature=0.0,
            pad_id=tok.pad_token_id,
            is_end=lambda r, t: t[-1] == tok.eos_token_id,
            packed=packed,
        )

    plain, fast = run(None), run(PackedLinears())
    assert [r.tokens for r in fast] == [r.tokens for r in plain]
