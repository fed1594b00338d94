"""``rubricgym serve --workers N``: every session is served by the worker that owns it, whichever worker a request
reaches; a task handed out by one worker plays on another; a dead worker's sessions get a clear error."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rubricgym.envs.toy.agents import tool_call
from rubricgym.server import ServerConfig, ServerThread, create_app
from rubricgym.server.listen import unix_socket
from rubricgym.server.peers import PEER_KEY_HEADER, PEER_TASK_ROUTE, Peers
from tests.server.conftest import ENV, call, open_ws

ROOT = Path(__file__).resolve().parents[2]
KEY = "k" * 64


class WorkerThread(ServerThread):
    """One worker of a 2-worker server, on a TCP port of its own (so a test picks which worker a request hits)."""

    def __init__(self, peers: Peers, **fields):
        config = ServerConfig(env_id=ENV, port=0, **fields)
        super().__init__(config, app=create_app(config, peers=peers))
        self.private = unix_socket(peers.socket_path(peers.index))

    def _run(self) -> None:
        asyncio.run(self.server.serve(sockets=[self.sock, self.private]))


@pytest.fixture
def pair() -> Iterator[list[WorkerThread]]:
    with tempfile.TemporaryDirectory() as run_dir:
        workers = [WorkerThread(Peers(i, 2, run_dir, KEY)) for i in range(2)]
        for w in workers:
            w.start()
        yield workers
        for w in workers:
            w.stop()


def _step(client: httpx.Client, worker: WorkerThread, session_id: str, expression: str) -> httpx.Response:
    action = {"text": tool_call("calculator", expression=expression)}
    return client.post(f"{worker.http_url}/step", json={"action": action, "session_id": session_id})


def test_an_http_session_is_served_by_its_owner_whichever_worker_gets_the_request(pair):
    with httpx.Client(trust_env=False, timeout=30) as c:
        sessions = [c.post(f"{w.http_url}/reset", json={"seed": i}).json()["session_id"] for i, w in enumerate(pair)]
        assert [s.split("-")[0] for s in sessions] == ["0", "1"]
        for i in range(7):  # alternate the worker each request reaches: half of them are forwarded
            for k, sid in enumerate(sessions):
                r = _step(c, pair[(i + k) % 2], sid, f"{i} + {k}")
                assert r.status_code == 200, r.text
                obs = r.json()["observation"]
                assert (obs["text"], obs["info"]["step"], r.json()["session_id"]) == (str(i + k), i + 1, sid)
        for sid in sessions:
            for w in pair:
                state = c.get(f"{w.http_url}/state", params={"session_id": sid}).json()
                assert state["step_count"] == 7
        assert [w.app.state.server.active for w in pair] == [1, 1]  # no worker ever opened another's session
        assert c.post(f"{pair[1].http_url}/close", json={"session_id": sessions[0]}).json()["closed"] == sessions[0]
        assert pair[0].app.state.server.active == 0
        assert _step(c, pair[1], sessions[0], "1 + 1").status_code == 404  # the owner says it is gone
        assert _step(c, pair[0], "7-" + sessions[1][2:], "1 + 1").status_code == 404  # no worker 7: not forwarded


def test_a_task_handed_out_by_one_worker_plays_on_another_and_peers_need_the_key(pair):
    with open_ws(pair[0]) as ws:
        task = call(ws, "tasks", {"n": 2, "seed": 5})["data"][1]
    assert "hidden" not in task
    with open_ws(pair[1]) as ws:
        reply = call(ws, "reset", {"task_id": task["id"]})
        assert reply["type"] == "observation", reply
        assert call(ws, "state")["data"]["task_id"] == task["id"]
        assert call(ws, "reset", {"task": task})["type"] == "observation"  # the task dict back, as RemoteEnv does
        assert call(ws, "reset", {"task_id": "calc-none"})["data"]["code"] == "UNKNOWN_TASK"
    with httpx.Client(trust_env=False, timeout=30) as c:
        url = f"{pair[0].http_url}{PEER_TASK_ROUTE}"
        assert c.get(url, params={"id": task["id"]}).status_code == 404  # the hidden record only to a peer
        assert c.get(url, params={"id": task["id"]}, headers={PEER_KEY_HEADER: "x" * 64}).status_code == 404
        assert "hidden" in c.get(url, params={"id": task["id"]}, headers={PEER_KEY_HEADER: KEY}).json()


def test_a_session_of_a_stopped_worker_gets_worker_gone_not_a_hang(pair):
    with httpx.Client(trust_env=False, timeout=30) as c:
        sid = c.post(f"{pair[1].http_url}/reset", json={"seed": 0}).json()["session_id"]
        pair[1].stop()
        t0 = time.monotonic()
        r = _step(c, pair[0], sid, "1 + 1")
        assert time.monotonic() - t0 < 10
        assert r.status_code == 503 and r.json()["code"] == "WORKER_GONE", r.text
        assert "POST /reset" in r.json()["detail"]
        assert c.post(f"{pair[0].http_url}/reset", json={"seed": 0}).status_code == 200  # the other one serves on


# ---- the real thing: `rubricgym serve --workers 2`, processes sharing one port ----------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"


@pytest.mark.slow  # a subprocess server: not the fast tier
def test_serve_with_two_workers_serves_ws_and_http_sessions_and_survives_a_dead_worker():
    proc = subprocess.Popen(
        [sys.executable, "-m", "rubricgym", "serve", ENV, "--port", "0", "--workers", "2", "--log-level", "warning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    pids: list[int] = []
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"serving {ENV} at ws://127.0.0.1:") and "2 workers" in line, line + proc.stderr.read()
        ws_url, http = line.split(" at ")[1].split(" ")[0], line.split("HTTP ")[1].split(";")[0]
        pids = [int(p) for p in line.rsplit("pids ", 1)[1].rstrip(")\n").split(", ")]
        server = type("S", (), {"url": ws_url})()
        for seed in range(4):  # WebSocket sessions: each lives on the worker that accepted it
            with open_ws(server) as ws:
                assert call(ws, "reset", {"seed": seed})["type"] == "observation"
                for i in range(3):
                    reply = call(ws, "step", {"text": tool_call("calculator", expression=f"{i} * 2")})
                    assert reply["data"]["observation"]["text"] == str(i * 2)
                assert call(ws, "state")["data"]["step_count"] == 3
        owned: dict[str, str] = {}
        for seed in range(40):  # a fresh connection per request: it reaches either worker
            with httpx.Client(trust_env=False, timeout=30) as c:
                sid = c.post(f"{http}/reset", json={"seed": seed}).json()["session_id"]
                owned.setdefault(sid[0], sid)
            if len(owned) == 2:
                break
        assert sorted(owned) == ["0", "1"], owned  # the kernel spread new connections over both workers
        for i in range(6):
            for sid in owned.values():
                with httpx.Client(trust_env=False, timeout=30) as c:
                    action = {"text": tool_call("calculator", expression=f"{i} + 10")}
                    r = c.post(f"{http}/step", json={"action": action, "session_id": sid})
                    assert r.status_code == 200 and r.json()["observation"]["text"] == str(i + 10), r.text
                    assert c.get(f"{http}/state", params={"session_id": sid}).json()["step_count"] == i + 1
        os.kill(pids[1], signal.SIGKILL)  # worker 1 dies: its session is gone, worker 0's serves on
        for _ in range(100):
            if not _alive(pids[1]):
                break
            time.sleep(0.05)
        with httpx.Client(trust_env=False, timeout=30) as c:
            r = c.post(f"{http}/step", json={"action": {"text": "x"}, "session_id": owned["1"]})
            assert r.status_code == 503 and r.json()["code"] == "WORKER_GONE", r.text
            r = c.post(f"{http}/step", json={"action": {"text": "x"}, "session_id": owned["0"]})
            assert r.status_code == 200, r.text
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert not [p for p in pids if _alive(p)], "a worker outlived the server"
    assert "worker 1" in err and "exited with code -9" in err, err[-2000:]


def test_workers_must_be_at_least_one_and_a_server_thread_is_one_process():
    with pytest.raises(ValueError, match="workers"):
        ServerConfig(env_id=ENV, workers=0)
    with pytest.raises(ValueError, match="rubricgym serve --workers"):
        ServerThread(ServerConfig(env_id=ENV, port=0, workers=2))


def test_session_ids_name_their_worker_only_with_workers(toy_server):
    peers = Peers(0, 2, "/nonexistent", KEY)
    assert peers.prefix == "0-"
    ids = ("1-abc", "0-abc", "2-abc", "abc", "-1-x", "x1-y", "9" * 9 + "-z")
    assert [peers.owner(s) for s in ids] == [1, None, None, None, None, None, None]
    sid = httpx.post(f"{toy_server.http_url}/reset", json={"seed": 0}, trust_env=False).json()["session_id"]
    assert len(sid) == 32 and "-" not in sid  # one process: ids as before
