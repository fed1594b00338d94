"""Off-policy correctness: truncated importance sampling, the sampler-ratio mode, mismatch KL and mu > 1 epochs.

Small tensors with hand-computed values, then the same identities through ``compute_gradients`` on a tiny model.
"""

import math

import pytest
import torch

from rubricgym.trainers.algo.loss import importance_weights, mismatch_kl, ppo_clip_loss
from rubricgym.trainers.algo.samples import build_samples


def test_truncated_importance_weights_by_hand():
    old = torch.log(torch.tensor([[0.5, 0.3, 0.4, 0.9, 0.2]]))
    sampler = torch.log(torch.tensor([[0.2, 0.6, float("nan"), 0.9, 0.1]]))
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]])
    w = importance_weights(old, sampler, mask, cap=2.0)
    # 0.5/0.2 = 2.5 -> capped at 2 ; 0.3/0.6 = 0.5 ; unknown (NaN) -> 1 ; equal -> 1 ; off the mask -> 1
    torch.testing.assert_close(w, torch.tensor([[2.0, 0.5, 1.0, 1.0, 1.0]]))
    torch.testing.assert_close(importance_weights(old, sampler, mask, cap=None)[0, 0], torch.tensor(2.5))


def test_mismatch_kl_is_k3_on_known_tokens():
    old = torch.log(torch.tensor([[0.25, 0.5, 0.5]]))
    sampler = torch.log(torch.tensor([[0.5, 0.5, float("nan")]]))
    total, n = mismatch_kl(old, sampler, torch.ones(1, 3))
    # token 0: d = log(.25/.5) ; k3 = .5 - log(.5) - 1 ; token 1: 0 ; token 2 unknown
    assert n == 2 and total == pytest.approx(0.5 + math.log(2) - 1)


def test_weighted_ppo_loss_by_hand():
    logp = torch.tensor([[math.log(1.5), math.log(0.5)]], requires_grad=True)
    old = torch.zeros(1, 2)
    adv = torch.tensor([[1.0, 1.0]])
    w = torch.tensor([[2.0, 0.5]])
    loss, stats = ppo_clip_loss(logp, old, adv, torch.ones(1, 2), is_weights=w)
    # token 0: ratio 1.5 clipped to 1.28, weight 2 ; token 1: ratio .5 unclipped, weight .5
    assert loss.item() == pytest.approx((-1.28 * 2 - 0.5 * 0.5) / 2)
    assert stats.is_weight_mean == pytest.approx(1.25)
    loss.backward()
    assert logp.grad[0, 0].item() == 0.0  # clipped: no gradient, whatever the weight
    assert logp.grad[0, 1].item() == pytest.approx(-0.5 * 0.5 / 2)  # -A w ratio / n


class _Turn:
    def __init__(self, prompt, completion, logprobs, greedy=False):
        self.prompt_ids, self.completion_ids, self.logprobs, self.greedy = prompt, completion, logprobs, greedy


def test_greedy_turns_have_unknown_sampler_logprobs():
    (s,) = build_samples(0, [_Turn([1, 2], [3], [-0.1]), _Turn([1, 2, 3, 4], [5], [-0.2], greedy=True)], [0, 0])
    assert s.sampled_logprobs[:4] == [0.0, 0.0, -0.1, 0.0] and math.isnan(s.sampled_logprobs[4])


# ---- through compute_gradients on a tiny model -------------------------------------------------------------


def _model(model_dir):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).train()


def _samples(model, sign=None, shift=0.0):
    """Four samples whose sampler log-probs are the model's own plus ``shift`` (advantage +-1, or all ``sign``)."""
    from rubricgym.trainers.algo.logprobs import generated_logprobs
    from rubricgym.trainers.algo.samples import Sample, collate

    g = torch.Generator().manual_seed(1)
    out = []
    for i in range(4):
        ids = torch.randint(5, 1000, (30 + i,), generator=g).tolist()
        s = Sample(i)
        s.extend(ids[:-8], False, 0, 0)
        s.extend(ids[-8:], True, 0, 0, [0.0] * 8)
        a = sign if sign is not None else (1.0 if i % 2 else -1.0)
        s.advantages = [0.0] * (len(ids) - 8) + [a] * 8
        b = collate([s], 0)
        with torch.no_grad():
            lp, _ = generated_logprobs(model, b.input_ids, b.attention_mask, b.loss_mask)
        s.sampled_logprobs = [x + shift if m else 0.0 for x, m in zip(lp[0].tolist(), s.loss_mask, strict=True)]
        out.append(s)
    return out


def _grad(model, samples, **kw):
    from rubricgym.trainers.config import LossConfig, OptimConfig
    from rubricgym.trainers.engine.update import UpdateSettings, compute_gradients

    model.zero_grad(set_to_none=True)
    settings = UpdateSettings(LossConfig(**kw), OptimConfig(micro_batch=2))
    stats = compute_gradients(model, samples, settings, pad_id=0)
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]), stats


def test_on_policy_samples_need_no_correction(tiny_model_dir):
    model = _model(tiny_model_dir)
    samples = _samples(model)
    plain, _ = _grad(model, samples, off_policy="none")
    tis, stats = _grad(model, samples, off_policy="tis")
    torch.testing.assert_close(tis, plain, rtol=1e-4, atol=1e-7)
    assert stats["mismatch_kl"] == pytest.approx(0.0, abs=1e-5) and stats["is_weight_mean"] == pytest.approx(1.0)


def test_tis_scales_the_gradient_by_the_truncated_weight(tiny_model_dir):
    model = _model(tiny_model_dir)
    samples = _samples(model, shift=-math.log(4.0))  # the sampler gave every token 1/4 of the learner's probability
    plain, _ = _grad(model, samples, off_policy="none")
    capped, stats = _grad(model, samples, off_policy="tis", tis_cap=2.0)
    torch.testing.assert_close(capped, 2.0 * plain, rtol=1e-4, atol=1e-7)  # weight 4 truncated to 2
    assert stats["is_truncated"] == pytest.approx(1.0) and stats["is_weight_mean"] == pytest.approx(2.0)
    assert stats["mismatch_kl"] == pytest.approx(4.0 - math.log(4.0) - 1.0, rel=1e-4)  # k3 with d = log 4
    uncapped, _ = _grad(model, samples, off_policy="tis", tis_cap=None)
    torch.testing.assert_close(uncapped, 4.0 * plain, rtol=1e-4, atol=1e-7)


def test_sampler_ratio_is_clipped_like_ppo(tiny_model_dir):
    model = _model(tiny_model_dir)
    neg = _samples(model, sign=-1.0, shift=-math.log(4.0))  # ratio pi/mu = 4 on every token
    plain, _ = _grad(model, neg, off_policy="none")
    ratio, stats = _grad(model, neg, off_policy="sampler")
    # A < 0: max(-A 4, -A clip(4)) = -A 4 is unclipped, so the gradient is 4x the on-policy one
    torch.testing.assert_close(ratio, 4.0 * plain, rtol=1e-4, atol=1e-7)
    assert stats["clip_fraction"] == pytest.approx(1.0)
    pos = _samples(model, sign=1.0, shift=-math.log(4.0))
    clipped, _ = _grad(model, pos, off_policy="sampler")  # A > 0: ratio 4 clipped at 1.28: no gradient
    assert clipped.abs().max() == 0.0


def test_several_epochs_use_the_first_epochs_logprobs(tiny_model_dir):
    from rubricgym.trainers.config import LossConfig, OptimConfig
    from rubricgym.trainers.engine.update import UpdateSettings, compute_gradients, policy_update

    model = _model(tiny_model_dir)
    samples = _samples(model)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    stats = policy_update(
        model, opt, samples, UpdateSettings(LossConfig(ppo_epochs=3), OptimConfig(micro_batch=2)), pad_id=0
    )
    assert stats["clip_fraction"] > 0  # the third epoch's ratio is against pi_old, not the moved policy
    # the same three epochs by hand, with pi_old frozen from the starting weights
    ref = _model(tiny_model_dir)
    ref.load_state_dict(start)
    old: dict[int, torch.Tensor] = {}
    opt2 = torch.optim.SGD(ref.parameters(), lr=0.5)
    settings = UpdateSettings(optim=OptimConfig(micro_batch=2))
    for _ in range(3):
        opt2.zero_grad(set_to_none=True)
        compute_gradients(ref, samples, settings, pad_id=0, old_logprobs=old)
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
        opt2.step()
    assert len(old) == 4
    for (k, a), b in zip(model.state_dict().items(), ref.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=k)
