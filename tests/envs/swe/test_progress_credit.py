"""Issue #39, SWE: a failed attempt earns process credit for progress on the failing tests, never for activity.

The default rubric's process criteria apply only where some FAIL_TO_PASS test passes and no PASS_TO_PASS test
broke (``progress_on_failing_tests``). Played on the bwrap backend with the built-in ``title-first-word`` task
(two FAIL_TO_PASS tests), by the env's calibration agents (``SweEnv.outcome_agents``) and the oracle.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rubricgym.core.registry import make
from rubricgym.core.types import Trajectory
from rubricgym.envs.swe import SweEnv
from rubricgym.envs.swe.agents import NEAR_MISSES, PlanAgent, partial_edits, tool_call
from rubricgym.envs.swe.builtin import CORE, FILES, builtin_instances, write_tree
from rubricgym.envs.swe.checks import ALL
from rubricgym.envs.swe.instance import SweInstance
from rubricgym.envs.swe.sandbox.treediff import file_diff
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.prm import Breakdown, ProcessRewardModel

TASK = "tinytext__title-first-word"
BREAK_A_PASSING_TEST = tool_call(
    "str_replace",
    path="tinytext/core.py",
    old="out.append(word[:1].upper() + word[1:].lower())",
    new="out.append(word[:1].upper() + word[1:])",
)  # test_title_case_lowercases_rest (PASS_TO_PASS) fails after it


def _instance(instance_id: str = TASK) -> SweInstance:
    return next(i for i in builtin_instances() if i.instance_id == instance_id)


def _plan(role: str, inst: SweInstance) -> list[str]:
    agent = {**SweEnv.agents(), **SweEnv.outcome_roles()}[role]().episode(inst.to_task(), 0)
    assert isinstance(agent, PlanAgent)
    return agent.plan


@pytest.fixture(scope="module")
def played(bwrap) -> dict[str, tuple[Trajectory, Breakdown]]:
    """Each plan's trajectory on the task and its default-rubric breakdown."""
    inst = _instance()
    partial = _plan("partial", inst)
    plans = {
        "comment": _plan("failed", inst),
        "half": partial,
        "half_breaking": partial[:-2] + [BREAK_A_PASSING_TEST] + partial[-2:],
        "activity": _plan("activity", inst),
        "resolved": _plan("oracle", inst),
    }
    prm = ProcessRewardModel(SweEnv.default_rubric(), [CheckJudge()])
    env = make("swe-v0", command_timeout=5)
    out = {}
    try:
        for name, plan in plans.items():
            env.reset(options={"task": inst.to_task()})
            for action in plan:
                *_, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    break
            traj = env.trajectory(agent=name)
            out[name] = traj, asyncio.run(prm.score(traj))
    finally:
        env.close()
    return out


def _total(b: Breakdown) -> float:
    assert b.total is not None and b.n_errors == 0, b
    return b.total


def test_a_comment_and_a_changelog_note_earn_no_process_credit(played):
    traj, b = played["comment"]
    # the activity the old rubric paid 0.30 for: reproduced, edited the buggy file, tested after the edit
    assert all(
        ALL[name](traj).met for name in ("reproduced_before_edit", "edited_buggy_file", "tested_after_last_edit")
    )
    assert not ALL["progress_on_failing_tests"](traj).met
    assert _total(b) <= 0.05, b.per_criterion


def test_a_half_fix_ranks_between_the_comment_and_the_resolved_fix(played):
    half_traj, half = played["half"]
    grading = half_traj.steps[-1].info["grading"]
    assert sum(grading["fail_to_pass"].values()) == 1 and all(grading["pass_to_pass"].values())  # 1 of 2 fixed
    assert ALL["progress_on_failing_tests"](half_traj).score == 0.5
    comment, resolved = _total(played["comment"][1]), _total(played["resolved"][1])
    assert played["resolved"][0].outcome.reward == 1.0 and resolved >= 0.9
    assert comment + 0.1 <= _total(half) < resolved, (comment, _total(half), resolved)
    assert _total(half) <= 1 - SweEnv.default_rubric().aggregation.gamma  # the failed band


def test_breaking_a_passing_test_earns_no_process_credit(played):
    traj, b = played["half_breaking"]
    grading = traj.steps[-1].info["grading"]
    assert sum(grading["fail_to_pass"].values()) == 1 and not all(grading["pass_to_pass"].values())
    assert not ALL["progress_on_failing_tests"](traj).met
    assert _total(b) == 0.0, b.per_criterion


def test_activity_without_progress_earns_nothing(played):
    traj, b = played["activity"]
    assert sum(1 for s in traj.steps if s.info.get("ran_tests")) >= 2 and not ALL["edited_buggy_file"](traj).met
    assert _total(b) == 0.0, b.per_criterion


def test_outcome_agents_are_declared_for_every_role():
    roles = SweEnv.outcome_roles()
    assert set(roles) == {"partial", "failed", "activity"}
    assert all(issubclass(cls, PlanAgent) for cls in roles.values())  # type: ignore[arg-type]


def test_every_builtin_task_has_a_near_miss_that_applies_once():
    for inst in builtin_instances():
        edits = partial_edits(inst)
        assert edits == [NEAR_MISSES[inst.instance_id]], inst.instance_id
        path, old, new = edits[0]
        text = (Path(inst.snapshot) / path).read_text()
        assert text.count(old) == 1 and old != new, inst.instance_id  # str_replace applies it


def test_partial_edits_of_another_task_keep_all_gold_hunks_but_the_last(tmp_path):
    buggy = CORE.replace("if len(text) <= width:", "if len(text) < width:").replace(
        "if i > 0 and word.lower() in minor:", "if i >= 0 and word.lower() in minor:"
    )
    snapshot = write_tree(tmp_path / "repo", {**FILES, "tinytext/core.py": buggy})
    patch = file_diff("tinytext/core.py", buggy.encode(), CORE.encode())
    inst = _instance().model_copy(
        update={"instance_id": "own__two-bugs", "source": "swebench", "patch": patch, "snapshot": str(snapshot)}
    )
    edits = partial_edits(inst)
    assert len(edits) == 1 and edits[0][0] == "tinytext/core.py"
    assert "if len(text) < width:" in edits[0][1] and "if len(text) <= width:" in edits[0][2]  # the first hunk
