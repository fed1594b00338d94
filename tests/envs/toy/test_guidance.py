"""toy-calculator-v0's graded hints: non-empty at every level, more help as the level rises, deterministic, and
never the answer (nor an intermediate value) however the numbers fall."""

import asyncio
import re

import pytest

import rubricgym
from rubricgym.core.types import Task
from rubricgym.envs.toy.calculator import CalculatorEnv
from rubricgym.rewards.leaks import Scanner, audit_leaks, make_secrets

ENV = "toy-calculator-v0"


def _tasks(n: int = 30, **kw) -> list[Task]:
    env = rubricgym.make(ENV, **kw)
    return [t for split in ("train", "test") for t in env.task_set(n, seed=7, split=split)]


def _scan(task: Task, text: str) -> list:
    return Scanner(make_secrets(CalculatorEnv.secrets(task))).find(text)


@pytest.mark.parametrize("style", ["word", "expression"])
def test_every_level_hints_and_none_beyond(style):
    env = rubricgym.make(ENV, style=style, min_ops=1, max_ops=6)
    assert CalculatorEnv.guidance_levels == 2
    for task in _tasks(style=style, min_ops=1, max_ops=6):
        hints = [env.guidance(task, level) for level in (1, 2)]
        assert all(h and h.strip() for h in hints), task.id
        assert env.guidance(task, 3) is None and env.guidance(task, 0) is None
        assert hints == [env.guidance(task, level) for level in (1, 2)]  # deterministic


def test_level_two_gives_the_whole_plan_level_one_only_the_first_operation():
    env = rubricgym.make(ENV, min_ops=3, max_ops=3)
    for task in _tasks():
        one, two = env.guidance(task, 1), env.guidance(task, 2)
        assert one != two
        operands = [step.split()[2] for step in task.hidden["steps"]]
        later = [n for n in operands[1:] if float(n) != task.hidden["answer"]]
        assert all(n in two for n in later), (two, operands)
        assert "then multiply" not in one and "that result" not in one and "that result" in two


@pytest.mark.parametrize("style", ["word", "expression"])
def test_no_hint_states_the_answer_or_an_intermediate_value(style):
    env = rubricgym.make(ENV, style=style, min_ops=1, max_ops=8)
    tasks = [t for split in ("train", "test") for t in env.task_set(150, seed=3, split=split)]
    for task in tasks:
        for level in (1, 2):
            text = env.guidance(task, level)
            assert text is not None and not _scan(task, text), (level, text, task.hidden)
            steps = [s.split() for s in task.hidden["steps"]]
            stated = {steps[0][0], str(len(steps))} | {s[2] for s in steps}  # stated numbers, the operation count
            intermediates = {s[0] for s in steps[1:]} - stated
            assert not intermediates & set(re.findall(r"\d+", text)), (text, intermediates)


def test_an_operand_equal_to_the_answer_is_said_in_words():
    env = rubricgym.make(ENV)
    task = Task(id="t", env_id=ENV, prompt="Ada has 40 coins. Ada gives away 20 coins. How many?", hidden={})
    task = task.model_copy(update={"hidden": {"answer": 20, "steps": ["40 - 20"]}})
    for level in (1, 2):
        text = env.guidance(task, level)
        assert text is not None and "20" not in text.split() and "40" in text and not _scan(task, text)
    # the scanner the trainer and the leak audit use does catch a hint that states the answer
    assert _scan(task, "Subtract and you get 20 coins.")
    assert _scan(task, "the answer is 2 0")  # and with other spacing


def test_leak_audit_still_passes_with_the_hints_scanned():
    report = asyncio.run(audit_leaks(ENV, n_tasks=4))
    assert report.ok, report.line()
    assert report.scanned > 0
