"""Teachers never peek (issue #38): no action names a secret of the task before the episode showed it.

A teacher (``scripted_agents["teacher"]``) acts only on what the policy observes, so its episodes are fit to clone.
``peeks`` plays a teacher through an env and scans each action with the leak audit's matcher
(``rubricgym.rewards.leaks``: ``make_secrets`` over ``env.secrets(task)``, ``Scanner.find``) against the secrets
that the system prompt, the task prompt and the observations so far have not shown yet. Each family appends its
own test below, with a deliberately peeking teacher that must fail the same check.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from rubricgym.core.agent import Agent, TaskAgent, tool_call
from rubricgym.core.env import RubricEnv
from rubricgym.core.registry import make
from rubricgym.core.types import Message, Task, ToolSpec
from rubricgym.rewards.leaks import Scanner, as_text, make_secrets


async def peeks(env: RubricEnv, agent: Agent, task: Task, seed: int) -> list[str]:
    """Each secret an action of ``agent`` names before any text the agent was shown held it, as
    ``"step N: path=value"`` (empty: the agent never peeked)."""
    scanner = Scanner(make_secrets(type(env).secrets(task)))
    obs = env.reset_typed(seed=seed, task=task)
    shown: set[str] = set()

    def show(messages: list[Message]) -> None:
        for m in messages:
            if m.role != "assistant":
                shown.update(s.key for s in scanner.find(m.content or ""))

    show(env.messages)
    shown.update(s.key for t in obs.tools for s in scanner.find(t.model_dump_json()))
    ep = agent.episode(task, seed)
    out: list[str] = []
    for i in range(env.max_steps):
        action = as_text(await ep.act(list(env.messages), obs.tools))
        n_before = len(env.messages)
        obs = await env.astep_typed(action)
        call = env.steps[-1].action.tool_call
        written = action + ("\n" + json.dumps(call.arguments, ensure_ascii=False) if call else "")
        out += [f"step {i + 1}: {s.path}={s.value!r}" for s in scanner.find(written) if s.key not in shown]
        show(env.messages[n_before:])
        if obs.done or obs.truncated:
            break
    return out


# ---- deep search ----------------------------------------------------------------------------------------------

DEEPSEARCH_DEMO = {"hops": 1, "n_docs": 100, "distractors": 0, "max_steps": 4, "window_chars": 600}
"""configs/demo-deepsearch.yaml's env kwargs."""


class _PeekingDeepSearchTeacher(TaskAgent):
    """The broken variant: keeps the task and searches the hidden start of the chain, then answers the hidden
    answer (what the deep-search oracle does, and what a teacher must never do)."""

    name = "teacher"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        task = self.episode_task()
        hidden = task.hidden
        if not any(m.role == "assistant" for m in messages):
            leaf = hidden["entities"][f"E{len(hidden['entities']) - 1}"]["name"]
            return tool_call("search", query=leaf)
        return tool_call("answer", text=f"Answer: {hidden['answer']}")


@pytest.mark.parametrize(("env_id", "kwargs"), [("deepsearch-v0", DEEPSEARCH_DEMO)])
@pytest.mark.parametrize("split", ["train", "test"])
def test_deepsearch_teacher_never_names_a_secret_before_seeing_it(
    env_id: str, kwargs: dict, split: str, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path))
    env = make(env_id, **kwargs)
    teacher = type(env).agents()["teacher"](seed=0)
    tasks = env.task_set(30, seed=3, split=split)
    found = {t.id: asyncio.run(peeks(env, teacher, t, seed=i)) for i, t in enumerate(tasks)}
    assert not any(found.values()), {k: v for k, v in found.items() if v}
    assert all(t.hidden["answer"] for t in tasks)  # tasks with secrets: the check had something to find


@pytest.mark.parametrize(("env_id", "kwargs"), [("deepsearch-v0", DEEPSEARCH_DEMO)])
def test_deepsearch_peeking_teacher_fails_the_check(env_id: str, kwargs: dict, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path))
    env = make(env_id, **kwargs)
    tasks = env.task_set(5, seed=3)
    for i, task in enumerate(tasks):
        found = asyncio.run(peeks(env, _PeekingDeepSearchTeacher(), task, seed=i))
        assert any("entities.E1.name" in f for f in found), found  # the search named the hidden chain at once


# ---- clinical and toy -----------------------------------------------------------------------------------------

CLINICAL_DEMO = {"specialty": "cardiology"}
"""configs/demo-clinical.yaml's env kwargs (the env's own 12 turns)."""
TOY_DEMO = {"min_ops": 1, "max_ops": 1, "max_steps": 3, "style": "expression"}
"""The toy demo's env kwargs (rubricgym/trainers/demo.py DEMO_CONFIG)."""


def decoy_of(env: RubricEnv, task: Task, others: list[Task], scanner: Scanner) -> Task:
    """``task`` as a peeking agent would read it with another case's private data: the same prompt (what the
    agent is shown), the ``params`` and ``hidden`` of the task of ``others`` that shares the fewest of its secrets
    (a secret both share cannot tell a peek from reasoning: the diagnosis must differ)."""
    mine = {s.key for s in scanner.secrets}
    shared = [(len(mine & {s.key for s in make_secrets(type(env).secrets(o))}), i) for i, o in enumerate(others)]
    n, best = min((n, i) for n, i in shared if others[i].id != task.id)
    assert n < len(mine) or not mine, f"every task of {len(others)} shares all the secrets of {task.id}"
    other = others[best]
    return task.model_copy(update={"params": other.params, "hidden": other.hidden})


async def peeks_blind(env: RubricEnv, agent: Agent, task: Task, others: list[Task], seed: int) -> list[str]:
    """``peeks`` for an env whose answer is reasoned to, never shown (a diagnosis is inferred from findings): a
    secret an action names counts as seen when the agent, handed a decoy task (``decoy_of``: the same prompt,
    another case's private record) at the same point with the same messages, names it too: it came from what the
    agent was shown and its own knowledge. One that only the real task's private data makes it write is a peek."""
    scanner = Scanner(make_secrets(type(env).secrets(task)))
    decoy = decoy_of(env, task, others, scanner)
    obs = env.reset_typed(seed=seed, task=task)
    shown: set[str] = set()

    def show(messages: list[Message]) -> None:
        for m in messages:
            if m.role != "assistant":
                shown.update(s.key for s in scanner.find(m.content or ""))

    show(env.messages)
    ep = agent.episode(task, seed)
    out: list[str] = []
    for i in range(env.max_steps):
        history = list(env.messages)
        action = as_text(await ep.act(history, obs.tools))
        blind = as_text(await agent.episode(decoy, seed).act(history, obs.tools))
        derived = {s.key for s in scanner.find(blind)}
        n_before = len(env.messages)
        obs = await env.astep_typed(action)
        out += [f"step {i + 1}: {s.path}={s.value!r}" for s in scanner.find(action) if s.key not in shown | derived]
        show(env.messages[n_before:])
        if obs.done or obs.truncated:
            break
    return out


class _PeekingClinicalTeacher(TaskAgent):
    """The broken variant: keeps the task, asks about the chart's first finding, then diagnoses the hidden
    diagnosis (the clinical oracle's habit, which a teacher must never have)."""

    name = "teacher"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        task = self.episode_task()
        if not any(m.role == "assistant" for m in messages):
            finding = next(iter(task.params["case"]["history"]))
            return tool_call("ask", question=f"Have you had {finding}?")
        return tool_call("diagnose", diagnosis=task.hidden["diagnosis"]["name"], reason="the presentation")


class _PeekingToyTeacher(TaskAgent):
    """The broken variant: answers the hidden answer at once."""

    name = "teacher"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        task = self.episode_task()
        return tool_call("answer", value=task.hidden["answer"])


@pytest.mark.parametrize(("env_id", "kwargs"), [("clinical-v0", CLINICAL_DEMO), ("clinical-v0", {})])
@pytest.mark.parametrize("split", ["train", "test"])
def test_clinical_teacher_names_no_secret_that_only_the_hidden_record_gives(env_id: str, kwargs: dict, split: str):
    env = make(env_id, **kwargs)
    teacher = type(env).agents()["teacher"](seed=0)
    tasks = env.task_set(30, seed=5, split=split)
    found = {t.id: asyncio.run(peeks_blind(env, teacher, t, tasks, seed=i)) for i, t in enumerate(tasks)}
    assert not any(found.values()), {k: v for k, v in found.items() if v}
    assert sum(asyncio.run(peeks(env, teacher, t, seed=i)) != [] for i, t in enumerate(tasks[:5])) > 0, (
        "the plain check finds the diagnosis in the teacher's actions: the blind check had secrets to tell apart"
    )


def test_clinical_peeking_teacher_fails_the_check() -> None:
    env = make("clinical-v0", **CLINICAL_DEMO)
    tasks = env.task_set(8, seed=5)
    for i, task in enumerate(tasks):
        found = asyncio.run(peeks_blind(env, _PeekingClinicalTeacher(), task, tasks, seed=i))
        assert any("diagnosis.name" in f for f in found), found  # the diagnosis, at the second step


@pytest.mark.parametrize(("env_id", "kwargs"), [("toy-calculator-v0", TOY_DEMO), ("toy-calculator-v0", {})])
def test_toy_teacher_never_names_the_answer_before_the_calculator_shows_it(env_id: str, kwargs: dict) -> None:
    env = make(env_id, **kwargs)
    teacher = type(env).agents()["teacher"](seed=0)
    tasks = env.task_set(40, seed=5)
    found = {t.id: asyncio.run(peeks(env, teacher, t, seed=i)) for i, t in enumerate(tasks)}
    assert not any(found.values()), {k: v for k, v in found.items() if v}
    blind = {t.id: asyncio.run(peeks_blind(env, teacher, t, tasks, seed=i)) for i, t in enumerate(tasks[:10])}
    assert not any(blind.values()), {k: v for k, v in blind.items() if v}


def test_toy_peeking_teacher_fails_the_check() -> None:
    env = make("toy-calculator-v0", **TOY_DEMO)
    tasks = env.task_set(20, seed=5)
    flagged = 0
    for i, task in enumerate(tasks):
        scanner = Scanner(make_secrets(type(env).secrets(task)))
        if not scanner.secrets:
            continue  # a one-digit answer is too common a number to scan for
        found = asyncio.run(peeks(env, _PeekingToyTeacher(), task, seed=i))
        in_prompt = bool(scanner.find(task.prompt))
        assert bool(found) != in_prompt, (task.prompt, found)  # flagged unless the prompt itself states the answer
        assert bool(asyncio.run(peeks_blind(env, _PeekingToyTeacher(), task, tasks, seed=i))) != in_prompt
        flagged += bool(found)
    assert flagged >= 12, flagged


# ---- SWE and GUI ----------------------------------------------------------------------------------------------


def _need_bwrap() -> None:
    from rubricgym.envs.swe.sandbox import BwrapBackend
    from tests.conftest import missing_dependency

    if reason := BwrapBackend.unavailable_reason():
        missing_dependency(f"bwrap backend unavailable: {reason}")


def _need_browser() -> None:
    from rubricgym.envs.gui.pool import browser_available
    from tests.conftest import missing_dependency

    if reason := browser_available():
        missing_dependency(reason)


class _PeekingSweTeacher(TaskAgent):
    """The broken variant: keeps the task, runs its hidden failing tests at once, applies the gold patch's edit and
    submits (the oracle's plan, which a teacher must never follow)."""

    name = "teacher"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        from rubricgym.envs.swe.patch import hunk_edits, parse_patch

        task = self.episode_task()
        inst = task.hidden["instance"]
        turn = sum(1 for m in messages if m.role == "assistant")
        if turn == 0:
            return tool_call("run_tests", selector=" ".join(inst["FAIL_TO_PASS"]))
        fp = parse_patch(inst["patch"])[0]
        if turn == 1:
            old, new = hunk_edits(fp)[0]
            return tool_call("str_replace", path=fp.path, old=old, new=new)
        return tool_call("submit")


@pytest.mark.slow
def test_swe_teacher_names_no_secret_that_only_the_hidden_record_gives(tmp_path, monkeypatch) -> None:
    """Every built-in task: the failing tests and the file are named only after run_tests and grep showed them, and
    the fix it writes is one it also writes when the task's private record is another bug's (``peeks_blind``: the
    line it adds is reasoned from the code and the failures it read, not read from the gold patch)."""
    _need_bwrap()
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path))
    env = make("swe-v0")
    try:
        teacher = type(env).agents()["teacher"](seed=0)
        tasks = env.task_set(10, seed=3, split="all")
        found = {t.id: asyncio.run(peeks_blind(env, teacher, t, tasks, seed=i)) for i, t in enumerate(tasks)}
        assert not any(found.values()), {k: v for k, v in found.items() if v}
        assert all(make_secrets(type(env).secrets(t)) for t in tasks)  # the check had secrets to look for
        assert any(asyncio.run(peeks(env, teacher, t, seed=i)) for i, t in enumerate(tasks[:3])), (
            "the plain check finds a gold-patch line in the teacher's fix: the blind check had secrets to tell apart"
        )
    finally:
        env.close()


@pytest.mark.slow
def test_swe_peeking_teacher_fails_the_check(tmp_path, monkeypatch) -> None:
    _need_bwrap()
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path))
    env = make("swe-v0")
    try:
        tasks = env.task_set(10, seed=3, split="all")
        for i, task in enumerate(tasks[:4]):
            found = asyncio.run(peeks_blind(env, _PeekingSweTeacher(), task, tasks, seed=i))
            assert any("FAIL_TO_PASS" in f for f in found), found  # the hidden failing tests, at the first step
    finally:
        env.close()


def _gui_tasks_with_secrets() -> list[Task]:
    """Two tasks of every bundled-app template (both splits) whose answer the page must show: the tasks with
    secrets (a state task has none to peek at)."""
    from rubricgym.envs.gui.env import GuiEnv
    from rubricgym.envs.gui.templates import TEMPLATES

    tasks = [x for tid, t in TEMPLATES.items() for x in GuiEnv(templates=[tid]).task_set(2, seed=13, split=t.split)]
    return [t for t in tasks if make_secrets(GuiEnv.secrets(t))]


class _PeekingGuiTeacher(Agent):
    """The broken variant: the teacher that keeps the task and writes the hidden answers on the sheet at once."""

    name = "teacher"
    model = None

    def __init__(self, seed: int | None = None, task: Task | None = None):
        from rubricgym.envs.gui.teacher import Teacher

        self.task, self.honest = task, Teacher(seed)

    def episode(self, task: Task, seed: int | None) -> Agent:
        return _PeekingGuiTeacher(seed, task)

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        assert self.task is not None
        if not any(m.role == "assistant" for m in messages):
            goals = [g for g in self.task.hidden["goals"] if g["field"].startswith("answer.")]
            return tool_call("answer", fields={g["field"].removeprefix("answer."): str(g["expected"]) for g in goals})
        return await self.honest.act(messages, tools)


@pytest.mark.slow
def test_gui_teacher_never_names_an_answer_before_the_page_shows_it() -> None:
    _need_browser()
    tasks = _gui_tasks_with_secrets()
    assert len(tasks) >= 15, len(tasks)
    env = make("gui-v0")
    try:
        teacher = type(env).agents()["teacher"](seed=0)
        found = {t.id: asyncio.run(peeks(env, teacher, t, seed=i)) for i, t in enumerate(tasks)}
    finally:
        env.close()
    assert not any(found.values()), {k: v for k, v in found.items() if v}


@pytest.mark.slow
def test_gui_peeking_teacher_fails_the_check() -> None:
    _need_browser()
    tasks = _gui_tasks_with_secrets()
    env = make("gui-v0")
    try:
        for i, task in enumerate(tasks):
            found = asyncio.run(peeks(env, _PeekingGuiTeacher(), task, seed=i))
            assert any(f.startswith("step 1: goals[") for f in found), (task.prompt, found)
    finally:
        env.close()
