"""SWE checks and the ``edited`` condition read typed step records: a renamed info key fails loudly, never reads
as an unmet check or a not-applicable criterion."""

from __future__ import annotations

import pytest

from rubricgym.core.registry import make
from rubricgym.core.rollout import rollout
from rubricgym.core.steprecord import RecordError
from rubricgym.envs.swe import SweEnv
from rubricgym.envs.swe.builtin import builtin_instances
from rubricgym.rewards.prm import ProcessRewardModel

PITFALL = {
    "id": "swe-edits",
    "criteria": [
        {"id": "tests", "text": "Leaves the tests alone.", "level": "pitfall", "check": "no_test_file_edits"},
        {"id": "if_edited", "text": "Fixed.", "level": "essential", "check": "tests_resolved", "applies_if": "edited"},
    ],
}


async def test_a_renamed_info_key_is_an_error_not_an_unmet_check(bwrap):
    env = make("swe-v0")
    try:
        traj = await rollout(env, SweEnv.agents()["oracle"](), builtin_instances()[0].to_task(), seed=0)
    finally:
        await env.aclose()
    checks = SweEnv.checks()
    assert checks["edited_buggy_file"](traj).met and checks["no_test_file_edits"](traj).met

    broken = traj.model_copy(deep=True)
    edit = next(s for s in broken.steps if s.info.get("changed_files"))
    edit.info["files_changed"] = edit.info.pop("changed_files")
    with pytest.raises(RecordError, match=rf"swe-v0: step {edit.index}, tool '\w+'.*'changed_files' is missing"):
        checks["edited_buggy_file"](broken)

    # through the reward model: the check and the generic `edited` condition both give error verdicts
    status = {v.criterion_id: v.status for v in (await ProcessRewardModel(PITFALL).score(traj)).verdicts}
    assert status == {"tests": "met", "if_edited": "met"}  # if_edited applies: the oracle edited
    verdicts = {v.criterion_id: v for v in (await ProcessRewardModel(PITFALL).score(broken)).verdicts}
    assert {k: v.status for k, v in verdicts.items()} == {"tests": "error", "if_edited": "error"}
    assert "condition 'edited'" in (verdicts["if_edited"].error or "") and "files_changed" in (
        verdicts["if_edited"].error or ""
    )
