"""What a client of ``rubricgym serve`` receives carries no hidden value (issue #22 item 1, the server channel):
a clinical episode played over the WebSocket by the oracle, every reply scanned for the task's secrets.

As in the leak audit (``rewards.leaks``), text every task shows alike (the tool specs and system prompt a reset
returns) tells nothing of one task: a tool description's example exam ("e.g. 'CBC'") is no leak of the case whose
key exam is a CBC, so long as every case's reset shows the same text."""

from __future__ import annotations

import json

from rubricgym.core.registry import spec
from rubricgym.envs.clinical.agents import Oracle
from rubricgym.rewards.leaks import Scanner, make_secrets
from rubricgym.server import ServerConfig, ServerThread, create_app

from .conftest import call, open_ws


def test_server_replies_carry_no_hidden_value():
    config = ServerConfig(env_id="clinical-v0", port=0)
    server = ServerThread(config, app=create_app(config)).start()
    try:
        with open_ws(server) as ws:
            tasks = call(ws, "tasks", {"n": 3, "seed": 0})["data"]
            assert all("hidden" not in t for t in tasks)
            env = spec("clinical-v0").make()
            by_id = {t.id: t for t in env.task_set(3, seed=0)}
            shared = set()
            for served in tasks:
                task = by_id[served["id"]]
                scanner = Scanner(make_secrets(type(env).secrets(task)))
                assert scanner.secrets, "the case has secrets to look for"
                reset = call(ws, "reset", {"task_id": task.id})
                shared.add(json.dumps(_take_shown_alike(reset)))
                replies = [json.dumps(served), json.dumps(reset)]
                oracle = Oracle().episode(task, 0)
                written = ""
                for action in oracle.plan(task):
                    written += action
                    reply = call(ws, "step", {"text": action})
                    replies.append(json.dumps(reply["data"]["observation"]["info"]))  # info and details
                    replies.append(json.dumps(call(ws, "state")))
                    if reply["data"]["done"]:
                        break
                replies.append(json.dumps(call(ws, "trajectory")["data"]["task"]))
                written_words = {" ".join(s.words) for s in scanner.find(written)}
                leaked = [s.path for r in replies for s in scanner.find(r) if " ".join(s.words) not in written_words]
                assert not leaked, (task.id, leaked)
            # what the scan left out is no leak only because every case's reset shows it alike
            assert len(shared) == 1, "every case's reset shows the same tool specs and system prompt"
    finally:
        server.stop()


def _take_shown_alike(reset: dict) -> list:
    """Take a reset reply's tool specs and system message (what every task shows alike) out of it, leaving what
    is the task's own to scan; returns what it took."""
    obs = reset["data"]["observation"]
    alike = [obs.pop("tools"), [m for m in obs["messages"] if m["role"] == "system"]]
    obs["messages"] = [m for m in obs["messages"] if m["role"] != "system"]
    obs["text"] = ""  # the reset text is the system prompt and the task, both kept in messages
    return alike
