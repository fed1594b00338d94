"""Reward integrity of deepsearch-v0 (issue #22): a list of candidate names is not an answer, and the audit
finds nothing hidden on the agent side."""

import asyncio

from rubricgym.envs.deepsearch import carr
from rubricgym.rewards.leaks import audit_leaks
from rubricgym.rewards.shortcuts import run_battery

HIDDEN = {"answer": "Ada Vell", "aliases": ["Vell, Ada"], "entities": {"E0": {"name": "Ada Vell"}}, "statements": []}


def test_a_hedged_answer_listing_candidates_is_not_correct():
    for text in ("Answer: Foo Bar; Ada Vell; Baz Qux", "Answer: Ada Vell or Brook Mill", "Answer: Tom Ode, Ada Vell"):
        assert carr.score(HIDDEN, text, [])["outcome"] == 0.0, text
    for text in (
        "Answer: Ada Vell",
        "Answer: Vell, Ada",
        "Answer: Ada Vell, the engineer",
        "Answer: Ada Vell, of Brook",
    ):
        assert carr.score(HIDDEN, text, [])["outcome"] == 1.0, text


def test_leak_audit_and_shortcut_battery_pass():
    leaks = asyncio.run(audit_leaks("deepsearch-v0", n_tasks=3))
    assert leaks.ok, leaks.line()
    assert leaks.exempt.get("answer via open", 0) > 0  # the answer is found by reading, which is allowed
    battery = asyncio.run(run_battery("deepsearch-v0", n_tasks=4))
    assert battery.ok, battery.problems()
    assert {p.name for p in battery.probes} >= {"shotgun", "wrong_submit", "escape", "info_reader[0]"}
