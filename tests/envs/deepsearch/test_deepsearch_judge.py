"""The LLM grading option over real HTTP against a scripted loopback grader (plumbing, not grading quality)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rubricgym.core.llm import ChatClient
from rubricgym.core.registry import make
from rubricgym.core.rollout import rollout
from rubricgym.envs.deepsearch.agents import AGENTS
from rubricgym.envs.deepsearch.judge import llm_score


def scripted_reply(prompt: str) -> str:
    """A grader that follows simple rules, so the test knows what each verdict must be."""
    if '{"correct": true}' in prompt:
        answer = re.search(r"Response's answer: (.*)", prompt).group(1)  # type: ignore[union-attr]
        return json.dumps({"correct": "vell" in answer.lower()})
    if "hidden entities" in prompt:
        response = prompt.split("Response (references removed):", 1)[1]
        return "Sure: " + json.dumps({"E0": "Ada Vell", "E1": "Brook" if "Brook" in response else None})
    statement = re.search(r"Statement: (.*)", prompt).group(1)  # type: ignore[union-attr]
    content = prompt.split("Content the reader saw", 1)[1].lower()
    words = [w for w in re.findall(r"\w+", statement.lower()) if len(w) > 3]
    return json.dumps({"supported": all(w in content for w in words)})


@pytest.fixture()
def grader():
    garbage = {"on": False}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = body["messages"][-1]["content"]
            content = "no json here" if garbage["on"] else scripted_reply(prompt)
            data = json.dumps(
                {"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield ChatClient(f"http://127.0.0.1:{srv.server_address[1]}/v1", "grader", max_retries=0), garbage
    srv.shutdown()


def test_llm_grading_ranks_oracle_above_lucky_shortcut(grader, real_corpus):
    client, _ = grader
    kw = {"corpus": str(real_corpus[0]), "questions": str(real_corpus[1])}
    task = make("deepsearch-v0", **kw).task_set(1, seed=0)[0]
    scores = {}
    for agent in ("oracle", "shortcut-lucky", "shortcut"):
        traj = asyncio.run(rollout(make("deepsearch-v0", **kw), AGENTS[agent](seed=0), task, seed=0))
        scores[agent] = asyncio.run(llm_score(client, traj))
        assert scores[agent]["error"] is None
    assert scores["oracle"]["c_grpo"] == 1.0
    assert scores["shortcut-lucky"]["c_grpo"] == pytest.approx(0.7)
    assert scores["shortcut"]["c_grpo"] < scores["shortcut-lucky"]["c_grpo"]


def test_an_unreadable_grader_is_an_error_not_a_zero(grader, ds_tasks):
    client, garbage = grader
    garbage["on"] = True
    traj = asyncio.run(rollout(make("deepsearch-v0"), AGENTS["shortcut"](seed=0), ds_tasks[0], seed=0))
    result = asyncio.run(llm_score(client, traj))
    assert result["error"] and "JSON" in result["error"]
    assert result["c_grpo"] is None and result["rubric"] is None
