"""Envs come in from a stock OpenEnv 0.10 server: the echo env that ``openenv init`` writes, served by OpenEnv's
own ``create_app``, runs through ``rubricgym.make(url)``, ``rubricgym run URL`` and ``rubricgym score`` with a rubric
the user gives."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

import rubricgym
from rubricgym.cli import app
from rubricgym.interop.openenv import OpenEnvEnv
from rubricgym.server.remote import RemoteEnv

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow  # a subprocess server (OpenEnv's own app under uvicorn)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def echo_server(tmp_path_factory) -> Iterator[str]:
    """OpenEnv's own template env (``openenv init echo_env``) under uvicorn, as its README says to run it."""
    root = tmp_path_factory.mktemp("openenv")
    subprocess.run([str(BIN / "openenv"), "init", "echo_env", "-o", str(root)], check=True, capture_output=True)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "server.app:app", "--port", str(port), "--log-level", "warning"],
        cwd=root / "echo_env",
        env={**os.environ, "ENABLE_WEB_INTERFACE": "false"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{url}/health", trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            pytest.fail("the OpenEnv echo server did not start")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def test_make_maps_a_stock_env_onto_the_text_contract(echo_server):
    env = rubricgym.make(echo_server.replace("http://", "ws://"))
    assert isinstance(env, OpenEnvEnv) and not isinstance(env, RemoteEnv)
    [act] = env.tools()
    assert act.name == "act" and act.parameters["required"] == ["message"]
    obs = env.reset_typed(seed=1)
    assert "environment ready" in obs.messages[-1].content  # the reset observation is what the agent reads first
    out = env.step_typed('<tool_call>{"name": "act", "arguments": {"message": "hello"}}</tool_call>')
    assert "echoed_message: hello" in out.messages[-1].content and out.reward == pytest.approx(0.5)
    bad = env.step_typed('<tool_call>{"name": "act", "arguments": {}}</tool_call>')
    assert "message" in bad.messages[-1].content  # rubricgym's validation says what is missing
    env.close()


def test_run_and_score_a_stock_env_with_the_users_rubric(echo_server, tmp_path):
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text(
        "id: echo\nversion: '1'\ncriteria:\n"
        "  - {id: rewarded, text: The env paid out., level: essential, scope: trajectory, check: env_reward}\n"
        "  - {id: ended, text: The env ended the episode., level: optional, scope: trajectory, check: episode_done}\n"
    )
    out = tmp_path / "run"
    runner = CliRunner()
    ran = runner.invoke(
        app,
        ["run", echo_server, "--agent", "probe", "--tasks", "2", "--max-steps", "2", "--out", str(out)]
        + ["--env-arg", f"rubric={rubric}"],
    )
    assert ran.exit_code == 0, ran.output
    trajs = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(trajs) == 2 and all(len(t["steps"]) == 2 for t in trajs)
    assert all(t["task"]["rubric"]["id"] == "echo" for t in trajs)
    scored = runner.invoke(app, ["score", str(out)])
    assert scored.exit_code == 0, scored.output
    scores = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert len(scores) == 2
    text = json.dumps(scores)
    assert "rewarded" in text and "ended" in text
