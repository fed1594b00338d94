"""The ``swe-v0`` teacher (issue #38): it fixes the built-in bugs from what the tools show it.

Fast tests check its reasoning on text (the failure report it reads, the fixes it would try on the viewed file,
that its first moves vary with the seed and that it never holds the task); the slow ones play it in the bwrap
sandbox: it solves the built-in tasks at the env's default settings, and its action is a function of its seed and
the messages (what cloning needs). The no-peeking check is in ``tests/envs/test_teachers.py``.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from rubricgym.core.registry import make
from rubricgym.core.rollout import rollout
from rubricgym.core.types import Message
from rubricgym.envs.swe.builtin import BUGS, CORE, TESTS
from rubricgym.envs.swe.teacher import Teacher, called_functions, candidates, function_span

REPORT = """pytest: 1 failed, 16 passed (exit code 1).
FAILED tests/test_core.py::test_wrap_long_word
    assert wrap("extraordinarily long", 5) == ["extraordinarily", "long"]
E   AssertionError: assert ['', 'extraor...rily', 'long'] == ['extraordinarily', 'long']
--- pytest report (tail) ---
tests/test_core.py:57: in test_wrap_long_word
    assert wrap("extraordinarily long", 5) == ["extraordinarily", "long"]
"""


def _prompt(statement: str) -> list[Message]:
    return [Message(role="system", content="tools..."), Message(role="user", content=statement)]


def test_reads_the_function_under_test_from_the_failing_assertion():
    assert called_functions(REPORT, ["tests/test_core.py::test_wrap_long_word"]) == ["wrap"]


def _passes_the_suite(code: str) -> bool:
    """Whether ``tinytext/core.py`` written as ``code`` passes the built-in test suite (trusted code, run here)."""
    module: dict = {}
    try:
        exec(compile(code, "core.py", "exec"), module)  # the built-in package's own source
        tests = dict(module)
        exec(compile(TESTS.split("\n", 1)[1], "test_core.py", "exec"), tests)  # and its own tests
        for name, fn in tests.items():
            if name.startswith("test_"):
                fn()
    except Exception:  # noqa: BLE001 - any failure of the suite is a failed try
        return False
    return True


@pytest.mark.parametrize("bug", BUGS, ids=[b.id for b in BUGS])
def test_one_of_its_tries_fixes_each_builtin_bug(bug):
    """On the buggy file as ``view`` shows it, some candidate fix of the function holding the bug makes the test
    suite pass (the teacher tries them in turn and keeps the one the tests pass); the buggy file fails it."""
    buggy = CORE.replace(bug.old, bug.new)
    assert not _passes_the_suite(buggy)
    lines = dict(enumerate(buggy.splitlines(), start=1))
    at = buggy[: buggy.index(bug.new)].count("\n") + 1 if bug.new else 1
    def_line = max(n for n, text in lines.items() if n <= at and text.startswith("def "))
    assert at in function_span(lines, def_line)
    tries = candidates(lines, def_line, bug.statement)
    fixed = [
        _passes_the_suite(
            "\n".join(
                [*(lines[n] for n in range(1, c.first)), c.new, *(lines[n] for n in range(c.last + 1, len(lines) + 1))]
            )
            + "\n"
        )
        for c in tries
    ]
    assert any(fixed), f"no candidate fixes {bug.id} ({bug.kind})"
    assert len(tries) <= 12  # few enough to try within the episode's 30 steps


def test_first_moves_vary_with_the_seed_and_never_see_the_task():
    statement = "`wrap` produces lines longer than the width."
    firsts = {Teacher(seed).decide(_prompt(statement)) for seed in range(12)}
    assert len(firsts) >= 2, firsts
    task = make("swe-v0").task_set(1)[0]
    agent = Teacher(seed=0).episode(task, 0)
    assert not any(v is task or v == task.hidden for v in vars(agent).values())


@pytest.mark.slow
@pytest.mark.sandbox
def test_solves_the_builtin_tasks_at_default_settings(bwrap, tmp_path, monkeypatch):
    """All built-in tasks (bwrap, 30 steps): the teacher solves at least 60 % of them (measured: 10/10) with valid
    tool calls only, and a fresh teacher handed the history of any step takes the same next action."""
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path))
    env = make("swe-v0")
    try:
        tasks = env.task_set(10, seed=0, split="all")
        solved = 0
        for i, task in enumerate(tasks):
            traj = asyncio.run(rollout(env, Teacher(seed=i), task, seed=i))
            solved += bool(traj.outcome and traj.outcome.succeeded)
            assert all(s.action.parse_error is None for s in traj.steps), task.id
            history = env.messages
            turns = [k for k, m in enumerate(history) if m.role == "assistant"]
            k = turns[len(turns) // 2]
            assert Teacher(seed=i).decide(history[:k]) == history[k].content  # a function of seed and messages
    finally:
        env.close()
    assert solved / len(tasks) >= 0.6, f"solved {solved}/{len(tasks)}"


def _history(statement: str, replies: list[str], seed: int) -> list[Message]:
    """The messages after ``replies`` (tool outputs, in turn) to the actions the teacher itself takes."""
    messages = _prompt(statement)
    for reply in replies:
        messages += [
            Message(role="assistant", content=Teacher(seed).decide(messages)),
            Message(role="user", content=reply),
        ]
    return messages


def test_a_line_that_is_not_unique_is_edited_with_the_line_before_it():
    """``str_replace`` refuses text that occurs twice; the teacher retries with the line before it for context."""
    seed = next(s for s in range(50) if "run_tests" in Teacher(s).decide(_prompt("x")))
    code = ["def wrap(text: str, width: int) -> list[str]:", "    n = 1", "    m = [n]", "    n = 1", "    return m"]
    view = "tinytext/core.py:\n" + "\n".join(f"{n:6d}\t{text}" for n, text in enumerate(code, start=1))
    replies = [REPORT, "./tinytext/core.py:1:def wrap(text: str, width: int) -> list[str]:", view]
    messages = _history("`wrap` breaks lines too early.", replies, seed)
    first = _call(Teacher(seed).decide(messages))
    assert first["name"] == "str_replace" and first["arguments"]["old"] == "    n = 1", first
    messages += [
        Message(role="assistant", content=Teacher(seed).decide(messages)),
        Message(role="user", content="Error from str_replace: `old` occurs 2 times in tinytext/core.py (lines 2, 4)"),
    ]
    retry = _call(Teacher(seed).decide(messages))
    old, new = retry["arguments"]["old"], retry["arguments"]["new"]
    before = old.split("\n")[0]
    assert before in (code[0], code[2]), old
    assert (old, new) == (f"{before}\n    n = 1", f"{before}\n{first['arguments']['new']}")


def _call(action: str) -> dict:
    return json.loads(action.removeprefix("<tool_call>").removesuffix("</tool_call>"))
