"""The fast paths change nothing but speed: the preallocated KV cache holds what ``DynamicLayer`` holds, sampling
on oneDNN-packed weights gives the tokens and log-probs of sampling on the model's own, and the update on packs
gives the same log-probs and gradients."""

import contextlib
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


def test_training_linear_on_packs_has_the_ordinary_gradients():
    g = torch.Generator().manual_seed(1)
    lin = torch.nn.Linear(8, 5)
    x = torch.randn(2, 3, 8, generator=g, requires_grad=True)
    up = torch.randn(2, 3, 5, generator=g)
    grads = []
    for packs in (None, PackedLinears()):
        lin.zero_grad(set_to_none=True)
        x.grad = None
        if packs is None:
            y = lin(x)
        else:
            with packs.applied(lin, train=True):
                y = lin(x)
            assert y.grad_fn is not None and "PackedLinear" in type(y.grad_fn).__name__
        (y * up).sum().backward()
        grads.append((y.detach(), x.grad.clone(), lin.weight.grad.clone(), lin.bias.grad.clone()))
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_update_on_packs_gives_the_same_logprobs_and_gradients(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    from rubricgym.trainers.samples import Sample, collate
    from rubricgym.trainers.update import generated_logprobs

    g = torch.Generator().manual_seed(2)
    prompt = torch.randint(5, 1000, (20,), generator=g).tolist()
    samples = []
    for i, gen in enumerate([6, 9, 4]):
        s = Sample(i)
        s.extend(prompt, False, 0, 0)
        s.extend(torch.randint(5, 1000, (gen,), generator=g).tolist(), True, 0, 0, [0.0] * gen)
        samples.append(s)
    b = collate(samples, 0)
    weights = torch.randn(b.input_ids.shape, generator=g)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).train()
    results = []
    for packs in (None, PackedLinears()):
        model.zero_grad(set_to_none=True)
        with packs.applied(model, train=True) if packs is not None else contextlib.nullcontext():
            logp, ent = generated_logprobs(
                model, b.input_ids, b.attention_mask, b.loss_mask, 0.8, with_entropy=True, packs=packs
            )
            (logp * weights).sum().backward()
            if packs is not None:  # the body's linears ran on packs too
                probe = model.model.layers[0].mlp.up_proj(torch.randn(1, 32, requires_grad=True))
                assert "PackedLinear" in type(probe.grad_fn).__name__
        results.append((logp.detach(), ent, torch.cat([p.grad.flatten() for p in model.parameters()])))
    (lp1, e1, g1), (lp2, e2, g2) = results
    torch.testing.assert_close(lp1, lp2, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(e1, e2, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(g1, g2, atol=1e-6, rtol=1e-4)
