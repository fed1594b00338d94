"""The verifiers (v1) taskset module: found by verifiers' own loader, tasks equal to the env's task set, and a slow
test in which `vf-eval` runs it against `rubricgym model serve` (a real vLLM server for the embedded model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import verifiers.v1 as vf

import rubricgym
import rubricgym_verifiers

ROOT = Path(__file__).resolve().parents[2]


def test_verifiers_loads_the_module_as_a_taskset_with_our_env_and_harness():
    config = vf.resolve_env_config(
        {"taskset": {"id": "rubricgym_verifiers", "env": "toy-calculator-v0", "n": 3, "seed": 5}}
    )
    env = vf.load_environment(config)
    assert isinstance(env, rubricgym_verifiers.RubricGymEnv)
    assert isinstance(config.agent.runtime, vf.SubprocessConfig)  # never a cloud sandbox by default
    assert vf.default_harness_id("rubricgym_verifiers") == "rubricgym_verifiers"
    tasks = list(env.taskset)
    expected = rubricgym.make("toy-calculator-v0").task_set(3, seed=5)
    assert [t.data.task["id"] for t in tasks] == [t.id for t in expected]
    assert [t.data.seed for t in tasks] == [5, 6, 7] and all(t.data.prompt is None for t in tasks)


@pytest.mark.slow
def test_vf_eval_runs_against_rubricgym_model_serve(vllm_server, tmp_path):
    env = {**os.environ, "RG_KEY": "none", "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    vf_eval = Path(sys.executable).with_name("vf-eval")
    cmd = [
        str(vf_eval),
        "rubricgym_verifiers",
        "--env.taskset.env",
        "toy-calculator-v0",
        "--env.taskset.n",
        "2",
        "-m",
        vllm_server.model,
        "--client.base-url",
        vllm_server.base_url,
        "--client.api-key-var",
        "RG_KEY",
        "--env.agent.max-turns",
        "3",
        "--sampling.max-tokens",
        "48",
        "--no-push",
        "--no-rich",
        "-n",
        "2",
        "-r",
        "1",
        "-o",
        str(tmp_path),
    ]
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [traces] = list(tmp_path.rglob("traces.jsonl"))
    episodes = [json.loads(line) for line in traces.read_text().splitlines()]
    assert len(episodes) == 2 and all(e["ok"] for e in episodes)
    for episode in episodes:
        trace = episode["traces"][0]
        assert "env_reward" in trace["rewards"] and "rubricgym" in trace["info"]
        assert trace["info"]["rubricgym"]["rubric_errors"] == 0 and 0.0 <= trace["rewards"]["rubric"]["score"] <= 1
        assert any(node["message"]["role"] == "assistant" for node in trace["nodes"])  # the model really answered
