"""The optional LLM patient and LM world model against a real chat-completions server on loopback."""

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import rubricgym
from rubricgym.envs.clinical.llm import world_model_prompt

from .conftest import call, start


class Handler(BaseHTTPRequestHandler):
    seen: list = []

    def log_message(self, *args):
        return

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Handler.seen.append(body)
        first = body["messages"][0]["content"]
        if first.startswith("You are a"):
            text = "Yes doctor, it goes into my jaw. My neighbour said it might be a STEMI."
        else:
            text = "Troponin I 5.1 ng/mL (H, ref < 0.04)"
        data = json.dumps({"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": text}}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data.encode())


@pytest.fixture
def endpoint():
    Handler.seen = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield {"base_url": f"http://127.0.0.1:{srv.server_address[1]}/v1", "model": "m"}
    srv.shutdown()


def test_llm_patient_answers_from_the_findings_and_never_names_the_diagnosis(endpoint, kb):
    env = rubricgym.make("clinical-v0", patient=endpoint)
    start(env, kb, "stemi", seed=4)
    obs, *_ = env.step(call("ask", question="Does the pain go anywhere?"))
    assert obs.startswith('Patient: "Yes doctor, it goes into my jaw.') and "STEMI" not in obs
    brief = Handler.seen[-1]["messages"][0]["content"]
    assert "chest pain" in brief and "ST-elevation" not in brief and "stemi" not in brief.lower()
    assert Handler.seen[-1]["messages"][1]["content"] == "Does the pain go anywhere?"
    assert env.steps[-1].info["source"] == "llm"


def test_world_model_generates_results_from_diaggym_prompt_and_records_them(endpoint, kb):
    env = rubricgym.make("clinical-v0", world_model=endpoint)
    task = start(env, kb, "stemi", seed=4)

    async def play():
        await env.astep_typed(call("order", exam="ECG", impression="ACS", reason="chest pain"))
        await env.astep_typed(call("order", exam="troponin", impression="ACS", reason="chest pain"))
        await env.astep_typed(call("order", exam="troponin", impression="ACS", reason="again"))

    asyncio.run(play())
    assert len(Handler.seen) == 2  # fetched once per new exam (the awaited path), a repeat is not re-generated
    prompt = Handler.seen[-1]["messages"][0]["content"]
    assert prompt.startswith("Patient profile:") and "Past examinations:\n- 12-lead ECG: " in prompt
    assert prompt.splitlines()[-2] == "Requested examination: Troponin I"
    step = env.trajectory().steps[1]
    assert step.info["source"] == "world_model" and step.info["result"] == "Troponin I 5.1 ng/mL (H, ref < 0.04)"
    assert env.steps[2].observation.messages[0].content.startswith("Already resulted at turn 2.")
    assert "presents with" in task.prompt and world_model_prompt  # the prompt builder is public


def test_bad_llm_config_fails_early():
    with pytest.raises(ValueError, match="patient must be a dict with 'base_url' and 'model'"):
        rubricgym.make("clinical-v0", patient={"url": "x"})
