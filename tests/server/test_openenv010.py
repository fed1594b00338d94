"""OpenEnv 0.10 on ``rubricgym serve``: ``openenv validate --url`` passes for every built-in env, ``POST /mcp``
lists and calls the env's tools with the session rules of ``/ws``, and the Task API numbers the server's own tasks
(hidden fields stripped) for ``reset(split, index)``."""

from __future__ import annotations

import httpx
import pytest
from openenv.cli._validation import validate_running_environment
from verifiers.v1.tasksets.openenv.taskset import parse_action

from rubricgym.server import ServerConfig, ServerThread
from rubricgym.server.protocol import schema

FAST_ENVS = ["toy-calculator-v0", "deepsearch-v0", "clinical-v0", "clinical-cost-v0"]
SLOW_ENVS = ["swe-v0", "gui-v0", "web-example-v0"]


def _validate(env_id: str) -> None:
    with ServerThread(ServerConfig(env_id=env_id, port=0)) as server:
        report = validate_running_environment(server.http_url, timeout_s=30)
    failed = [c for c in report["criteria"] if not c["passed"]]
    assert report["passed"], failed
    assert report["mode"] == "simulation"
    assert {c["id"] for c in report["criteria"]} >= {"mcp_endpoint", "schema_endpoint", "metadata_endpoint"}


def test_the_built_in_env_lists_are_covered():
    """Every env ``import rubricgym`` registers (read in a fresh process: other tests register envs of their own in
    this one) is validated above, MiniWoB++ pages aside."""
    import json
    import subprocess
    import sys

    code = "import json, rubricgym; print(json.dumps([s.id for s in rubricgym.core.registry.list_envs()]))"
    ids = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    built_in = {i for i in ids if not i.startswith("miniwob-")}
    assert built_in and built_in <= set(FAST_ENVS + SLOW_ENVS), built_in - set(FAST_ENVS + SLOW_ENVS)


@pytest.mark.parametrize("env_id", FAST_ENVS)
def test_openenv_validate_url_passes(env_id):
    _validate(env_id)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", SLOW_ENVS)
def test_openenv_validate_url_passes_sandbox_and_browser_envs(env_id):
    _validate(env_id)


def rpc(http: httpx.Client, url: str, method: str, **params) -> dict:
    r = http.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == 7
    return body


def test_mcp_lists_and_calls_tools_with_the_session_rules_of_ws(toy_server):
    url = toy_server.http_url
    with httpx.Client(trust_env=False, timeout=30) as http:
        tools = rpc(http, url, "tools/list")["result"]["tools"]
        assert {t["name"] for t in tools} == {"calculator", "answer"}
        assert tools[0]["inputSchema"]["type"] == "object"

        no_session = rpc(http, url, "tools/call", name="calculator", arguments={"expression": "1+1"})
        assert no_session["error"]["data"]["code"] == "NOT_RESET"
        assert "openenv/session/create" in no_session["error"]["message"]

        created = rpc(http, url, "openenv/session/create", split="train", index=3)["result"]
        sid = created["session_id"]
        task = http.post(f"{url}/toy-calculator-v0/task", json={"split": "train", "index": 3}).json()["task"]
        assert created["observation"]["info"]["task_id"] == task["id"]

        ok = rpc(http, url, "tools/call", session_id=sid, name="calculator", arguments={"expression": "6*7"})["result"]
        assert ok["content"] == [{"type": "text", "text": "42"}] and ok["isError"] is False
        assert ok["structuredContent"]["done"] is False

        bad = rpc(http, url, "tools/call", session_id=sid, name="calculator", arguments={"expr": "1"})["result"]
        assert bad["isError"] is True and "expression" in bad["content"][0]["text"]  # says how to call it

        done = rpc(http, url, "tools/call", session_id=sid, name="answer", arguments={"value": 1})["result"]
        assert done["structuredContent"]["done"] is True
        over = rpc(http, url, "tools/call", session_id=sid, name="answer", arguments={"value": 1})
        assert over["error"]["data"]["code"] == "EPISODE_OVER"

        # the MCP session is an HTTP session: POST /reset continues it, and close ends it
        again = http.post(f"{url}/reset", json={"session_id": sid, "seed": 1}).json()
        assert again["session_id"] == sid
        assert rpc(http, url, "openenv/session/close", session_id=sid)["result"]["closed"] is True
        gone = rpc(http, url, "tools/call", session_id=sid, name="calculator", arguments={"expression": "1"})
        assert "no session" in gone["error"]["message"]


def test_mcp_answers_what_is_not_jsonrpc_with_a_jsonrpc_error(toy_server):
    with httpx.Client(trust_env=False) as http:
        for body in (b"{}", b"not json", b"[]"):
            r = http.post(f"{toy_server.http_url}/mcp", content=body, headers={"content-type": "application/json"})
            assert r.status_code == 200 and r.json()["jsonrpc"] == "2.0" and r.json()["error"]["code"] < 0


def test_mcp_needs_the_token_like_every_route(serve):
    server = serve(token="s3cret")
    with httpx.Client(trust_env=False) as http:
        r = http.post(f"{server.http_url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert r.status_code == 401
        r = http.post(
            f"{server.http_url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": "Bearer s3cret"},
        )
        assert r.status_code == 200 and r.json()["result"]["tools"]


def test_task_api_numbers_the_servers_tasks_without_hidden_fields(serve):
    server = serve(tasks_per_split=5, task_seed=3)
    url, env = server.http_url, "toy-calculator-v0"
    with httpx.Client(trust_env=False, timeout=30) as http:
        assert http.get(f"{url}/list_environments").json() == [env]
        splits = http.get(f"{url}/{env}/splits").json()
        assert {"name": "train", "type": "train"} in splits and {"name": "test", "type": "test"} in splits
        assert http.post(f"{url}/{env}/num_tasks", json={"split": "train"}).json() == {"num_tasks": 5}
        tasks = http.post(f"{url}/{env}/tasks", json={"split": "train"}).json()["tasks"]
        from rubricgym import make

        expected = make(env).task_set(5, seed=3, split="train")
        assert [t["id"] for t in tasks] == [t.id for t in expected]
        assert [t["index"] for t in tasks] == list(range(5))
        assert all("hidden" not in t for t in tasks)
        one = http.post(f"{url}/{env}/task", json={"split": "train", "index": 4}).json()["task"]
        assert one["id"] == expected[4].id and "hidden" not in one
        ranged = http.post(f"{url}/{env}/task_range", json={"split": "train", "start": 1, "stop": 3}).json()
        assert [t["index"] for t in ranged["tasks"]] == [1, 2]

        out_of_range = http.post(f"{url}/{env}/task", json={"split": "train", "index": 5})
        assert out_of_range.status_code == 400 and "0..4" in out_of_range.json()["detail"]
        assert http.post(f"{url}/{env}/num_tasks", json={"split": "nope"}).status_code == 404
        assert http.get(f"{url}/other-env/splits").status_code == 404

        reset = http.post(f"{url}/reset", json={"split": "train", "index": 4}).json()
        assert reset["observation"]["info"]["task_id"] == expected[4].id
        assert expected[4].prompt in reset["observation"]["text"]
        half = http.post(f"{url}/reset", json={"split": "train"})
        assert half.status_code == 400 and "split and index go together" in half.json()["detail"]


def test_task_api_sends_hidden_fields_only_to_a_trusted_server(serve):
    server = serve(tasks_per_split=2, trusted=True)
    with httpx.Client(trust_env=False) as http:
        task = http.post(f"{server.http_url}/toy-calculator-v0/task", json={"split": "train", "index": 0}).json()
    assert "answer" in task["task"]["hidden"]


def test_a_generic_client_maps_a_raw_reply_onto_our_action(toy_server):
    """verifiers' OpenEnv taskset turns a plain reply into ``{required_field: reply}``: ours is ``text``."""
    action_schema = httpx.get(f"{toy_server.http_url}/schema", trust_env=False).json()["action"]
    assert action_schema == schema()["action"] and action_schema["required"] == ["text"]
    reply = '<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}</tool_call>'
    action = parse_action(reply, action_schema)
    with httpx.Client(trust_env=False) as http:
        sid = http.post(f"{toy_server.http_url}/reset", json={"seed": 0}).json()["session_id"]
        out = http.post(f"{toy_server.http_url}/step", json={"action": action, "session_id": sid}).json()
    assert out["observation"]["text"] == "4"


def test_mcp_over_websocket_ties_the_episode_to_the_connection(toy_server):
    """``WS /mcp``: the same methods as ``POST /mcp``; the connection's session fills in where a request names none,
    and closing the socket closes the episode."""
    import json
    import time

    from websockets.sync.client import connect

    url = toy_server.http_url.replace("http://", "ws://") + "/mcp"

    def ask(ws, method: str, **params) -> dict:
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": method, "params": params}))
        reply = json.loads(ws.recv(timeout=30))
        assert reply["jsonrpc"] == "2.0" and reply["id"] == 3
        return reply

    with connect(url) as ws:
        assert {t["name"] for t in ask(ws, "tools/list")["result"]["tools"]} == {"calculator", "answer"}
        assert ask(ws, "tools/call", name="calculator", arguments={"expression": "1"})["error"]["data"]["code"] == (
            "NOT_RESET"
        )
        sid = ask(ws, "openenv/session/create", split="train", index=2)["result"]["session_id"]
        ok = ask(ws, "tools/call", name="calculator", arguments={"expression": "6*7"})["result"]  # no session_id
        assert ok["content"] == [{"type": "text", "text": "42"}]
        ws.send("{}")
        assert json.loads(ws.recv(timeout=30))["error"]["code"] == -32600
        assert sid in toy_server.app.state.server.sessions
    deadline = time.monotonic() + 10
    while sid in toy_server.app.state.server.sessions and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sid not in toy_server.app.state.server.sessions  # the socket's episode closed with it
