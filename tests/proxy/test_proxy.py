"""The recording proxy (issue #43 item 3): an OpenAI client talks to the embedded policy through it, and every call
is recorded with the exact token ids the sampler produced, grouped into sessions; what it cannot record it
refuses with a clear error."""

from __future__ import annotations

import json

import openai
import pytest

from rubricgym.agents.local import LocalAgent
from rubricgym.proxy.app import PolicyGenerator
from rubricgym.proxy.episodes import ProxyServer
from rubricgym.proxy.sessions import SessionLog, load_sessions
from rubricgym.proxy.wire import to_messages, tool_specs

MODEL = "smollm2-135m-instruct"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }
]
ASK = [
    {"role": "system", "content": "You solve arithmetic problems."},
    {"role": "user", "content": "What is 17 * 23? Use the calculator."},
]


@pytest.fixture(scope="module")
def agent() -> LocalAgent:
    return LocalAgent(MODEL, temperature=0.7, max_new_tokens=24, seed=3, threads=1).load()


@pytest.fixture()
def proxy(agent, tmp_path):
    gen = PolicyGenerator(agent, SessionLog(tmp_path / "proxy"), seed=5)
    server = ProxyServer(gen)
    yield gen, server, openai.OpenAI(base_url=server.base_url, api_key="rgs-episode-1", max_retries=0)
    server.close()


def test_a_call_is_recorded_with_the_samplers_own_token_ids(proxy, agent):
    gen, _, client = proxy
    reply = client.chat.completions.create(model=MODEL, messages=ASK, tools=TOOLS)
    call = gen.log.sessions["rgs-episode-1"].calls[0]
    # the prompt is what the local sampler renders for these messages, tools described as an env describes them
    expected_prompt = agent.render(to_messages(ASK, tool_specs(TOOLS), {}))
    assert call.prompt_ids == expected_prompt
    # the same episode view and seed in the sampler itself generate the same tokens: what the trainer trains on
    import asyncio

    view = agent.episode(None, 5)  # type: ignore[arg-type]
    turn = asyncio.run(view.generate(expected_prompt))
    assert call.completion_ids == turn.completion_ids and call.logprobs == pytest.approx(turn.logprobs)
    assert len(call.logprobs) == len(call.completion_ids) > 0
    message = reply.choices[0].message
    said = message.content or json.dumps([c.function.model_dump() for c in message.tool_calls or []])
    assert said and reply.usage.completion_tokens == len(call.completion_ids)
    assert reply.usage.prompt_tokens == len(call.prompt_ids)


def test_streaming_returns_the_same_recorded_reply(proxy):
    gen, _, client = proxy
    stream = client.chat.completions.create(model=MODEL, messages=ASK, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    call = gen.log.sessions["rgs-episode-1"].calls[0]
    assert text == call.text and call.reply["content"] == text


def test_calls_group_into_sessions_by_key_or_by_conversation(proxy):
    gen, server, client = proxy
    first = client.chat.completions.create(model=MODEL, messages=ASK, tools=TOOLS)
    follow = [*ASK, first.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "And 2+2?"}]
    client.chat.completions.create(model=MODEL, messages=follow, tools=TOOLS)
    assert len(gen.log.sessions["rgs-episode-1"].calls) == 2
    # no key at all: the conversation itself groups (the second request extends the first and its reply)
    plain = openai.OpenAI(base_url=server.base_url, api_key="sk-none", max_retries=0)
    a = plain.chat.completions.create(model=MODEL, messages=ASK)
    plain.chat.completions.create(
        model=MODEL, messages=[*ASK, {"role": "assistant", "content": a.choices[0].message.content}, ASK[1]]
    )
    plain.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Another episode."}])
    conv = [s for k, s in gen.log.sessions.items() if k.startswith("conv-")]
    assert sorted(len(s.calls) for s in conv) == [1, 2]
    # the follow-up prompt extends the first call's prompt and completion token for token (no re-tokenisation)
    two = next(s for s in conv if len(s.calls) == 2).calls
    assert two[1].prompt_ids[: len(two[0].prompt_ids)] == two[0].prompt_ids


def test_rewards_end_sessions_and_everything_is_on_disk(proxy, tmp_path):
    gen, server, client = proxy
    client.chat.completions.create(model=MODEL, messages=ASK)
    import httpx

    r = httpx.post(f"{server.base_url}/sessions/rgs-episode-1/reward", json={"reward": 0.75, "solved": False})
    assert r.status_code == 200 and r.json()["reward"] == 0.75
    with pytest.raises(openai.APIStatusError, match="has ended"):
        client.chat.completions.create(model=MODEL, messages=ASK)
    missing = httpx.post(f"{server.base_url}/sessions/nope/reward", json={"reward": 1})
    assert missing.status_code == 404 and "GET /v1/sessions" in missing.json()["error"]["message"]
    back = load_sessions(tmp_path / "proxy")
    s = back["rgs-episode-1"]
    assert s.reward == 0.75 and s.solved is False and len(s.calls) == 1
    assert s.calls[0].turn().completion_ids == gen.log.sessions["rgs-episode-1"].calls[0].completion_ids


def test_what_cannot_be_recorded_is_refused_with_a_clear_error(proxy):
    _, _, client = proxy
    with pytest.raises(openai.NotFoundError, match=f"serves the model '{MODEL}'"):
        client.chat.completions.create(model="gpt-4o", messages=ASK)
    with pytest.raises(openai.BadRequestError, match="n > 1"):
        client.chat.completions.create(model=MODEL, messages=ASK, n=2)
    with pytest.raises(openai.BadRequestError, match="samples at 0.7"):
        client.chat.completions.create(model=MODEL, messages=ASK, temperature=0.2)
    with pytest.raises(openai.BadRequestError, match="only text content parts"):
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": [image]}])
