"""`rubricgym check` names the mistakes a new env author makes and says what to write instead (issue 30, item 3):
an undocumented tool argument, a rubric naming a check the env lacks (as ``check`` or in ``applies_if``), task
ids that collide across seeds, and a stage no step of any scripted agent reaches."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from rubricgym import ToolOutput, tool
from rubricgym.core.registry import register, unregister
from rubricgym.env_checker import CONSISTENCY_ROW, check_env_id
from rubricgym.envs.toy.calculator import CalculatorEnv
from rubricgym.rewards.leaks import Scanner, audit_leaks, make_secrets
from rubricgym.rewards.shortcuts import run_battery


@pytest.fixture
def rows() -> Iterator:
    """``rows(cls)``: register ``cls`` under its env id, run ``rubricgym check`` and return its rows by name."""
    registered: list[str] = []

    def run(cls: type[CalculatorEnv], seed: int = 0) -> dict[str, tuple[bool, str]]:
        register(cls.env_id, cls, replace=True)
        registered.append(cls.env_id)
        report = check_env_id(cls.env_id, fuzz=10, seed=seed)
        return {name: (ok, " ".join(detail.split())) for name, ok, detail in report.rows}

    yield run
    for env_id in registered:
        unregister(env_id)


def test_the_calculator_passes_every_row_including_the_new_ones(rows):
    class Calc(CalculatorEnv):
        env_id = "fixit-calc-v0"

    got = rows(Calc)
    assert all(ok for ok, _ in got.values()), {k: v for k, v in got.items() if not v[0]}
    assert got["every stage reached by a scripted agent"] == (True, "2 stages, each labels a step: compute, answer")


def test_an_undocumented_tool_argument_is_named_with_the_docstring_to_write(rows):
    class Undocumented(CalculatorEnv):
        env_id = "fixit-undocumented-v0"

        @tool
        def answer(self, value: float, note: str = "") -> ToolOutput:
            """Give the final numeric answer; this ends the episode.

            Args:
                value: the final number
            """
            return super().answer(value)

    ok, detail = rows(Undocumented)["tool schemas"]
    assert not ok and "tool 'answer': argument(s) ['note'] have no description" in detail
    assert "Args: note: what it is" in detail


def test_a_rubric_check_the_env_lacks_is_named_with_a_close_match(rows, tmp_path: Path):
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text(
        "id: typo\ncriteria:\n"
        "  - {id: correct, text: Right., level: essential, check: final_answer_corect}\n"
        "  - {id: clean, text: Clean., level: pitfall, check: no_invalid_actions,\n"
        "     applies_if: 'tool:calculator|usedcalc'}\n"
    )

    class Typo(CalculatorEnv):
        env_id = "fixit-typo-v0"
        rubric_file = rubric

    ok, detail = rows(Typo)["default rubric validates"]
    assert not ok and "names checks Typo does not define" in detail
    assert "criterion 'correct' check: 'final_answer_corect' is not a check of the env: did you mean " in detail
    assert "'final_answer_correct'?" in detail
    applies = "criterion 'clean' applies_if: 'usedcalc' is not a check of the env: did you mean 'used_calculator'?"
    assert applies in detail and "applies_if also takes answered, acted, edited, tool:NAME" in detail


def test_an_applies_if_with_no_close_match_says_how_to_define_the_check(rows, tmp_path: Path):
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text(
        "id: unknown\ncriteria:\n"
        "  - {id: correct, text: Right., level: essential, check: final_answer_correct, applies_if: zzz_qqq}\n"
    )

    class Unknown(CalculatorEnv):
        env_id = "fixit-unknown-v0"
        rubric_file = rubric

    ok, detail = rows(Unknown)["default rubric validates"]
    assert not ok and "'zzz_qqq' is not a check of the env: define it with @check and add it to the env's" in detail


def test_task_ids_that_collide_across_seeds_get_the_opaque_id_to_write(rows):
    class Colliding(CalculatorEnv):
        env_id = "fixit-colliding-v0"

        def sample_task(self, rng, split="train"):
            task = super().sample_task(rng, split)
            return task.model_copy(update={"id": f"calc-{len(task.prompt) % 3}"})  # three ids for many tasks

    ok, detail = rows(Colliding)["distinct task ids"]
    assert not ok and re.search(r"name different tasks among \d+ generated", detail)
    assert "hashlib.sha256(key.encode()).hexdigest()[:12]" in detail and "must not say the answer" in detail


def test_a_stage_no_step_reaches_is_named(rows):
    class Unreached(CalculatorEnv):
        env_id = "fixit-unreached-v0"
        stages = ("compute", "verify", "answer")  # verify: declared, but stage_of never returns it

    ok, detail = rows(Unreached)["every stage reached by a scripted agent"]
    assert not ok and "stage(s) ['verify'] of Unreached.stages ['compute', 'verify', 'answer']" in detail
    assert "make stage_of return each stage" in detail and "labelled ['answer', 'compute']" in detail


def test_a_tool_returning_an_unawaited_coroutine_fails_check_and_an_async_tool_passes(rows):
    class Forgot(CalculatorEnv):
        env_id = "fixit-forgot-await-v0"

        async def _eval(self, expression: str) -> ToolOutput:
            return super().calculator(expression)

        @tool(examples={"expression": "17 * 23 - 4"})
        def calculator(self, expression: str) -> ToolOutput:
            """Evaluate an arithmetic expression.

            Args:
                expression: e.g. '17 * 23 - 4'
            """
            return self._eval(expression)  # type: ignore[return-value]

    ok, detail = rows(Forgot)["hostile argument values in every tool"]
    assert not ok and "Forgot's tool 'calculator' returned an un-awaited coroutine" in detail
    assert "declare the method `async def`" in detail

    class Awaits(CalculatorEnv):
        env_id = "fixit-async-tool-v0"

        @tool(examples={"expression": "17 * 23 - 4"})
        async def calculator(self, expression: str) -> ToolOutput:
            """Evaluate an arithmetic expression.

            Args:
                expression: e.g. '17 * 23 - 4'
            """
            return super().calculator(expression)

    got = rows(Awaits)
    assert all(ok for ok, _ in got.values()), {k: v for k, v in got.items() if not v[0]}


# ---- the audits the check runs (totals audit, leak audit, shortcut battery, outcome consistency) --------------------


def test_an_ungated_rubric_fails_outcome_consistency_with_the_pairs_and_the_gate_to_write(rows, tmp_path: Path):
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text(  # the toy rubric of v2 (issue 39): a weighted sum that pays for calculator calls
        "id: ungated\ncriteria:\n"
        "  - {id: correct, text: Right., level: essential, check: final_answer_correct}\n"
        "  - {id: grounded, text: Grounded., level: important, check: answer_grounded}\n"
        "  - {id: clean, text: Clean., level: important, check: no_invalid_actions, applies_if: 'tool:calculator'}\n"
        "  - {id: used, text: Calc., level: optional, check: used_calculator}\n"
    )

    class Ungated(CalculatorEnv):
        env_id = "fixit-ungated-v0"
        rubric_file = rubric

    got = rows(Ungated)
    ok, detail = got[CONSISTENCY_ROW]
    assert not ok and "failed 'outcome:partial' earns 0.630 > solved 'guess' 0.500" in detail
    assert "chance-level 'probe:activity' averages 0.370 > 0.1" in detail
    assert "per role, total/solved: oracle 1.000/100%, teacher 1.000/100%, partial 0.630/0%, failed 0.370/0%" in detail
    assert "aggregation: {method: swe_trace, outcome_check:" in detail
    assert got["shortcut battery: no reward without the work"][0]  # the other audits pass: only this row sees it
    assert got["default rubric pays nothing for nothing"][0]


class _InfoLeak(CalculatorEnv):
    """Hands the answer over in each step's public details, and only when built with ``leak=True``."""

    env_id = "fixit-info-leak-v0"
    public_info_keys = frozenset({"expected"})

    def __init__(self, *, leak: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.leak = leak

    def call_tool(self, call):
        out = super().call_tool(call)
        if self.leak:
            assert self._task is not None
            out.info = {**out.info, "expected": self._task.hidden["answer"]}
        return out


def test_a_leak_fails_its_row_alone_and_env_kwargs_reach_every_audit(rows):
    register(_InfoLeak.env_id, _InfoLeak, replace=True)
    try:
        clean = {n: (ok, d) for n, ok, d in check_env_id(_InfoLeak.env_id, fuzz=10).rows}
        leaky = {n: (ok, d) for n, ok, d in check_env_id(_InfoLeak.env_id, fuzz=10, env_kwargs={"leak": True}).rows}
    finally:
        unregister(_InfoLeak.env_id)
    assert all(ok for ok, _ in clean.values()), clean
    ok, detail = leaky["leak audit: no hidden value reaches the agent side"]
    assert not ok and "info: hidden answer" in detail
    assert leaky["shortcut battery: no reward without the work"][0]  # each audit row has its own verdict
    assert leaky["default rubric pays nothing for nothing"][0]


def test_concurrent_audits_report_what_one_episode_at_a_time_reports():
    register(_InfoLeak.env_id, _InfoLeak, replace=True)
    try:
        kw = {"leak": True}
        one = asyncio.run(audit_leaks(_InfoLeak.env_id, n_tasks=3, env_kwargs=kw, concurrency=1))
        many = asyncio.run(audit_leaks(_InfoLeak.env_id, n_tasks=3, env_kwargs=kw, concurrency=4))
        b1 = asyncio.run(run_battery(_InfoLeak.env_id, n_tasks=3, concurrency=1))
        b4 = asyncio.run(run_battery(_InfoLeak.env_id, n_tasks=3, concurrency=4))
    finally:
        unregister(_InfoLeak.env_id)
    # 4 scripted agents (oracle, random, guess, teacher) x 3 tasks x 2 splits, and the fuzz agent's 4 episodes
    assert not one.ok and one.episodes == 28
    assert many == one  # the same leaks in the same order, the same counts
    # info_reader:params[0] added, and the example call and its value (constant[0], constant[1])
    assert b1.oracle is not None and b1.oracle.total == 1.0 and len(b1.probes) == 9
    assert b4 == b1


def test_the_scanner_finds_spaceless_secrets_at_word_boundaries_only():
    scanner = Scanner(make_secrets([("exam", "joint_xray"), ("who", "Ke Hirox")]))
    assert scanner.compact("Ordered: Joint X-ray today") == {"jointxray"}
    assert scanner.compact("ke-hirox and joint x ray") == {"kehirox", "jointxray"}
    assert scanner.compact("disjoint xray") == set()  # "jointxray" inside "disjointxray", not at a word start
    assert scanner.compact("joint xrays") == set()  # nor ending inside a word
    assert scanner.compact("j o i n t x r a y") == set()  # 9 words: more than the longest secret's 2 + 2
    assert scanner.compact("j oint x ray") == {"jointxray"}  # 4 words: within 2 + 2
