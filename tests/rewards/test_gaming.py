"""The gaming audit: master-key and do-nothing totals next to the known-good agent's, per env."""

import pytest

from rubricgym.core.types import ToolSpec
from rubricgym.rewards.gaming import GiveUpAgent, TotalsReport, audit_totals, empty_trajectory, placeholder_arguments


def test_placeholder_arguments_are_well_typed():
    tool = ToolSpec(
        name="answer",
        description="d",
        parameters={
            "type": "object",
            "required": ["text", "n", "ok", "kind"],
            "properties": {
                "text": {"type": "string"},
                "n": {"type": ["integer", "null"]},
                "ok": {"type": "boolean"},
                "kind": {"type": "string", "enum": ["a", "b"]},
                "extra": {"type": "string"},
            },
        },
    )
    assert placeholder_arguments(tool) == {"text": "I don't know.", "n": 0, "ok": False, "kind": "a"}


async def test_give_up_agent_calls_the_terminal_tool_once():
    tools = [
        ToolSpec(name="search", description="s", parameters={"type": "object", "properties": {}}),
        ToolSpec(name="submit", description="s", parameters={"type": "object", "properties": {}}),
    ]
    agent = GiveUpAgent()
    assert await agent.act([], tools) == '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
    from rubricgym.core.types import Message

    assert await agent.act([Message(role="assistant", content="x")], tools) == "I give up."


@pytest.mark.parametrize("env_id", ["toy-calculator-v0", "deepsearch-v0"])
async def test_shipped_rubrics_pay_nothing_for_nothing(env_id):
    r = await audit_totals(env_id, n_tasks=2)
    assert r.ok, r.problems()
    assert r.good is not None and r.good >= 0.9
    assert set(r.do_nothing) == {"empty", "give_up"} and len(r.master_keys) == 11
    assert r.worst is not None and r.worst <= 0.05 and r.errors == 0


async def test_a_vacuous_pitfall_is_flagged():
    # the toy rubric as it was before applicability: "clean" and "valid step" credit a single guessed answer
    rubric = {
        "id": "old-toy",
        "criteria": [
            {"id": "correct", "text": "Correct.", "level": "essential", "check": "final_answer_correct"},
            {"id": "grounded", "text": "Grounded.", "check": "answer_grounded"},
            {"id": "clean", "text": "Clean.", "check": "no_invalid_actions"},
            {"id": "used_calculator", "text": "Calc.", "level": "optional", "check": "used_calculator"},
            {"id": "valid_step", "text": "Valid.", "scope": "step", "check": "step_valid"},
        ],
    }
    r = await audit_totals("toy-calculator-v0", rubric, n_tasks=2, master_keys={})
    assert r.do_nothing["give_up"] == pytest.approx(1.4 / 3.4) and r.do_nothing["empty"] == 0.0
    assert not r.ok and "give_up" in r.problems()[0]


def test_report_flags_a_weak_known_good_agent():
    r = TotalsReport(
        env_id="e",
        rubric_id="r",
        rubric_hash="h",
        method="rar",
        tasks=1,
        good_agent="oracle",
        good=0.5,
        do_nothing={"empty": 0.0},
        criteria=3,
    )
    assert r.problems() == ["known-good agent 'oracle' earns only 0.500 < 0.9"]


def test_empty_trajectory_has_no_step(oracle_trajs):
    t = empty_trajectory(oracle_trajs[0].task)
    assert t.steps == [] and t.outcome.answer is None


@pytest.mark.slow
async def test_swe_rubric_pays_nothing_for_nothing():
    r = await audit_totals("swe-v0", n_tasks=2)
    assert r.ok, r.problems()
