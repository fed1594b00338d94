"""The fused LM-head log-prob's in-place chunk buffers: bf16 hidden states (the update under bf16 autocast) and a
frozen LM head (LoRA) give the naive fp32 log-softmax's values and gradients, chunk after ragged chunk."""

import pytest
import torch

from rubricgym.trainers.algo import loss


def _naive(h: torch.Tensor, w: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    logp = ((h.float() @ w.float().t()) / temperature).log_softmax(-1)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_bf16_hidden_states_are_scored_in_fp32_with_a_bf16_gradient(monkeypatch, temperature):
    monkeypatch.setattr(loss, "LOGPROB_CHUNK", 4)  # chunks of 4, 4 and a ragged 2 share one buffer
    g = torch.Generator().manual_seed(1)
    h = torch.randn(10, 6, generator=g).bfloat16().requires_grad_(True)
    w = torch.randn(13, 6, generator=g, requires_grad=True)
    targets = torch.randint(0, 13, (10,), generator=g)
    upstream = torch.randn(10, generator=g)
    got, _ = loss.selected_logprobs(h, w, targets, temperature)
    assert got.dtype == torch.float32
    (got * upstream).sum().backward()
    gh, gw = h.grad.clone(), w.grad.clone()
    assert gh.dtype == torch.bfloat16 and gw.dtype == torch.float32
    h.grad = w.grad = None
    want = _naive(h, w, targets, temperature)
    (want * upstream).sum().backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(gh, h.grad)
    torch.testing.assert_close(gw, w.grad)


def test_a_frozen_head_gets_no_gradient_and_the_hidden_states_the_naive_one(monkeypatch):
    monkeypatch.setattr(loss, "LOGPROB_CHUNK", 3)
    g = torch.Generator().manual_seed(2)
    h = torch.randn(8, 5, generator=g, requires_grad=True)
    w = torch.randn(9, 5, generator=g)  # requires_grad False: a LoRA run's LM head
    targets = torch.randint(0, 9, (8,), generator=g)
    got, ent = loss.selected_logprobs(h, w, targets, 1.0, with_entropy=True)
    got.sum().backward()
    gh = h.grad.clone()
    h.grad = None
    want = _naive(h, w, targets, 1.0)
    want.sum().backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(gh, h.grad)
    logp = (h.detach() @ w.t()).log_softmax(-1)
    torch.testing.assert_close(ent, -(logp.exp() * logp).sum(-1))
    assert w.grad is None


def test_repeated_calls_do_not_share_buffers():
    g = torch.Generator().manual_seed(3)
    h = torch.randn(6, 4, generator=g)
    w = torch.randn(7, 4, generator=g)
    targets = torch.randint(0, 7, (6,), generator=g)
    first, _ = loss.selected_logprobs(h, w, targets)
    kept = first.clone()
    loss.selected_logprobs(h * 3, w, targets)  # a second call must not write into the first's results
    assert torch.equal(first, kept)
