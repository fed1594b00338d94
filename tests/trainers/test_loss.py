"""Worked examples for the PPO-clip loss, k3 KL and aggregation."""

import math

import pytest
import torch

from rubricgym.trainers.algo.loss import aggregate, k3_kl, ppo_clip_loss, token_entropy, token_logprobs


def _case(adv):
    logp = torch.tensor([[math.log(1.5), math.log(0.5), 0.0]], requires_grad=True)
    old = torch.zeros(1, 3)
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    return logp, old, torch.tensor([adv]), mask


def test_asymmetric_clip_positive_advantage():
    logp, old, adv, mask = _case([1.0, 1.0, 5.0])
    loss, stats = ppo_clip_loss(logp, old, adv, mask)
    # ratio 1.5 clipped to 1.28 ; ratio .5 keeps -.5 (max of -.5 and -.8) ; the masked token is ignored
    assert loss.item() == pytest.approx((-1.28 - 0.5) / 2)
    assert stats.clip_fraction == pytest.approx(1.0)
    assert stats.tokens == 2
    loss.backward()
    # the clipped token gets no gradient; the other gets -A * ratio / 2
    assert logp.grad[0, 0].item() == pytest.approx(0.0)
    assert logp.grad[0, 1].item() == pytest.approx(-0.5 / 2)
    assert logp.grad[0, 2].item() == 0.0


def test_asymmetric_clip_negative_advantage():
    logp, old, adv, mask = _case([-1.0, -1.0, 0.0])
    loss, _ = ppo_clip_loss(logp, old, adv, mask)
    # ratio 1.5: max(1.5, 1.28) = 1.5 ; ratio .5: max(.5, .8) = .8
    assert loss.item() == pytest.approx((1.5 + 0.8) / 2)
    loss2, _ = ppo_clip_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.2)
    assert loss2.item() == pytest.approx((1.5 + 0.8) / 2)


def test_k3_kl():
    kl = k3_kl(torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)]))
    assert kl.item() == pytest.approx(0.5 + math.log(2) - 1)
    assert k3_kl(torch.tensor([0.3]), torch.tensor([0.3])).item() == 0.0


def test_kl_and_entropy_terms():
    logp, old, adv, mask = _case([0.0, 0.0, 0.0])
    ref = torch.tensor([[math.log(1.5), math.log(0.25), 0.0]])
    ent = torch.tensor([[1.0, 3.0, 100.0]])
    loss, stats = ppo_clip_loss(logp, old, adv, mask, ref_logp=ref, beta=0.1, entropy=ent, entropy_coef=0.01)
    kl = (0.0 + (0.5 + math.log(2) - 1)) / 2
    assert stats.kl == pytest.approx(kl)
    assert stats.entropy == pytest.approx(2.0)
    assert loss.item() == pytest.approx(0.1 * kl - 0.01 * 2.0)
    with pytest.raises(ValueError, match="ref_logp"):
        ppo_clip_loss(logp, old, adv, mask, beta=0.1)


def test_token_mean_vs_seq_mean():
    v = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    m = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    assert aggregate(v, m, "token-mean").item() == pytest.approx(0.25)
    assert aggregate(v, m, "seq-mean").item() == pytest.approx(0.5)
    # an all-masked sequence (an errored sample) does not dilute the seq-mean
    m2 = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    assert aggregate(v, m2, "seq-mean").item() == pytest.approx(1.0)
    assert aggregate(v, torch.zeros(2, 3)).item() == 0.0


def test_token_logprobs_and_entropy_with_temperature():
    logits = torch.tensor([[[0.0, math.log(3.0)]]])
    assert token_logprobs(logits, torch.tensor([[1]])).item() == pytest.approx(math.log(0.75))
    # temperature 2 halves the logits: probs 1 : sqrt(3)
    p = math.sqrt(3) / (1 + math.sqrt(3))
    assert token_logprobs(logits, torch.tensor([[1]]), 2.0).item() == pytest.approx(math.log(p))
    assert token_entropy(torch.zeros(1, 1, 4)).item() == pytest.approx(math.log(4))


def _random_samples(n=4, length=40, generated=10, seed=0):
    from rubricgym.trainers.algo.samples import Sample

    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        ids = torch.randint(5, 1000, (length + i,), generator=g).tolist()
        s = Sample(i)
        s.extend(ids[:-generated], False, 0, 0)
        s.extend(ids[-generated:], True, 0, 0, [0.0] * generated)
        s.advantages = [0.0] * (len(ids) - generated) + [1.0 if i % 2 else -1.0] * generated
        out.append(s)
    return out


def _grads(model_dir, samples, **settings):
    from transformers import AutoModelForCausalLM

    from rubricgym.trainers.config import OptimConfig
    from rubricgym.trainers.engine.update import UpdateSettings, compute_gradients

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if settings.pop("checkpointing", False):
        (getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable)()
        model.config.use_cache = False
    model.train()
    stats = compute_gradients(model, samples, UpdateSettings(optim=OptimConfig(micro_batch=2), **settings), pad_id=0)
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]), stats


def test_gradient_checkpointing_gives_the_same_gradient(tiny_model_dir):
    samples = _random_samples()
    plain, stats = _grads(tiny_model_dir, samples)
    ckpt, _ = _grads(tiny_model_dir, samples, checkpointing=True)
    assert stats["tokens"] == 40 and plain.abs().sum() > 0
    torch.testing.assert_close(ckpt, plain, rtol=1e-4, atol=1e-7)


def test_bf16_autocast_gradient_points_the_same_way(tiny_model_dir):
    samples = _random_samples()
    plain, _ = _grads(tiny_model_dir, samples)
    mixed, stats = _grads(tiny_model_dir, samples, bf16_autocast=True)
    assert all(p.dtype == torch.float32 for p in (plain, mixed))  # fp32 master weights and gradients
    cosine = torch.nn.functional.cosine_similarity(plain, mixed, dim=0)
    assert cosine > 0.98 and torch.isfinite(torch.tensor(stats["loss"]))
