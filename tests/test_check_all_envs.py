"""`rubricgym check` passes for every registered env (the promise every env family makes)."""

import datetime
import os

import pytest

import rubricgym
from rubricgym.env_checker import check_env_id

SANDBOXED = {"swe-v0"}
WEEK = 7


def fast_sample(pages: int) -> int:
    """MiniWoB++ pages checked a day outside CI: enough that every page comes round within a week (at least 2).
    Only the pages `check` passes on are registered (``rubricgym.envs.gui.miniwob.pages``; the others answer why
    they are left out); each is one class over a generated spec, ~40-100 s of `check` apiece, so under CI=true every
    one is checked and otherwise a few that rotate by the day."""
    return min(pages, max(2, -(-pages // WEEK)))


def checked_ids(ci: bool, day: int) -> list[str]:
    """Every registered env, but outside CI only ``fast_sample`` MiniWoB++ pages, chosen by ``day``."""
    ids = [s.id for s in rubricgym.list_envs()]
    miniwob = [i for i in ids if i.startswith("miniwob-")]
    k = fast_sample(len(miniwob))
    sample = {miniwob[(day * k + j) % len(miniwob)] for j in range(k)}
    return [i for i in ids if ci or not i.startswith("miniwob-") or i in sample]


ENV_IDS = [
    pytest.param(i, marks=pytest.mark.sandbox) if i in SANDBOXED else i
    for i in checked_ids(os.environ.get("CI", "").lower() == "true", datetime.date.today().toordinal())
]


def test_ci_checks_every_registered_env_and_the_fast_tier_rotates_a_sample():
    every = [s.id for s in rubricgym.list_envs()]
    assert checked_ids(True, 0) == every
    miniwob = [i for i in every if i.startswith("miniwob-")]
    if not miniwob:
        pytest.skip("the miniwob package is not installed")
    week = [set(checked_ids(False, day)) for day in range(WEEK)]
    k = fast_sample(len(miniwob))
    assert k <= max(2, len(miniwob) // WEEK + 1)  # the fast tier stays small
    assert all(len(ids & set(miniwob)) == k and set(every) - set(miniwob) <= ids for ids in week)
    assert set(miniwob) <= set().union(*week)  # every page comes round within a week


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_rubricgym_check_passes(env_id):
    report = check_env_id(env_id, fuzz=60)
    failed = [row for row in report.rows if not row[1]]
    assert not failed, failed
    hostile = next(detail for name, _, detail in report.rows if name == "hostile argument values in every tool")
    reached = int(hostile.split("; ")[1].split()[0])
    assert reached > 0, f"no hostile argument value reached tool code: {hostile}"
