"""Clinical checks read typed step records: a renamed info key fails loudly, never reads as unmet."""

import asyncio

import pytest

import rubricgym
from rubricgym.core.steprecord import RecordError
from rubricgym.envs.clinical.agents import Oracle

ENV = "clinical-v0"


def test_a_renamed_info_key_is_an_error_not_an_unmet_check():
    task = next(t for t in rubricgym.TaskSet.generate(ENV, 8, seed=0) if t.hidden.get("key_exams"))
    traj = asyncio.run(rubricgym.rollout_many(ENV, Oracle(), [task], progress=False)).trajectories[0]
    checks = rubricgym.spec(ENV).load().checks()
    before = checks["key_exams_ordered"](traj)
    assert before.met and before.score == 1.0  # the unmodified oracle ordered every key exam

    broken = traj.model_copy(deep=True)
    order = next(s for s in broken.steps if s.info.get("tool") == "order" and s.info["covers"])
    order.info["covered"] = order.info.pop("covers")
    with pytest.raises(RecordError, match=rf"{ENV}: step {order.index}, tool 'order'.*'covers' is missing"):
        checks["key_exams_ordered"](broken)
    with pytest.raises(RecordError, match="'covered' is not part of the record"):
        checks["order_justified"](broken, order.index)
