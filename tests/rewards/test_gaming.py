"""The gaming audit: master-key and do-nothing totals next to the known-good agent's, per env."""

import asyncio
import threading
import time
from collections import Counter

import pytest

from rubricgym.core.env import ToolOutput
from rubricgym.core.registry import register, unregister
from rubricgym.core.tools import tool
from rubricgym.core.types import ToolSpec
from rubricgym.envs.toy.calculator import CalculatorEnv
from rubricgym.rewards.gaming import GiveUpAgent, TotalsReport, audit_totals, empty_trajectory, placeholder_arguments

VACUOUS_TOY_RUBRIC = {
    # the toy rubric as it was before applicability: "clean" and "valid step" credit a single guessed answer
    "id": "old-toy",
    "criteria": [
        {"id": "correct", "text": "Correct.", "level": "essential", "check": "final_answer_correct"},
        {"id": "grounded", "text": "Grounded.", "check": "answer_grounded"},
        {"id": "clean", "text": "Clean.", "check": "no_invalid_actions"},
        {"id": "used_calculator", "text": "Calc.", "level": "optional", "check": "used_calculator"},
        {"id": "valid_step", "text": "Valid.", "scope": "step", "check": "step_valid"},
    ],
}


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
    r = await audit_totals("toy-calculator-v0", VACUOUS_TOY_RUBRIC, n_tasks=2, master_keys={})
    assert r.do_nothing["give_up"] == pytest.approx(1.4 / 3.4) and r.do_nothing["empty"] == 0.0
    assert not r.ok and "give_up" in r.problems()[0]


@pytest.mark.parametrize("rubric", [None, VACUOUS_TOY_RUBRIC], ids=["default", "vacuous"])
async def test_concurrent_episodes_give_the_sequential_report(rubric):
    one = await audit_totals("toy-calculator-v0", rubric, n_tasks=3, seed=5, concurrency=1)
    many = await audit_totals("toy-calculator-v0", rubric, n_tasks=3, seed=5, concurrency=3)
    assert many.model_dump() == one.model_dump()
    assert one.tasks == 3 and one.good is not None and one.do_nothing["give_up"] is not None


class SlowAnswerEnv(CalculatorEnv):
    """The calculator env whose answer tool takes a while (as a sandbox's test run does): it waits up to 0.3 s for
    three answers to be in flight at once, and counts the most there were."""

    env_id = "test-slow-answer-v0"
    lock = threading.Lock()
    in_flight = 0
    most = 0

    @tool(examples={"value": 387})
    async def answer(self, value: float | str) -> ToolOutput:
        """Give the final numeric answer; this ends the episode.

        Args:
            value: the final number
        """
        with SlowAnswerEnv.lock:
            SlowAnswerEnv.in_flight += 1
            SlowAnswerEnv.most = max(SlowAnswerEnv.most, SlowAnswerEnv.in_flight)
        deadline = time.monotonic() + 0.3
        while SlowAnswerEnv.in_flight < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        with SlowAnswerEnv.lock:
            SlowAnswerEnv.in_flight -= 1
        return CalculatorEnv.answer(self, value)


def test_concurrent_episodes_overlap_and_give_the_sequential_report():
    register(SlowAnswerEnv.env_id, SlowAnswerEnv)
    try:
        reports, most = [], []
        for concurrency in (1, 3):
            SlowAnswerEnv.most = 0
            # no known-good agent: only the give-up probe's episodes answer
            report = asyncio.run(
                audit_totals(SlowAnswerEnv.env_id, n_tasks=3, good_agent=None, concurrency=concurrency)
            )
            reports.append(report)
            most.append(SlowAnswerEnv.most)
    finally:
        unregister(SlowAnswerEnv.env_id)
    assert most == [1, 3]  # one episode at a time, then the three at once
    assert reports[1].model_dump() == reports[0].model_dump() and reports[0].do_nothing["give_up"] is not None


class ClosedCountingEnv(CalculatorEnv):
    """The calculator env, counting the envs made and the close calls each got."""

    env_id = "test-closed-counting-v0"
    made: list[CalculatorEnv] = []  # noqa: RUF012 - the test's record, shared by every instance
    closes: Counter[int] = Counter()  # noqa: RUF012

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        ClosedCountingEnv.made.append(self)

    def close(self) -> None:
        ClosedCountingEnv.closes[id(self)] += 1
        super().close()


def test_every_env_the_audit_makes_is_closed():
    register(ClosedCountingEnv.env_id, ClosedCountingEnv)
    try:
        report = asyncio.run(audit_totals(ClosedCountingEnv.env_id, n_tasks=3, concurrency=2))
    finally:
        unregister(ClosedCountingEnv.env_id)
    made = ClosedCountingEnv.made
    # the task-set env, the give-up probe's (1 or 2: at most 2 at once) and the known-good agent's (one per episode)
    assert len(made) >= 1 + 1 + 3 and report.good == 1.0
    assert {id(env): ClosedCountingEnv.closes[id(env)] for env in made} == {id(env): 1 for env in made}


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
