"""Deep search checks read typed step records: a renamed info key fails loudly, never reads as unmet."""

import asyncio

import pytest

import rubricgym
from rubricgym.core.steprecord import RecordError
from rubricgym.envs.deepsearch import carr
from rubricgym.envs.deepsearch.agents import OracleAgent

ENV = "deepsearch-v0"


def test_a_renamed_info_key_is_an_error_not_an_unmet_check(ds_env, ds_tasks):
    traj = asyncio.run(rubricgym.rollout_many(ENV, OracleAgent(), ds_tasks[:1], progress=False)).trajectories[0]
    checks = type(ds_env).checks()
    before = checks["cited_pages_opened"](traj)
    assert before.met and before.score == 1.0  # the unmodified oracle opened every page it cites

    broken = traj.model_copy(deep=True)
    cited = carr.cited_urls(traj.outcome.answer or "")
    opened = next(s for s in broken.steps if s.info.get("tool") == "open" and s.info["url"] in cited)
    opened.info["page"] = opened.info.pop("url")
    with pytest.raises(RecordError, match=rf"{ENV}: step {opened.index}, tool 'open'.*'url' is missing"):
        checks["cited_pages_opened"](broken)
    search = next(s for s in broken.steps if s.info.get("tool") == "search")
    search.info["q"] = search.info.pop("query")
    with pytest.raises(RecordError, match=rf"step {search.index}, tool 'search'.*'q' is not part of the record"):
        checks["no_repeated_searches"](broken)
