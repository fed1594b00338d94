"""The samplers record the log-prob of the distribution each token was drawn from (temperature, then top-p
renormalised over the kept tokens): the ``mu`` of the trainer's importance weight ``min(pi_old / mu, cap)``."""

import asyncio
import math

import pytest
import torch

from rubricgym.agents.decode import _process, sample


def nucleus_logprobs(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Independent reference in float64: log(p_T / kept mass) on the nucleus (the smallest set of most likely tokens
    whose mass reaches top_p), -inf elsewhere."""
    p = (logits.double() / temperature).softmax(-1)
    out = torch.full_like(p, -math.inf)
    for r in range(p.shape[0]):
        probs, order = p[r].sort(descending=True)
        n = int((probs.cumsum(0) < top_p).sum()) + 1  # the first prefix whose mass reaches top_p
        kept = order[:n]
        out[r, kept] = (p[r, kept] / p[r, kept].sum()).log()
    return out


def test_process_renormalises_over_the_nucleus_and_is_plain_log_softmax_at_top_p_1():
    torch.manual_seed(0)
    logits = torch.randn(4, 50) * 3
    for t in (0.6, 1.0, 1.7):
        # top_p = 1: exactly the learner's full-vocabulary distribution at the temperature, bit for bit
        plain = (logits / t).log_softmax(-1) if t != 1.0 else logits.log_softmax(-1)
        assert torch.equal(_process(logits, t, 1.0), plain)
        for top_p in (0.3, 0.8, 0.95):
            got, ref = _process(logits, t, top_p), nucleus_logprobs(logits, t, top_p)
            assert torch.equal(got.isinf(), ref.isinf())
            kept = ~ref.isinf()
            torch.testing.assert_close(got[kept].double(), ref[kept], atol=1e-5, rtol=0)
            assert bool((got[kept] > (logits / t).log_softmax(-1)[kept]).any())  # renormalised, not just truncated
    assert torch.equal(_process(logits, 0.0, 0.5), logits.log_softmax(-1))  # greedy: temperature 1, no nucleus


def _peaked_tiny_lm(tiny_model_dir):
    """The tiny random Llama with its final norm scaled so its next-token distributions are peaked (a random
    tiny model's are near uniform), so nuclei range from one token to thousands."""
    from transformers import AutoModelForCausalLM

    lm = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        lm.model.norm.weight.mul_(15.0)
    return lm


@pytest.mark.parametrize("share_prefix", [True, False])
def test_local_sampler_records_log_prob_renormalised_over_the_nucleus(tiny_model_dir, share_prefix):
    lm = _peaked_tiny_lm(tiny_model_dir)
    temperature, top_p = 0.8, 0.7
    prompts = [[1, 5, 9, 13, 200], [1, 5, 9, 14], [1, 5, 9, 13, 200]]
    rows = sample(
        lm,
        prompts,
        max_new_tokens=10,
        temperature=temperature,
        top_p=top_p,
        is_end=lambda r, t: len(t) >= 6 + 2 * r,
        generator=torch.Generator().manual_seed(7),
        share_prefix=share_prefix,
    )
    renorm = []
    for prompt, row in zip(prompts, rows, strict=True):
        assert len(row.tokens) == len(row.logprobs) > 0
        ids = torch.tensor([prompt + row.tokens])
        with torch.no_grad():
            logits = lm(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
        ref = nucleus_logprobs(logits, temperature, top_p)
        toks = torch.tensor(row.tokens)
        expected = ref.gather(-1, toks[:, None]).squeeze(-1)
        assert bool(expected.isfinite().all()), "a drawn token outside the nucleus"
        torch.testing.assert_close(torch.tensor(row.logprobs, dtype=torch.float64), expected, atol=1e-4, rtol=0)
        full = (logits.double() / temperature).log_softmax(-1).gather(-1, toks[:, None]).squeeze(-1)
        renorm += (expected - full).tolist()  # -log(kept mass) per token
    # the renormalisation is not negligible here, so the check above tells the processed from the full log-prob
    assert max(renorm) > 0.1 and min(renorm) >= 0


def test_local_sampler_at_top_p_1_and_greedy_records_the_full_distribution(tiny_model_dir):
    lm = _peaked_tiny_lm(tiny_model_dir)
    prompt = [1, 5, 9, 13, 200]
    for temperature in (0.8, 0.0):
        (row,) = sample(
            lm,
            [prompt],
            max_new_tokens=8,
            temperature=temperature,
            top_p=1.0,
            is_end=lambda r, t: False,
            generator=torch.Generator().manual_seed(3),
        )
        ids = torch.tensor([prompt + row.tokens])
        with torch.no_grad():
            logits = lm(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
        full = (logits / (temperature or 1.0)).log_softmax(-1)
        if temperature == 0:
            assert row.tokens == full.argmax(-1).tolist()
        picked = full.gather(-1, torch.tensor(row.tokens)[:, None]).squeeze(-1)
        torch.testing.assert_close(torch.tensor(row.logprobs), picked, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_vllm_records_processed_logprobs_the_learner_recomputes(vllm_server, local_model_dir):
    """vLLM (bf16) returns, per sampled token, the learner's (fp32) temperature log-prob renormalised over the top-p
    nucleus; not vLLM's default raw log-probs (temperature 1, no nucleus) nor the un-renormalised ones."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rubricgym.core.types import Message
    from rubricgym.trainers.algo.logprobs import generated_logprobs
    from rubricgym.trainers.engine.vllm_backend import VLLMBackend

    temperature, top_p = 0.7, 0.6
    tok = AutoTokenizer.from_pretrained(local_model_dir)
    lm = AutoModelForCausalLM.from_pretrained(local_model_dir, dtype=torch.float32).eval()
    backend = VLLMBackend(
        vllm_server.base_url,
        vllm_server.model,
        tok,
        lambda task: None,  # no env: only completions are requested
        temperature=temperature,
        top_p=top_p,
        max_new_tokens=24,
    )
    try:
        backend.check_processed_logprobs()  # the session's server passes the probe a trainer runs on connect
        prompts = [
            backend.render([Message(role="user", content=c)])
            for c in ("Write one sentence about the sea.", "List three fruits.", "Why is the sky blue?")
        ]

        async def turns():
            return await asyncio.gather(*(backend.complete(p, temperature, seed) for seed, p in enumerate(prompts)))

        served, processed, raw, unrenormalised = [], [], [], []
        for turn in asyncio.run(turns()):
            assert len(turn.completion_ids) == len(turn.logprobs) > 0
            ids = torch.tensor([turn.prompt_ids + turn.completion_ids])
            mask = torch.zeros_like(ids, dtype=torch.float32)
            mask[0, len(turn.prompt_ids) :] = 1
            n = len(turn.prompt_ids)
            with torch.no_grad():
                pi_t, _ = generated_logprobs(lm, ids, torch.ones_like(ids), mask, temperature=temperature)
                logits = lm(input_ids=ids).logits[0, n - 1 : -1].float()
            pi_t = pi_t[0, n:].double()
            nucleus = nucleus_logprobs(logits, temperature, top_p)
            log_kept_mass = torch.stack(
                [
                    torch.logsumexp((logits[i].double() / temperature).log_softmax(-1)[nucleus[i].isfinite()], 0)
                    for i in range(len(logits))
                ]
            )
            served += turn.logprobs
            processed += (pi_t - log_kept_mass).tolist()
            unrenormalised += pi_t.tolist()
            raw += logits.double().log_softmax(-1).gather(-1, ids[0, n:, None]).squeeze(-1).tolist()
    finally:
        backend.close()
    served_t = torch.tensor(served, dtype=torch.float64)

    def median_err(ref: list[float]) -> float:
        return float((served_t - torch.tensor(ref, dtype=torch.float64)).abs().median())

    err, err_raw, err_unrenorm = median_err(processed), median_err(raw), median_err(unrenormalised)
    # bf16 server vs fp32 learner: per-token log-prob differences of a few hundredths, more where the two draw
    # the nucleus boundary differently; the alternatives are off by the log of the kept mass (top_p 0.6: up to 0.5)
    # and by the temperature
    assert err < 0.05, (err, err_raw, err_unrenorm)
    assert err_raw > 3 * err and err_unrenorm > 3 * err, (err, err_raw, err_unrenorm)
    close = (served_t - torch.tensor(processed, dtype=torch.float64)).abs() < 0.15
    assert float(close.double().mean()) >= 0.9, (err, err_raw, err_unrenorm)
