"""The bring-your-own spec path without workarounds (#28 item 11): ``web:<spec.yaml>`` ids that every command
resolves again, URLs with query strings, instruction objects read through a documented field, text without an
ARIA ref clicked by its visible text, and a scope of one page."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.core.registry import make, spec
from rubricgym.core.store import TrajectoryStore
from rubricgym.envs.gui.agents import elements
from rubricgym.envs.gui.byo import SpecFileWebTaskEnv, WebTaskEnv, WebTaskSpec
from rubricgym.envs.gui.scope import in_scope

FIXTURE = Path(__file__).with_name("web_fixture")
SPEC = FIXTURE / "spec.yaml"


def call(name: str, **args) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def test_a_web_id_resolves_a_spec_file_and_records_its_absolute_path(monkeypatch):
    monkeypatch.chdir(FIXTURE.parent)
    resolved = spec("web:web_fixture/spec.yaml")
    assert resolved.id == f"web:{SPEC.resolve()}" and resolved.load() is SpecFileWebTaskEnv
    env = make("web:web_fixture/spec.yaml")
    assert env.env_id == resolved.id and env.task_set(2, seed=0)[0].env_id == resolved.id
    assert set(env.agents()) == {"random"}  # the worked example's oracle is not every spec's oracle
    with pytest.raises(KeyError, match="names no usable web task spec"):
        spec("web:web_fixture/missing.yaml")


def test_a_spec_passed_as_an_env_arg_records_the_web_id_too():
    env = WebTaskEnv(str(SPEC))
    assert env.env_id == f"web:{SPEC.resolve()}"
    assert WebTaskEnv().env_id == "web-example-v0"  # the registered example keeps its id


def test_a_url_with_a_query_string_is_accepted_and_checked_by_its_path(tmp_path):
    assert WebTaskSpec.load(SPEC).url == "index.html?mode=test"
    bad = tmp_path / "spec.yaml"
    bad.write_text(yaml.safe_dump({"name": "x", "root": str(FIXTURE), "url": "nothere.html?mode=test"}))
    with pytest.raises(ValueError, match="is not a file under root"):
        WebTaskSpec.load(bad)


def test_an_instruction_object_gives_its_documented_field_and_nothing_else():
    s = WebTaskSpec.load(SPEC)
    assert s.instruction_text({"text": "Click the fruit.", "answer": "mango"}) == "Click the fruit."
    with pytest.raises(ValueError, match="instruction_field"):
        s.instruction_text({"utterance": "Click the fruit.", "answer": "mango"})
    with pytest.raises(ValueError, match="return a string"):
        s.instruction_text(["Click", "the fruit"])


def test_a_page_scope_admits_that_page_with_any_query_and_nothing_else():
    page = "http://site.test/tasks/index.html"
    assert in_scope(page, page) and in_scope(page + "?mode=test#x", page) and in_scope("#top", page)
    for url in ("other.html", "/tasks/", "index.html/../other.html", "index.htmlx", "/tasks/index.html/x"):
        assert not in_scope(url, page), url
    with pytest.raises(ValueError, match="without"):
        in_scope(page, page + "?mode=test")


@pytest.fixture
def env(pool):
    e = WebTaskEnv(SPEC, pool=pool)
    yield e
    e.close()


def _fruit(env: WebTaskEnv) -> str:
    assert env.session is not None
    return env.pool.run(env.session.evaluate("() => taskInstruction().answer"))


@pytest.mark.slow
def test_the_page_gets_its_query_and_the_prompt_only_the_instruction_field(env):
    obs, _ = env.reset(seed=3)
    task = re.search(r"^Task: (.*)$", obs, re.M)
    assert task is not None and task[1] == "Click the fruit in the story (test mode)."  # ?mode=test reached the page
    assert _fruit(env) in ("mango", "papaya", "guava") and "'answer'" not in obs  # no str() of the object


@pytest.mark.slow
def test_a_word_without_a_ref_is_clicked_by_its_visible_text(env):
    obs, _ = env.reset(seed=3)
    fruit = _fruit(env)
    assert fruit in obs and not any(name == fruit for _, name, _ in elements(obs))  # visible, but no ref
    _, reward, terminated, _, info = env.step(call("click_text", text=fruit))
    assert terminated and reward == 1.0 and env.outcome.summary["success"]
    env.reset(seed=3)
    obs, reward, terminated, _, _ = env.step(call("click_text", text="no such words"))
    assert not terminated and reward == 0.0 and "no visible element shows exactly the text" in obs


@pytest.mark.slow
def test_another_page_of_the_folder_is_out_of_a_page_scope(env):
    obs, _ = env.reset(seed=3)
    _, reward, terminated, _, info = env.step(call("navigate", url="other.html"))
    assert not terminated and info["tool_error"] and "only pages under" in info["tool_error"]
    link = next(ref for role, name, ref in elements(obs) if role == "link")
    _, reward, terminated, _, info = env.step(call("click", ref=link))  # other.html says reward 1, done
    assert terminated and reward == 0.0 and info["details"]["escaped"] and env.outcome.summary["escaped"]


@pytest.mark.slow
def test_run_score_show_eval_and_arena_work_on_a_web_id(pool, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(FIXTURE, "site")
    env_id = f"web:{(tmp_path / 'site' / 'spec.yaml').resolve()}"
    runner = CliRunner()
    res = runner.invoke(app, ["run", "web:site/spec.yaml", "--agent", "random", "--tasks", "2", "--out", "runs/w"])
    assert res.exit_code == 0, res.output
    trajs = TrajectoryStore(Path("runs/w")).load()
    assert len(trajs) == 2 and {t.task.env_id for t in trajs} == {env_id}
    assert json.loads(Path("runs/w/run.json").read_text())["env_id"] == env_id
    res = runner.invoke(app, ["score", "runs/w"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["show", "runs/w", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["gui"]["episodes"] == 2, res.output
    Path("suite.yaml").write_text(yaml.safe_dump({"name": "mine", "entries": [{"env": env_id, "tasks": 2}]}))
    res = runner.invoke(app, ["eval", "--suite", "suite.yaml", "--agent", "random", "--out", "runs/eval"])
    assert res.exit_code == 0, res.output
    agents = [{"name": "random", "kind": "scripted", "agent": "random"}, {"name": "r7", "kind": "scripted"}]
    agents[1].update(agent="random", seed=7)
    Path("agents.yaml").write_text(yaml.safe_dump({"agents": agents}))
    res = runner.invoke(
        app, ["arena", "--suite", "suite.yaml", "--agents", "agents.yaml", "--out", "runs/arena", "--resamples", "20"]
    )
    assert res.exit_code == 0, res.output
    assert re.search(r"games", Path("runs/arena/arena.json").read_text())
