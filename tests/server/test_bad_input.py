"""Bad input gets a clear error reply or a clean close, and the server keeps serving every other session."""

from __future__ import annotations

import contextlib
import json
import socket
import time

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from rubricgym.envs.toy.agents import tool_call
from tests.server.conftest import call, open_ws

CALL = tool_call("calculator", expression="2 + 2")


def _code(reply: dict) -> str:
    assert reply["type"] == "error", reply
    return reply["data"]["code"]


def test_malformed_messages_get_coded_errors_on_a_socket_that_stays_open(toy_server):
    with open_ws(toy_server) as ws:
        ws.send("{not json")
        assert _code(json.loads(ws.recv(timeout=10))) == "INVALID_JSON"
        ws.send("[1, 2]")
        assert _code(json.loads(ws.recv(timeout=10))) == "VALIDATION_ERROR"
        assert _code(call(ws, "nope")) == "UNKNOWN_TYPE"
        assert _code(call(ws, "step", {"text": CALL})) == "NOT_RESET"
        assert _code(call(ws, "reset", {"seed": -1})) == "VALIDATION_ERROR"
        assert _code(call(ws, "reset", {"sede": 1})) == "VALIDATION_ERROR"  # a typo is an error, not ignored
        other_task = {"id": "x", "env_id": "other-v0", "prompt": "?"}
        assert _code(call(ws, "reset", {"task": other_task})) == "TASK_REFUSED"  # a client task, not accepted
        assert _code(call(ws, "trajectory")) == "NOT_RESET"
        assert call(ws, "reset", {"seed": 0})["type"] == "observation"
        assert _code(call(ws, "step", {"text": 5})) == "VALIDATION_ERROR"
        reply = call(ws, "step", {"text": CALL})
        assert reply["data"]["observation"]["text"] == "4"
        ws.send(json.dumps({"type": "step", "data": {"text": "\udcff"}}, ensure_ascii=True))  # lone surrogate
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"


def test_oversized_messages_are_refused_then_cut_off_beyond_the_hard_bound(toy_server, serve):
    server = serve(max_message_bytes=4096)
    with open_ws(server) as ws, open_ws(server) as other:
        call(other, "reset", {"seed": 0})
        big = json.dumps({"type": "step", "data": {"text": "x" * 8000}})
        ws.send(big)
        reply = json.loads(ws.recv(timeout=10))
        assert _code(reply) == "MESSAGE_TOO_LARGE" and "4096" in reply["data"]["message"]
        assert call(ws, "reset", {"seed": 0})["type"] == "observation"  # still open
        ws.send("x" * (4 * 4096 + 10))  # beyond uvicorn's frame limit: a clean close with 1009
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
        assert call(other, "step", {"text": CALL})["type"] == "observation"
    with httpx.Client(base_url=server.http_url, trust_env=False) as http:
        assert http.post("/reset", content=b"{" + b" " * 5000 + b"}").status_code == 413


def test_token_is_required_everywhere_but_health(serve):
    server = serve(token="s3cret")
    with pytest.raises(InvalidStatus) as refused:
        open_ws(server)
    assert refused.value.response.status_code == 403
    with pytest.raises(InvalidStatus):
        open_ws(server, additional_headers={"Authorization": "Bearer wrong"})
    with open_ws(server, additional_headers={"Authorization": "Bearer s3cret"}) as ws:
        assert call(ws, "reset", {"seed": 0})["type"] == "observation"
    with httpx.Client(base_url=server.http_url, trust_env=False) as http:
        assert http.get("/health").status_code == 200
        assert http.post("/reset", json={}).status_code == 401
        assert http.get("/metadata", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert http.get("/metadata", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def _wait(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_client_that_vanishes_mid_step_gets_its_env_closed(serve):
    server = serve(tracked=True, delay_s=0.5)
    env_server = server.app.state.server
    with open_ws(server) as other:
        call(other, "reset", {"seed": 1})
        with contextlib.suppress(ConnectionClosed, OSError), open_ws(server) as ws:  # its close fails: it is gone
            call(ws, "reset", {"seed": 0})
            ws.send(json.dumps({"type": "step", "data": {"text": CALL}}))
            ws.socket.shutdown(socket.SHUT_RDWR)  # gone without a close frame, while the step runs
            ws.socket.close()
        session_envs = server.made[1:]  # made[0] answers /metadata
        assert _wait(lambda: sum(e.closed for e in session_envs) == 1)
        assert env_server.active == 1
        assert call(other, "step", {"text": CALL})["data"]["observation"]["text"] == "4"


def test_capacity_reached_is_an_error_reply_not_a_hang(serve):
    server = serve(max_sessions=2)
    with open_ws(server) as a, open_ws(server) as b:
        call(a, "reset", {"seed": 0})
        call(b, "reset", {"seed": 0})
        with open_ws(server) as c:
            reply = json.loads(c.recv(timeout=10))
            assert _code(reply) == "CAPACITY_REACHED" and reply["data"]["max_sessions"] == 2
            with pytest.raises(ConnectionClosed) as closed:  # then closed as "going away": a client retries later
                c.recv(timeout=10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
    assert _wait(lambda: server.app.state.server.active == 0)
    with open_ws(server) as d:
        assert call(d, "reset", {"seed": 0})["type"] == "observation"


def test_idle_sessions_are_reaped_and_their_envs_closed(serve):
    server = serve(tracked=True, idle_timeout_s=0.3)
    with open_ws(server) as ws:
        call(ws, "reset", {"seed": 0})
        reply = json.loads(ws.recv(timeout=10))  # sent by the reaper, unprompted
        assert _code(reply) == "IDLE_TIMEOUT"
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        assert closed.value.rcvd is not None and (closed.value.rcvd.code, closed.value.rcvd.reason) == (
            1001,
            "IDLE_TIMEOUT",
        )
    assert _wait(lambda: server.made[1].closed)


def test_shutdown_closes_every_session_env(serve):
    server = serve(tracked=True)
    with contextlib.ExitStack() as stack:
        for _ in range(3):
            call(stack.enter_context(open_ws(server)), "reset", {"seed": 0})
        server.stop()
        assert all(e.closed for e in server.made) and len(server.made) == 4


def test_an_env_that_raises_reports_execution_error_and_keeps_the_socket(serve):
    server = serve(tracked=True)
    with open_ws(server) as ws:
        call(ws, "reset", {"seed": 0})
        env = server.made[1]

        def broken(action):
            raise ZeroDivisionError("env bug")

        env.step_typed = broken
        reply = call(ws, "step", {"text": CALL})
        assert _code(reply) == "EXECUTION_ERROR" and "env bug" in reply["data"]["message"]
        assert call(ws, "state")["type"] == "state"
