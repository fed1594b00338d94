"""Bring-your-own web tasks: the spec, the worked example page, a loopback site, and `rubricgym run`/`show`."""

from __future__ import annotations

import functools
import http.server
import json
import re
import threading

import pytest
from typer.testing import CliRunner

import rubricgym
from rubricgym.cli import app
from rubricgym.envs.gui.agents import find_ref
from rubricgym.envs.gui.byo import EXAMPLE_SPEC, WebTaskEnv, WebTaskSpec


def call(name: str, **args) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def test_spec_validation_names_the_problem(tmp_path):
    assert WebTaskSpec.load(EXAMPLE_SPEC).root == EXAMPLE_SPEC.parent
    bad = tmp_path / "spec.yaml"
    bad.write_text("name: x\nurl: https://example.com/\n")
    with pytest.raises(ValueError, match="loopback"):
        WebTaskSpec.load(bad)
    bad.write_text("name: x\nroot: .\nurl: missing.html\n")
    with pytest.raises(ValueError, match="not a file under root"):
        WebTaskSpec.load(bad)
    bad.write_text("name: x\nroot: .\nurl: spec.yaml\ngoals: [{field: a, expected: 1}]\n")
    with pytest.raises(ValueError, match="state"):
        WebTaskSpec.load(bad)


def test_seeds_split_into_train_and_test():
    env = WebTaskEnv()
    test = {t.params["page_seed"] for t in env.task_set(20, seed=0, split="test")}
    train = {t.params["page_seed"] for t in env.task_set(20, seed=0, split="train")}
    assert all(s % 5 == 0 for s in test) and not any(s % 5 == 0 for s in train)


def _book(env, cheapest: bool):
    obs, _ = env.reset(seed=2)
    frm, to = re.search(r"from (\w+) to (\w+)\.", obs).groups()
    obs, *_ = env.step(call("select", ref=find_ref(obs, "combobox", "From"), option=frm))
    obs, *_ = env.step(call("select", ref=find_ref(obs, "combobox", "To"), option=to))
    obs, *_ = env.step(call("click", ref=find_ref(obs, "button", "Search flights")))
    prices = sorted((int(p), ref) for p, ref in re.findall(r'"Book the \S+ flight for €(\d+)" \[ref=(e\d+)\]', obs))
    return env.step(call("click", ref=prices[0 if cheapest else -1][1]))


@pytest.mark.slow
def test_the_example_page_computes_its_own_reward_and_end(pool):
    env = WebTaskEnv(pool=pool)
    obs, reward, terminated, _, _ = _book(env, cheapest=True)
    assert terminated and reward == 1.0 and "the episode is over" in obs and env.outcome.summary["success"]
    obs, reward, terminated, _, _ = _book(env, cheapest=False)
    summary = env.outcome.summary
    assert terminated and reward == 0.0 and summary["page_reward"] == -1.0  # the env's reward is success, 1 or 0
    assert not summary["success"] and summary["false_completion"]  # the page ended it on a wrong booking
    env.close()


@pytest.mark.slow
def test_a_missing_option_and_an_overlong_type_fail_at_once_saying_what_to_do(pool):
    """Each used to wait out the action timeout (5 s; typing 100k characters left them half typed)."""
    env = WebTaskEnv(pool=pool)
    obs, _ = env.reset(seed=2)
    ref = find_ref(obs, "combobox", "From")
    obs, *_ = env.step(call("select", ref=ref, option="Atlantis"))
    assert "has no option 'Atlantis'; its options are 'Lisbon', 'Oslo'" in obs and env.steps[-1].tool_error
    obs, *_ = env.step(call("select", ref=ref, option="  Oslo "))  # matched as Playwright matches a label
    assert obs.startswith("Selected '  Oslo ' in") and not env.steps[-1].tool_error
    assert pool.run(env.session.evaluate("() => document.querySelector('select').value")) == "Oslo"
    obs, *_ = env.step(call("type", text="x" * 1001))
    assert "type takes at most 1000 characters" in obs and "fill(ref, text)" in obs and env.steps[-1].tool_error
    env.close()


@pytest.mark.slow
def test_a_loopback_site_works_and_stays_isolated(pool):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(EXAMPLE_SPEC.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        spec = WebTaskSpec.load(EXAMPLE_SPEC).model_copy(
            update={"name": "loopback", "root": None, "url": f"http://127.0.0.1:{server.server_port}/index.html"}
        )
        env = WebTaskEnv(spec, pool=pool)
        obs, reward, *_ = _book(env, cheapest=True)
        assert reward == 1.0
        env.reset(seed=1)
        obs, _, _, _, info = env.step(call("navigate", url="http://127.0.0.2:1/"))
        assert info["tool_error"]
        env.close()
    finally:
        server.shutdown()


@pytest.mark.slow
def test_rubricgym_run_and_show_the_example(pool, tmp_path):
    runner = CliRunner()
    out = tmp_path / "run"
    res = runner.invoke(app, ["run", "web-example-v0", "--agent", "random", "--tasks", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["show", str(out), "--json"])
    gui = json.loads(res.output)["gui"]
    assert gui["episodes"] == 2 and set(gui) >= {"SR", "PR", "FC", "OT", "USE", "pass@k"}
    assert "web-example-v0" in {s.id for s in rubricgym.list_envs()}
