"""What a client may send and receive (issue 23, items 1-6): the server's own tasks by default, no host path in a
client task, no hidden data on the wire unless trusted, capped sizes, env calls off the event loop, bodies refused
before they are read, and auth on every route but /health."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.sync.client import connect

import rubricgym
from rubricgym.core.types import Task
from rubricgym.envs.toy.agents import RandomAgent, tool_call
from rubricgym.envs.toy.calculator import CalculatorEnv
from tests.server.conftest import ENV, call, open_ws

CALL = tool_call("calculator", expression="2 + 2")
ROOT = Path(__file__).resolve().parents[2]


def _code(reply: dict) -> str:
    assert reply["type"] == "error", str(reply)[:500]
    return reply["data"]["code"]


# ---- item 1: a client's task cannot make the server open host files ---------------------------------------


@pytest.fixture
def secret_corpus(tmp_path):
    folder = tmp_path / "host-secrets"
    folder.mkdir()
    (folder / "secret.txt").write_text("The launch code is TOPSECRET4711. Keep it from every client.\n")
    return folder


@pytest.mark.parametrize("accept", [False, True], ids=["default", "accept-client-tasks"])
def test_a_client_task_naming_a_host_corpus_is_refused(serve, tmp_path, secret_corpus, accept):
    options = {"accept_client_tasks": True} if accept else {}
    server = serve(env_id="deepsearch-v0", env_kwargs={"n_docs": 100, "cache_dir": str(tmp_path / "cache")}, **options)
    task = {"id": "t", "env_id": "deepsearch-v0", "prompt": "?", "params": {"world": {"corpus": str(secret_corpus)}}}
    with open_ws(server) as ws:
        reply = call(ws, "reset", {"task": task})
        if reply["type"] == "observation":  # the old server indexed the folder: the secret was one search away
            found = call(ws, "step", {"text": tool_call("search", query="launch code TOPSECRET4711")})
            pytest.fail(f"the server played a client task naming {secret_corpus}: {str(found)[:300]}")
        assert _code(reply) == "TASK_REFUSED"
        assert call(ws, "reset", {"seed": 0})["type"] == "observation"  # its own tasks still play


def test_client_tasks_are_off_by_default_and_checked_when_on(serve):
    mine = {"id": "mine", "env_id": ENV, "prompt": "What is 2 + 2?", "hidden": {"answer": 4, "steps": ["2 + 2"]}}
    with open_ws(serve()) as ws:
        assert _code(call(ws, "reset", {"task": mine})) == "TASK_REFUSED"
    with open_ws(serve(accept_client_tasks=True)) as ws:
        assert call(ws, "reset", {"task": mine})["type"] == "observation"
        for field, value in [
            ("hidden", {"snapshot": "/etc"}),  # a SWE snapshot folder
            ("params", {"kb": "../../kb"}),  # a clinical knowledge base, relative
            ("params", {"kb": "~/notes"}),
            ("params", {"deep": [{"x": {"path": "file:///etc/passwd"}}]}),
            ("params", {"repo": os.path.relpath(__file__)}),  # names a file relative to the server's cwd
        ]:
            reply = call(ws, "reset", {"task": {**mine, field: value}})
            assert _code(reply) == "TASK_REFUSED" and field in reply["data"]["message"], (field, value)


def test_host_path_fields_names_each_offending_field():
    from rubricgym.server.policy import host_path_fields

    task = Task(
        id="t", env_id="e", prompt="2 / 3", params={"a": "2 / 3", "b": ["x", "/srv/data"]}, hidden={"c": "C:\\x"}
    )
    assert host_path_fields(task) == ["hidden.c", "params.b[1]"]


# ---- item 2: hidden data never on the wire unless trusted ---------------------------------------------------


@pytest.mark.parametrize("trusted", [False, True])
def test_hidden_data_reaches_only_a_trusted_client(serve, trusted):
    server = serve(trusted=True) if trusted else serve()
    with open_ws(server) as ws:
        tasks = call(ws, "tasks", {"n": 3, "seed": 1})["data"]
        assert all(("hidden" in t) == trusted for t in tasks)
        assert call(ws, "reset", {"task_id": tasks[0]["id"]})["type"] == "observation"
        call(ws, "step", {"text": CALL})
        record = call(ws, "trajectory")["data"]
        assert ("hidden" in record["task"]) == trusted and record["task"]["id"] == tasks[0]["id"]
        if trusted:
            assert record["task"]["hidden"] and record["task"]["hidden"] == tasks[0]["hidden"]


def test_remote_rollouts_on_an_untrusted_server_play_the_servers_tasks(toy_server):
    remote = rubricgym.make(toy_server.url)
    tasks = remote.task_set(3, seed=5)
    local = rubricgym.make(ENV).task_set(3, seed=5)
    assert [t.id for t in tasks] == [t.id for t in local] and all(not t.hidden for t in tasks)
    for seed, (there_task, here_task) in enumerate(zip(tasks, local, strict=True)):
        there = asyncio.run(
            rubricgym.rollout(rubricgym.make(toy_server.url), RandomAgent(seed=1), there_task, seed=seed)
        )
        here = asyncio.run(rubricgym.rollout(rubricgym.make(ENV), RandomAgent(seed=1), here_task, seed=seed))
        assert there.outcome.reward == here.outcome.reward and len(there.steps) == len(here.steps)
        assert not there.task.hidden
    with open_ws(toy_server) as ws:
        assert _code(call(ws, "reset", {"task_id": "never-handed-out"})) == "UNKNOWN_TASK"
        edited = {**tasks[0].model_dump(mode="json", exclude={"hidden"}), "prompt": "changed"}
        assert _code(call(ws, "reset", {"task": edited})) == "TASK_REFUSED"


# ---- item 3: capped sizes, env calls off the event loop -----------------------------------------------------


def test_tasks_requests_are_capped(serve):
    with open_ws(serve()) as ws:
        reply = call(ws, "tasks", {"n": 5000})
        assert _code(reply) == "LIMIT_EXCEEDED" and reply["data"]["max_tasks"] == 1000
    with open_ws(serve(max_tasks=50)) as ws:
        assert _code(call(ws, "tasks", {"n": 51})) == "LIMIT_EXCEEDED"
        assert len(call(ws, "tasks", {"n": 50})["data"]) == 50
        assert _code(call(ws, "tasks", {"n": 1, "split": "x" * 1000})) == "VALIDATION_ERROR"
        assert _code(call(ws, "reset", {"seed": 2**70})) == "VALIDATION_ERROR"


class SlowReset(CalculatorEnv):
    """A calculator whose reset with a seed under 1000 blocks for ``busy_s`` (a sandbox or a world being built);
    seeds from 1000 reset at once."""

    busy_s = 1.0

    def reset_typed(self, seed=None, task=None):
        if seed is None or seed < 1000:
            time.sleep(self.busy_s)  # blocking, as a subprocess or a container start is
        return super().reset_typed(seed=seed, task=task)


class BusyReset(CalculatorEnv):
    """A calculator whose reset with a seed under 1000 computes in pure Python for 1 s (a world being generated:
    it holds the interpreter lock); seeds from 1000 reset at once."""

    def reset_typed(self, seed=None, task=None):
        end = time.perf_counter() + (1.0 if seed is None or seed < 1000 else 0.0)
        x = 0
        while time.perf_counter() < end:
            x += 1
        return super().reset_typed(seed=seed, task=task)


POLL_HEALTH = """
import json, sys, time, httpx
out, end = [], time.monotonic() + float(sys.argv[2])
with httpx.Client(base_url=sys.argv[1], trust_env=False, timeout=30) as http:
    while time.monotonic() < end:
        t0 = time.perf_counter()
        assert http.get("/health").status_code == 200
        out.append(time.perf_counter() - t0)
        time.sleep(0.01)
print(json.dumps(out))
"""


def _slow_resets(url: str, resets: int) -> None:
    with connect(url + "/ws", proxy=None) as ws:
        for seed in range(resets):
            assert call(ws, "reset", {"seed": seed})["type"] == "observation"


SERVE_SLOW = """
import sys
from rubricgym.server import ServerConfig, ServerThread, create_app
from tests.server import test_policy
config = ServerConfig(env_id="toy-calculator-v0", port=0, isolation=sys.argv[2])
with ServerThread(config, app=create_app(config, getattr(test_policy, sys.argv[1]))) as server:
    print(server.url, flush=True)
    sys.stdin.read()
"""


def _serve_in_process(env_class: str, isolation: str) -> Iterator[str]:
    """A server of ``test_policy.<env_class>`` in its own process (as in use: clients do not share its
    interpreter); yields its ws:// URL."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE_SLOW, env_class, isolation],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("ws://"), "the slow server did not start"
        yield url
    finally:
        proc.stdin.close()
        proc.wait(60)


@pytest.fixture
def slow_server() -> Iterator[str]:
    yield from _serve_in_process("SlowReset", "thread")


def test_process_isolation_plays_episodes_in_worker_processes():
    """``isolation="process"``: each session's env in a process of its own (python-heavy envs), same protocol."""
    for url in _serve_in_process("BusyReset", "process"):
        with connect(url + "/ws", proxy=None) as ws, connect(url + "/ws", proxy=None) as other:
            tasks = call(ws, "tasks", {"n": 2, "seed": 3})["data"]
            assert all("hidden" not in t for t in tasks)
            assert call(ws, "reset", {"task_id": tasks[0]["id"]})["type"] == "observation"
            assert call(other, "reset", {"seed": 1001})["type"] == "observation"
            reply = call(ws, "step", {"text": CALL})["data"]
            assert reply["observation"]["text"] == "4" and reply["observation"]["info"]["step"] == 1
            assert call(ws, "state")["data"]["step_count"] == 1
            assert "hidden" not in call(ws, "trajectory")["data"]["task"]
            assert _code(call(ws, "reset", {"task": {**tasks[1], "prompt": "changed"}})) == "TASK_REFUSED"
            assert _code(call(ws, "reset", {"seed": -1})) == "VALIDATION_ERROR"
            assert call(other, "step", {"text": CALL})["data"]["observation"]["text"] == "4"


def test_health_answers_fast_while_other_sessions_run_slow_resets(slow_server):
    """Bounded loopback load: 4 sessions x 3 blocking resets of 1 s each; /health and a fifth session's fast resets
    and steps are not held up behind them. A request queued behind a blocked loop waits for the rest of a 1-s
    reset, so the bounds are fractions of ``busy_s`` (half for /health's p99, 0.9 for the slowest fast step), loose
    enough for a loaded machine (p99 134 ms was seen at load 11) and still far from a blocked loop."""
    http_url = slow_server.replace("ws://", "http://")
    poller = subprocess.Popen([sys.executable, "-c", POLL_HEALTH, http_url, "3.0"], stdout=subprocess.PIPE, text=True)
    workers = [threading.Thread(target=_slow_resets, args=(slow_server, 3)) for _ in range(4)]
    for w in workers:
        w.start()
    step_s: list[float] = []
    with connect(slow_server + "/ws", proxy=None) as ws:
        while any(w.is_alive() for w in workers):
            s0 = time.perf_counter()
            assert call(ws, "reset", {"seed": 1000 + len(step_s)})["type"] == "observation"
            assert call(ws, "step", {"text": CALL})["type"] == "observation"
            step_s.append(time.perf_counter() - s0)
            time.sleep(0.01)
    for w in workers:
        w.join()
    latencies = json.loads(poller.communicate(timeout=60)[0])
    latencies.sort()
    p99 = latencies[int(0.99 * (len(latencies) - 1))]
    assert len(latencies) > 20, latencies
    busy_s = SlowReset.busy_s
    assert p99 < 0.5 * busy_s, f"/health p99 {p99 * 1000:.0f} ms over {len(latencies)} polls during slow resets"
    assert max(step_s) < 0.9 * busy_s, f"a fast session's reset + step waited {max(step_s):.2f} s behind slow resets"


# ---- items 4 and 5: HTTP bodies ------------------------------------------------------------------------------


def _raw(server, head: bytes, timeout_s: float = 10.0) -> socket.socket:
    host, port = server.http_url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=timeout_s)
    sock.sendall(head)
    return sock


def _status(sock: socket.socket) -> int:
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ")[1])


def test_a_body_over_the_cap_is_refused_on_its_content_length_before_it_is_read(serve):
    server = serve(max_message_bytes=4096)
    head = b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n"
    with _raw(server, head) as sock:  # not one byte of the declared GiB is sent
        assert _status(sock) == 413


def test_a_chunked_body_is_cut_off_at_the_cap(serve):
    server = serve(max_message_bytes=4096)
    head = b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunk = b"%x\r\n%s\r\n" % (16384, b" " * 16384)
    with _raw(server, head) as sock:
        sock.settimeout(0.01)
        sent, status, deadline = 0, None, time.monotonic() + 10
        while status is None and time.monotonic() < deadline:  # the old server waited for a last chunk never sent
            try:
                sock.sendall(chunk)
                sent += 16384
            except (TimeoutError, BrokenPipeError, ConnectionResetError):
                pass
            try:
                status = _status(sock)
            except TimeoutError:
                continue
        assert status == 413 and sent < 1 << 20, (status, sent)


def test_invalid_utf8_in_a_body_is_a_coded_400(toy_server):
    with httpx.Client(base_url=toy_server.http_url, trust_env=False) as http:
        r = http.post("/reset", content=b'{"episode_id": "\xff\xfe"}', headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["code"] == "INVALID_JSON" and "UTF-8" in r.json()["detail"]
        assert http.post("/reset", json={"seed": 0}).status_code == 200


# ---- item 6: auth --------------------------------------------------------------------------------------------


def test_every_route_but_health_needs_a_bearer_token(serve):
    server = serve(token="s3cret")
    with httpx.Client(base_url=server.http_url, trust_env=False) as http:
        assert http.get("/health").status_code == 200
        for path in ("/docs", "/openapi.json", "/redoc", "/metadata", "/schema"):
            assert http.get(path).status_code == 401, path
            assert http.get(path, headers={"Authorization": "s3cret"}).status_code == 401, path  # no scheme
            assert http.get(path, headers={"Authorization": "Basic s3cret"}).status_code == 401, path
            assert http.get(path, headers={"Authorization": "Bearer s3cret"}).status_code == 200, path
        assert http.get("/openapi.json", headers={"Authorization": "bearer s3cret"}).status_code == 200
    with pytest.raises(Exception):  # noqa: B017 (websockets' InvalidStatus)
        open_ws(server, additional_headers={"Authorization": "s3cret"})


def test_an_empty_token_is_refused():
    from pydantic import ValidationError

    from rubricgym.server import ServerConfig

    with pytest.raises(ValidationError, match="token"):
        ServerConfig(env_id=ENV, token="")


def test_worker_processes_end_with_their_sessions_and_a_dead_one_is_an_error(serve):
    server = serve(isolation="process")
    env_server = server.app.state.server
    with open_ws(server) as ws:
        assert call(ws, "reset", {"seed": 0})["type"] == "observation"
        (session,) = env_server.sessions.values()
        worker = session.runner._proc
        assert worker.is_alive() and worker.pid != os.getpid()
        with open_ws(server) as other:
            call(other, "reset", {"seed": 0})
            (mine,) = [s for s in env_server.sessions.values() if s is not session]
            mine.runner._proc.kill()  # the env's process dies (an OOM kill, a segfault)
            mine.runner._proc.join(5)  # dead before the step: the request itself meets a broken pipe
            reply = call(other, "step", {"text": CALL})
            assert _code(reply) == "EXECUTION_ERROR" and "worker process died" in reply["data"]["message"]
        assert call(ws, "step", {"text": CALL})["data"]["observation"]["text"] == "4"  # the others play on
    deadline = time.monotonic() + 30
    while worker.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not worker.is_alive() and env_server.active == 0
