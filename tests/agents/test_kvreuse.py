"""Reusing stored keys and values across turns gives the tokens a full prefill gives, and never stale ones."""

import asyncio

import pytest
import torch

from rubricgym.agents.decode import sample
from rubricgym.agents.kvreuse import KVStore


def _lm(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    return tok, AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


def _run(lm, prompts, store, temperature=0.0, seed=3, share_prefix=True):
    gen = torch.Generator().manual_seed(seed)
    return sample(
        lm,
        prompts,
        max_new_tokens=12,
        temperature=temperature,
        pad_id=0,
        is_end=lambda r, t: len(t) >= 4 + 3 * r,  # rows end at different steps: stored as they leave the batch
        generator=gen,
        share_prefix=share_prefix,
        kv_store=store,
    )


def _same(a, b):
    for x, y in zip(a, b, strict=True):
        assert x.tokens == y.tokens
        torch.testing.assert_close(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-4, rtol=0)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("share_prefix", [True, False])
def test_a_second_turn_from_stored_rows_samples_what_a_full_prefill_samples(tiny_model_dir, temperature, share_prefix):
    tok, lm = _lm(tiny_model_dir)
    first = [
        tok.encode("Compute 2 + 3."),
        tok.encode("Compute 17 * 4 - 1 and then some."),
        tok.encode("Compute 2 + 3."),
    ]
    store = KVStore(10_000)
    turn1 = _run(lm, first, store, temperature, share_prefix=share_prefix)
    _same(turn1, _run(lm, first, None, temperature, share_prefix=share_prefix))  # storing changes nothing
    held = [e.tokens.tolist() for e in store.entries.values()]
    for p, r in zip(first, turn1, strict=True):  # every row is held (greedy rows 0 and 2 inside one entry)
        assert any(h[: len(p) + len(r.tokens) - 1] == p + r.tokens[:-1] for h in held)
    assert store.hits == 0
    reply = tok.encode(" The tool said: 5.")
    second = [p + r.tokens + reply for p, r in zip(first, turn1, strict=True)]
    second.append(tok.encode("A new task with no history."))  # a row with nothing stored beside rows with history
    reused = _run(lm, second, store, temperature, seed=4, share_prefix=share_prefix)
    assert store.hits >= 3  # every continued row started from its first turn
    assert store.reused_tokens >= sum(len(p) + len(r.tokens) - 1 for p, r in zip(first, turn1, strict=True))
    _same(reused, _run(lm, second, None, temperature, seed=4, share_prefix=share_prefix))


def test_a_weight_update_empties_the_store_before_anything_stale_is_reused(tiny_model_dir):
    tok, lm = _lm(tiny_model_dir)
    prompts = [tok.encode("Compute 2 + 3."), tok.encode("Compute 9 - 4.")]
    store = KVStore(10_000)
    turn1 = _run(lm, prompts, store)
    second = [p + r.tokens + tok.encode(" ok") for p, r in zip(prompts, turn1, strict=True)]
    with torch.no_grad():
        for p in lm.parameters():
            p.mul_(1.5)  # an optimizer step: in place, as the trainer's are
    after = _run(lm, second, store)
    assert store.hits == 0  # nothing from the old weights was used
    _same(after, _run(lm, second, None))


def test_the_store_keeps_its_token_budget_and_drops_what_a_later_turn_extends(tiny_model_dir):
    tok, lm = _lm(tiny_model_dir)
    store = KVStore(10_000)
    prompt = tok.encode("Compute 2 + 3.")
    (t1,) = _run(lm, [prompt], store)
    (t2,) = _run(lm, [prompt + t1.tokens + tok.encode(" ok")], store)
    assert len(store.entries) == 1  # turn 2's entry holds turn 1's: turn 1's is gone
    (entry,) = store.entries.values()
    assert entry.tokens.tolist() == prompt + t1.tokens + tok.encode(" ok") + t2.tokens[:-1]
    assert entry.keys[0].shape[1] == len(entry.tokens) == store.held
    small = KVStore(2 * len(entry.tokens))
    for i in range(6):
        _run(lm, [tok.encode(f"Task number {i} is here.")], small)
        assert small.held <= small.max_tokens
    assert 1 <= len(small.entries) < 6  # the least recently used went first
    with pytest.raises(ValueError, match="at least 1 token"):
        KVStore(0)


def test_a_local_agent_with_reuse_plays_the_episodes_it_plays_without(tiny_model_dir):
    """Greedy multi-turn episodes on the toy env: the same actions, turn after turn."""
    import rubricgym
    from rubricgym.agents.local import LocalAgent
    from rubricgym.core.rollout import rollout

    def play(reuse: int):
        agent = LocalAgent(str(tiny_model_dir), temperature=0.0, max_new_tokens=10, kv_reuse_tokens=reuse)
        env = rubricgym.make("toy-calculator-v0", max_steps=3)
        actions = []
        for i, task in enumerate(env.task_set(2, seed=5)):
            traj = asyncio.run(rollout(env, agent, task, seed=i))
            actions.append([s.action.text for s in traj.steps])
        env.close()
        return actions, agent._shared.kv

    plain, _ = play(0)
    reused, store = play(50_000)
    assert reused == plain and all(len(a) == 3 for a in plain)
    assert store.hits >= 4 and store.reused_tokens > 0  # turns 2 and 3 of both episodes
