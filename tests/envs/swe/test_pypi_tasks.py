"""Bug-injection tasks from real PyPI sdists, end to end (slow: downloads, many pytest runs)."""

from __future__ import annotations

import pytest

from rubricgym.core.rollout import rollout
from rubricgym.envs.swe import SweEnv
from rubricgym.envs.swe.inject import build_tasks
from rubricgym.envs.swe.pypi import KNOWN_PROJECTS, SourceUnavailable, fetch_sdist

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("requirement", KNOWN_PROJECTS)
async def test_injected_tasks_from_a_real_sdist(requirement, bwrap):
    try:
        project = fetch_sdist(requirement)
    except SourceUnavailable as e:
        pytest.skip(f"PyPI unreachable or sdist unavailable: {e}")
    assert any(p.name.startswith("test") for p in project.rglob("test*")), "the sdist must ship its tests"
    name = requirement.split("==")[0]
    tasks = await build_tasks(project, name, n=1, seed=0, backend=bwrap)
    assert len(tasks) == 1
    inst = tasks[0]
    assert inst.FAIL_TO_PASS and inst.PASS_TO_PASS and inst.source == "inject"
    assert inst.buggy_files == [inst.details["file"]] and "Failing tests" in inst.problem_statement
    assert not set(inst.FAIL_TO_PASS) & set(inst.PASS_TO_PASS)
    again = await build_tasks(project, name, n=1, seed=0, backend=bwrap)
    assert again == tasks, "built tasks are cached"
    env = SweEnv(instances=tasks, backend=bwrap)
    try:
        good = await rollout(env, SweEnv.agents()["oracle"](), inst.to_task(), seed=0)
        assert good.outcome.reward == 1.0, good.steps[-1].tool_result
        bad = await rollout(env, SweEnv.agents()["random"](seed=3), inst.to_task(), seed=3)
        assert bad.outcome.reward < 1.0
    finally:
        env.close()
