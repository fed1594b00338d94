"""The embedded model for real: export, the local transformers agent, and the OpenAI agent against vLLM."""

import asyncio

import pytest

import rubricgym
from rubricgym.agents.models import model_path
from rubricgym.agents.openai import OpenAIAgent
from rubricgym.core.llm import ChatClient
from rubricgym.core.types import Message

pytestmark = pytest.mark.slow


def test_model_path_materialises_once_and_accepts_dirs(local_model_dir):
    assert (local_model_dir / "model.safetensors").exists() and (local_model_dir / "config.json").exists()
    assert model_path("smollm2-135m-instruct") == local_model_dir
    assert model_path(str(local_model_dir)) == local_model_dir
    with pytest.raises(ValueError, match="known models"):
        model_path("gpt-17")


def test_local_agent_batches_and_records_turns(tiny_model_dir):
    from rubricgym.agents.local import LocalAgent

    agent = LocalAgent(str(tiny_model_dir), temperature=0.8, max_new_tokens=24, seed=0)  # the mechanics, not the model
    tasks = rubricgym.TaskSet.generate("toy-calculator-v0", 3, seed=0)
    views = [agent.episode(t, seed=i) for i, t in enumerate(tasks)]

    async def go():
        msgs = [[Message(role="user", content=t.prompt)] for t in tasks]
        return await asyncio.gather(*(v.act(m, []) for v, m in zip(views, msgs, strict=True)))

    texts = asyncio.run(go())
    for view, text in zip(views, texts, strict=True):
        (turn,) = view.turns
        assert turn.text == text and 0 < len(turn.completion_ids) <= 24
        assert len(turn.logprobs) == len(turn.completion_ids) and all(lp <= 0 for lp in turn.logprobs)
        assert turn.prompt_ids == agent.prompt_ids([Message(role="user", content=tasks[views.index(view)].prompt)])


def test_openai_agent_against_rubricgym_model_serve(vllm_server, tmp_path):
    agent = OpenAIAgent(vllm_server.base_url, vllm_server.model, temperature=0.0, max_tokens=48)
    tasks = rubricgym.TaskSet.generate("toy-calculator-v0", 2, seed=0)
    store = rubricgym.TrajectoryStore(tmp_path)
    report = asyncio.run(
        rubricgym.rollout_many(
            "toy-calculator-v0", agent, tasks, store=store, progress=False, env_kwargs={"max_steps": 2}
        )
    )
    assert report.ok and len(store.load()) == 2
    traj = store.load()[0]
    assert traj.model == vllm_server.model and all(s.action.text for s in traj.steps)
    reply = asyncio.run(
        ChatClient(vllm_server.base_url, vllm_server.model).chat(
            [Message(role="user", content="Say hello.")], max_tokens=8, temperature=0
        )
    )
    assert reply.message.content and reply.usage["completion_tokens"] <= 8
