"""openenv-core's own client drives `rubricgym serve` (async and .sync()); HTTP routes keep OpenEnv's shapes."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient

from rubricgym.envs.toy.agents import tool_call

CALL = tool_call("calculator", expression="6 * 7")


def test_async_client_plays_an_episode_with_explicit_observation_fields(toy_server):
    async def episode():
        async with GenericEnvClient(base_url=toy_server.http_url) as env:  # http:// is rewritten to ws:// + /ws
            first = await env.reset(seed=3)
            step = await env.step({"text": CALL})
            state = await env.state()
            return first, step, state

    first, step, state = asyncio.run(episode())
    assert first.reward is None and first.done is False
    obs = first.observation
    assert [m["role"] for m in obs["messages"]] == ["system", "user"]
    assert obs["text"] == obs["messages"][0]["content"] + "\n\n" + obs["messages"][1]["content"]
    assert {t["name"] for t in obs["tools"]} == {"calculator", "answer"} and obs["stage"] == "compute"
    assert obs["truncated"] is False and obs["info"]["step"] == 0 and obs["info"]["task_id"].startswith("calc-")
    assert step.observation["text"] == "42" and step.reward == 0.0 and step.done is False
    assert [m["role"] for m in step.observation["messages"]] == ["assistant", "user"]
    assert step.observation["info"]["parse_error"] is None and step.observation["info"]["details"] == {"value": 42}
    assert state["step_count"] == 1 and state["env_id"] == "toy-calculator-v0" and state["done"] is False


def test_sync_client_and_error_replies_raise_with_their_code(toy_server):
    with GenericEnvClient(base_url=toy_server.url).sync() as env:
        with pytest.raises(RuntimeError, match="NOT_RESET"):
            env.step({"text": CALL})
        env.reset(seed=1)
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            env.step({"bogus": 1})
        result = env.step(
            {"text": "", "tool_call": {"name": "answer", "arguments": {"value": -1}}}
        )  # structured, wrong answer
        assert result.done is True and result.reward == 0.0
        assert result.observation["messages"][1]["role"] == "tool"
        with pytest.raises(RuntimeError, match="EPISODE_OVER"):
            env.step({"text": CALL})
        assert env.reset(seed=1).observation["info"]["step"] == 0  # the same socket carries on


def test_same_seed_same_task_and_truncation_is_an_explicit_field(serve):
    server = serve(env_kwargs={"max_steps": 2})
    with GenericEnvClient(base_url=server.url).sync() as env:
        a = env.reset(seed=5).observation["info"]["task_id"]
        assert env.reset(seed=5).observation["info"]["task_id"] == a
        env.step({"text": "no call"})
        last = env.step({"text": "no call"})
    assert last.done is True and last.observation["truncated"] is True
    assert last.observation["info"]["parse_error"] == "no tool call found"


def test_http_routes_continue_a_session(toy_server):
    with httpx.Client(base_url=toy_server.http_url, trust_env=False) as http:
        assert http.get("/health").json()["status"] == "healthy"
        schema = http.get("/schema").json()
        assert set(schema) == {"action", "observation", "state"}
        assert {"text", "messages", "tools", "stage", "truncated", "info"} <= set(schema["observation"]["properties"])
        meta = http.get("/metadata").json()
        assert meta["env_id"] == "toy-calculator-v0" and meta["max_steps"] == 8 and "oracle" in meta["agents"]
        reset = http.post("/reset", json={"seed": 3}).json()
        sid = reset["session_id"]
        assert reset["reward"] is None and reset["done"] is False and reset["observation"]["stage"] == "compute"
        step = http.post("/step", json={"action": {"text": CALL}, "session_id": sid}).json()
        assert step["observation"]["text"] == "42" and step["reward"] == 0.0
        assert http.get("/state", params={"session_id": sid}).json()["step_count"] == 1
        no_session = http.post("/step", json={"action": {"text": CALL}})
        assert no_session.status_code == 400 and "session_id" in no_session.json()["detail"]
        assert http.post("/step", json={"action": {"nope": 1}, "session_id": sid}).status_code == 422
        assert http.post("/close", json={"session_id": sid}).status_code == 200
        assert http.get("/state", params={"session_id": sid}).status_code == 404
        assert http.post("/reset", content=b"{not json").status_code == 422
    assert json.loads(json.dumps(meta["default_rubric"]))["criteria"]
