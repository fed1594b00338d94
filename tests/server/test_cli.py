"""`rubricgym serve` as a user runs it: prints its URL, serves, stops cleanly on Ctrl-C; bad ids fail early."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def _serve(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "rubricgym", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_serve_prints_its_url_answers_and_stops_on_ctrl_c():
    proc = _serve("toy-calculator-v0", "--port", "0", "--log-level", "warning", "--max-steps", "3")
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving toy-calculator-v0 at ws://127.0.0.1:"), line + proc.stderr.read()
        http = line.split("HTTP ")[1].rstrip(")\n")
        assert httpx.get(f"{http}/health", trust_env=False).json()["status"] == "healthy"
        assert httpx.get(f"{http}/metadata", trust_env=False).json()["max_steps"] == 3
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]


def test_serve_fails_early_with_a_clear_message():
    proc = _serve("toy-calculater-v0", "--port", "0")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "toy-calculator-v0" in " ".join(err.split())
    proc = _serve("toy-calculator-v0", "--max-sessions", "0")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "max_sessions" in err


def test_an_empty_token_and_a_step_limit_under_one_are_refused_alike():
    """Issue 23, item 6: `--token ""` used to serve without auth; `--max-steps 0` used to mean the env default."""
    for args, message in [
        (["--token", ""], "--token is empty"),
        (["--max-steps", "0"], "--max-steps must be at least 1"),
        (["--max-steps", "-3"], "--max-steps must be at least 1"),
    ]:
        proc = _serve("toy-calculator-v0", "--port", "0", *args)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise AssertionError(f"`serve {' '.join(args)}` started serving instead of refusing") from None
        assert proc.returncode == 2 and message in " ".join(err.split()), (args, err[-1000:])
    proc = subprocess.Popen(
        [sys.executable, "-m", "rubricgym", "serve", "toy-calculator-v0", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "RUBRICGYM_TOKEN": " "},
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "RUBRICGYM_TOKEN is set but empty" in " ".join(err.split()), err[-1000:]
