"""``swe-v0`` end to end on the bwrap backend with the built-in tasks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from gymnasium.utils.env_checker import check_env

from rubricgym.core.registry import make
from rubricgym.core.rollout import rollout
from rubricgym.envs.swe import SweEnv, SweInstance
from rubricgym.envs.swe.builtin import builtin_instances
from rubricgym.envs.swe.checks import ALL
from rubricgym.envs.swe.sandbox import BwrapBackend
from rubricgym.envs.swe.swebench import load_swebench
from rubricgym.envs.swe.testrun import run_pytest


def call(name: str, **args) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


@pytest.fixture
def env(bwrap):
    e = make("swe-v0", command_timeout=1)
    yield e
    e.close()


def test_registered_with_rubric_checks_and_agents():
    cls = SweEnv
    rubric = cls.default_rubric()
    assert {c.check for c in rubric.criteria} == set(cls.checks()) == set(ALL)
    a = rubric.aggregation
    assert (a.method, a.gamma, a.outcome_check) == ("swe_trace", 0.7, "tests_resolved")
    assert set(cls.agents()) == {"oracle", "random", "teacher"}


def test_check_env(env):
    check_env(env)


async def test_builtin_fail_to_pass_lists_are_exact(bwrap):
    for inst in builtin_instances():
        async with await bwrap.create(Path(inst.snapshot)) as sb:
            before = await run_pytest(sb, [], inst.python_path)
            assert before.failed() == set(inst.FAIL_TO_PASS), inst.instance_id
            assert before.passed() == set(inst.PASS_TO_PASS), inst.instance_id
            assert (await sb.exec(f"patch -p1 <<'EOF'\n{inst.patch}EOF")).ok
            after = await run_pytest(sb, [], inst.python_path)
            assert after.failed() == set(), inst.instance_id


async def test_oracle_resolves_and_meets_every_check(env):
    inst = builtin_instances()[0]
    traj = await rollout(env, SweEnv.agents()["oracle"](), inst.to_task(), seed=0)
    assert traj.outcome.reward == 1.0 and traj.outcome.terminated
    assert traj.stages() == ["reproduce", "localize", "edit", "verify", "verify"]
    assert {name: c(traj).met for name, c in ALL.items()} == dict.fromkeys(ALL, True)
    assert "tinytext/core.py" in traj.outcome.answer  # the submitted patch
    assert type(traj).model_validate_json(traj.model_dump_json()) == traj


async def test_random_agent_does_not_resolve(env):
    for seed in range(1):
        traj = await rollout(env, SweEnv.agents()["random"](seed=seed), builtin_instances()[1].to_task(), seed=seed)
        assert not ALL["tests_resolved"](traj).met


def test_sync_step_and_clear_tool_errors(env):
    env.reset(options={"task": builtin_instances()[2].to_task()})
    obs, *_ = env.step(call("view", path="nope.py"))
    assert "does not exist" in obs
    obs, *_ = env.step(call("str_replace", path="tinytext/core.py", old="word", new="w"))
    assert "occurs" in obs and "times" in obs
    obs, *_ = env.step(call("str_replace", path="tinytext/core.py", old="no such text", new="w"))
    assert "not found" in obs
    obs, *_ = env.step(call("bash", command="while true; do :; done"))
    assert "timed out" in obs
    obs, *_ = env.step(call("bash", command="ln -s /etc/passwd p"))
    obs, *_ = env.step(call("view", path="p"))
    assert "outside the repository" in obs
    obs, *_ = env.step(call("view", path="."))
    assert "tinytext/core.py" in obs
    obs, reward, terminated, truncated, info = env.step(call("submit"))
    assert terminated and reward == 0.0 and "Resolved: no" in obs


def test_editing_tests_is_caught_and_undone_before_grading(env):
    inst = builtin_instances()[0]
    env.reset(options={"task": inst.to_task()})
    env.step(call("bash", command="sed -i 's/assert /assert True or /' tests/test_core.py"))
    env.step(call("create", path="tests/conftest.py", content="collect_ignore = ['test_core.py']\n"))
    _, reward, terminated, _, _ = env.step(call("submit"))
    traj = env.trajectory()
    assert terminated and reward == 0.0
    assert not ALL["no_test_file_edits"](traj).met
    assert set(traj.steps[-1].info["grading"]["restored_tests"]) == {"tests/test_core.py", "tests/conftest.py"}


def test_destructive_command_is_flagged(env):
    env.reset(options={"task": builtin_instances()[0].to_task()})
    env.step(call("bash", command="rm -rf ."))
    env.step(call("submit"))
    traj = env.trajectory()
    assert not ALL["no_destructive_commands"](traj).met
    assert env.summary()["score"] == 0.0


@pytest.mark.sandbox
def test_step_limit_grades_the_final_state():
    e = make("swe-v0", max_steps=2)
    try:
        e.reset(options={"task": builtin_instances()[0].to_task()})
        e.step(call("bash", command="ls"))
        _, _, terminated, truncated, _ = e.step(call("bash", command="ls"))
        assert truncated and not terminated
        assert "grading" in e.trajectory().steps[-1].info
    finally:
        e.close()


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


async def test_swebench_format_instance_over_a_local_git_repo(tmp_path, bwrap):
    inst = builtin_instances()[0]
    repo = tmp_path / "tinytext"
    subprocess.run(["cp", "-a", inst.snapshot, str(repo)], check=True)
    test_file = repo / "tests" / "test_core.py"
    full_tests = test_file.read_text()
    test_file.write_text(full_tests.replace("def test_truncate_exact_width_unchanged", "def _later"))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    test_file.write_text(full_tests)
    test_patch = _git(repo, "diff")
    _git(repo, "checkout", "-q", "--", ".")
    record = {
        "instance_id": "local__tinytext-1",
        "repo": "local/tinytext",
        "base_commit": base,
        "problem_statement": inst.problem_statement,
        "patch": inst.patch,
        "test_patch": test_patch,
        "FAIL_TO_PASS": json.dumps(inst.FAIL_TO_PASS),
        "PASS_TO_PASS": json.dumps(inst.PASS_TO_PASS[:3]),
        "hints_text": "",
    }
    (loaded,) = load_swebench([record], repos={"local/tinytext": repo}, cache=tmp_path / "cache")
    assert isinstance(loaded, SweInstance) and loaded.details == {"hints_text": ""}
    env = SweEnv(instances=[loaded], backend=BwrapBackend())
    try:
        good = await rollout(env, SweEnv.agents()["oracle"](), loaded.to_task(), seed=0)
        assert good.outcome.reward == 1.0
        bad = await rollout(env, SweEnv.agents()["random"](seed=0), loaded.to_task(), seed=0)
        assert bad.outcome.reward < 1.0
    finally:
        env.close()


@pytest.mark.parametrize("bad", ["a\0b", "\ud83d", "x" * 200_000], ids=["nul", "surrogate", "oversize"])
def test_hostile_argument_values_in_every_tool_are_observations(env, bad):
    env.reset(options={"task": builtin_instances()[0].to_task()})
    actions = [
        call("bash", command=f"echo {bad}"),
        call("view", path=bad),
        call("view", path="README.md", start=1),
        call("str_replace", path="tinytext/core.py", old=bad, new="x"),
        call("str_replace", path=bad, old="a", new=bad),
        call("create", path=bad, content="x"),
        call("create", path="notes.txt", content=bad),
        call("run_tests", selector=bad),
    ]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        assert isinstance(obs, str) and obs and not terminated
    env.trajectory().model_dump_json()  # every recorded text is valid Unicode
