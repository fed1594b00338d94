"""The log-probs the local policy records while sampling are the ones the learner computes by teacher forcing."""

import asyncio

import pytest
import torch

from rubricgym.agents.local import LocalAgent
from rubricgym.core.types import Message, Task
from rubricgym.trainers.algo.logprobs import generated_logprobs


@pytest.mark.slow
@pytest.mark.parametrize(("temperature", "top_p"), [(0.7, 1.0), (0.0, 1.0), (1.0, 0.5)])
def test_recorded_logprobs_match_teacher_forcing(local_model_dir, temperature, top_p):
    agent = LocalAgent(
        str(local_model_dir), temperature=temperature, top_p=top_p, max_new_tokens=12, max_batch=3, seed=3
    ).load()
    prompt = agent.prompt_ids([Message(role="user", content="Name a colour and say why you like it.")])

    async def sample():
        views = [agent.episode(Task(id="t", env_id="x", prompt=""), i) for i in range(3)]
        return await asyncio.gather(*(v.generate(prompt) for v in views))

    for turn in asyncio.run(sample()):
        assert len(turn.logprobs) == len(turn.completion_ids) > 0
        ids = torch.tensor([turn.prompt_ids + turn.completion_ids])
        mask = torch.zeros_like(ids, dtype=torch.float32)
        mask[0, len(turn.prompt_ids) :] = 1
        with torch.no_grad():
            full, _ = generated_logprobs(agent.lm, ids, torch.ones_like(ids), mask, temperature=temperature or 1.0)
        full = full[0, len(turn.prompt_ids) :]
        recorded = torch.tensor(turn.logprobs)
        if top_p == 1.0:
            torch.testing.assert_close(recorded, full, atol=1e-4, rtol=0)
        else:  # top-p renormalises over the kept tokens: never below the full distribution's log-prob
            assert bool((recorded >= full - 1e-4).all()) and bool((recorded <= 0).all())
