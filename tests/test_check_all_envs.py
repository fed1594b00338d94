"""`rubricgym check` passes for every registered env (the promise every env family makes)."""

import datetime
import os

import pytest

import rubricgym
from rubricgym.env_checker import check_env_id

SANDBOXED = {"swe-v0"}
MINIWOB_PASSING = [
    "miniwob-click-checkboxes-v0",
    "miniwob-click-link-v0",
    "miniwob-click-option-v0",
    "miniwob-enter-password-v0",
    "miniwob-enter-text-v0",
    "miniwob-enter-text-2-v0",
    "miniwob-login-user-v0",
]
"""The MiniWoB++ pages `check` passes on (measured 2026-12-07 with fuzz 20: 7 of the 16 pages with an oracle; the
other 9 fail the stage row on one-click pages or the consistency row where random clicks earn 0.5, and the 80
pages without an oracle cannot pass; issue 44 item 11 is open). The 96 pages are one class over a generated spec
each (~40-100 s of `check` apiece): under CI=true every passing page is checked, otherwise click-link and
enter-text (a click and typed text) plus one more that rotates by the day, so every page comes round in a week."""
MINIWOB_CHECKED = (
    set(MINIWOB_PASSING)
    if os.environ.get("CI", "").lower() == "true"
    else {"miniwob-click-link-v0", "miniwob-enter-text-v0", MINIWOB_PASSING[datetime.date.today().toordinal() % 7]}
)
ENV_IDS = [
    pytest.param(s.id, marks=pytest.mark.sandbox) if s.id in SANDBOXED else s.id
    for s in rubricgym.list_envs()
    if not s.id.startswith("miniwob-") or s.id in MINIWOB_CHECKED
]


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_rubricgym_check_passes(env_id):
    report = check_env_id(env_id, fuzz=60)
    failed = [row for row in report.rows if not row[1]]
    assert not failed, failed
    hostile = next(detail for name, _, detail in report.rows if name == "hostile argument values in every tool")
    reached = int(hostile.split("; ")[1].split()[0])
    assert reached > 0, f"no hostile argument value reached tool code: {hostile}"
