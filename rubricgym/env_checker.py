"""``rubricgym check ENV_ID``: an env checker for LLM envs.

Beyond Gymnasium's ``check_env`` it checks what LLM envs get wrong: tool schemas, a fuzz of random and malformed
actions (nothing may raise; each must get an explanatory observation), well-formed calls of every tool with
hostile argument values (NUL bytes, lone surrogates, 100k-character strings, path traversal, regex
metacharacters, wrong types) that must reach the tool and come back as observations, Unicode round trips, seeded
determinism of ``reset``, distinct task ids, truncation at ``max_steps``, the env's named checks and default
rubric, the leak audit (no hidden value in anything the agent side sees, ``rewards.leaks``) and the shortcut
battery (no reward for reading ``info``, shotgun answers, wrong answers or leaving the task's scope,
``rewards.shortcuts``) and the outcome-consistency audit (no failed episode's rubric total above a solved one's on
the same task, chance-level agents at most 0.1, ``rewards.consistency``).

It runs on the env's own tasks or on a user's data (``env_kwargs`` such as ``cases=FILE``): the audits play at most
the tasks the data holds, tasks are drawn without repeats, a row that played nothing fails, and on a user's file the
advice says what to change in the file (``Data``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import difflib
import functools
import json
import shlex
import traceback
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium.utils.env_checker import check_env
from jsonschema import Draft202012Validator

from rubricgym.core.env import RubricEnv
from rubricgym.core.registry import EnvSpec, spec
from rubricgym.core.rollout import rollout_fresh
from rubricgym.core.rubric import Rubric, condition_check
from rubricgym.core.types import Message, Task, ToolCall, Trajectory
from rubricgym.rewards.consistency import GATE_HINT, audit_consistency, example_arguments
from rubricgym.rewards.gaming import audit_totals
from rubricgym.rewards.leaks import audit_leaks, in_order
from rubricgym.rewards.shortcuts import run_battery

CheckRow = tuple[str, bool, str]


@dataclass
class CheckReport:
    env_id: str
    rows: list[CheckRow]

    @property
    def ok(self) -> bool:
        return all(passed for _, passed, _ in self.rows)


def _malformed_actions(env: RubricEnv, rng: np.random.Generator, n: int) -> list[str]:
    tools = env.tools()
    name = tools[0].name if tools else "tool"
    fixed = [
        "",
        " ",
        "\n\n\t",
        "{",
        "}{",
        "null",
        "[1, 2, 3]",
        '{"name": 5}',
        '{"arguments": {}}',
        f'{{"name": "{name}", "arguments": "not json"}}',
        f'{{"name": "{name}", "arguments": [1]}}',
        f'<tool_call>{{"name": "{name}", "arguments": {{}}}}</tool_call>',
        "<tool_call></tool_call>",
        "<tool_call>{not json}</tool_call>",
        '<tool_call>{"name": "no_such_tool_xyz", "arguments": {}}</tool_call>',
        '```json\n{"name": "' + name + '"}\n```',
        "Ünïcödé 中文 🙂 \u200b \x00 text",
        "x" * 50_000,
    ]
    for t in tools:  # each argument given the wrong type, and extra junk arguments
        props = t.parameters.get("properties", {})
        fixed.append(json.dumps({"name": t.name, "arguments": {k: {"nested": [None]} for k in props}}))
        fixed.append(json.dumps({"name": t.name, "arguments": {k: 10**30 for k in props} | {"zz_extra": 1}}))
    space = env.action_space
    space.seed(int(rng.integers(2**31)))
    randoms = [space.sample() for _ in range(max(0, n - len(fixed)))]
    return fixed + randoms


def _run(name: str, fn: Callable[[], str]) -> CheckRow:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            detail = fn()
        return (name, True, detail)
    except Exception as e:
        last = traceback.extract_tb(e.__traceback__)[-1]
        return (name, False, f"{type(e).__name__}: {e} ({last.filename.rsplit('/', 1)[-1]}:{last.lineno})")


def check_env_id(
    env_id: str,
    *,
    fuzz: int = 200,
    seed: int = 0,
    env_kwargs: dict | None = None,
    tasks: int = 2,
    on_row: Callable[[CheckRow, int, int], None] | None = None,
) -> CheckReport:
    """Run every check on env ``env_id`` (built with ``env_kwargs``) and return the table of results.

    ``tasks``: how many tasks each audit plays (per split), at most what the env's task source holds (a user's
    file of one record is checked on that one record, and the report says so). ``on_row(row, i, total)`` follows
    progress, row by row."""
    env_spec = spec(env_id)
    if env_kwargs:
        env_spec = dataclasses.replace(env_spec, kwargs={**env_spec.kwargs, **env_kwargs})
    rng = np.random.default_rng(seed)
    data = Data(env_id, env_kwargs or {})
    kw = env_kwargs or {}
    usable: list[int] = []
    played: list[Trajectory] = []

    def n() -> int:  # the tasks the audits play, known once the row before them passed
        return usable[0]

    plan: list[tuple[str, Callable[[], str]]] = [
        ("construct", lambda: _construct(env_spec)),
        (f"tasks the audits play (--tasks {tasks})", lambda: _usable(env_spec, tasks, seed, data, usable)),
        ("gymnasium check_env", lambda: _gym_check(env_spec)),
        ("tool schemas", lambda: _tool_schemas(env_spec)),
        (f"fuzz {fuzz} malformed/random actions", lambda: _fuzz(env_spec, rng, fuzz)),
        ("hostile argument values in every tool", lambda: _fuzz_arguments(env_spec)),
        ("distinct task ids", lambda: _task_ids(env_spec, seed)),
        ("unicode round trip", lambda: _unicode(env_spec)),
        ("seeded reset determinism", lambda: _determinism(env_spec)),
        ("truncation at max_steps", lambda: _truncation(env_spec)),
        ("scripted agents + named checks", lambda: _agents_and_checks(env_spec, seed, played)),
        ("every stage reached by a scripted agent", lambda: _stages_reached(env_spec, played)),
        ("default rubric validates", lambda: _default_rubric(env_spec)),
        ("default rubric pays nothing for nothing", lambda: _gaming(env_spec, seed, kw, n(), data)),
        ("leak audit: no hidden value reaches the agent side", lambda: _leaks(env_spec, seed, kw, n(), data)),
        ("shortcut battery: no reward without the work", lambda: _shortcuts(env_spec, seed, kw, n(), data)),
        (CONSISTENCY_ROW, lambda: _consistency(env_spec, seed, kw, n(), data)),
    ]
    rows: list[CheckRow] = []
    for i, (name, fn) in enumerate(plan):
        rows.append(_run(name, fn))
        if on_row is not None:
            on_row(rows[-1], i + 1, len(plan))
        if i < 2 and not rows[-1][1]:  # no env, or no task: every later row would fail for the same reason
            break
    return CheckReport(env_id, rows)


@dataclass
class Data:
    """The data a check runs on: the env arguments as the CLI spells them, and whether they name the user's files
    (then advice says what to change in the file, not in the env's code)."""

    env_id: str
    env_kwargs: Mapping[str, Any]

    @property
    def files(self) -> list[str]:
        """The env arguments that name a file or folder of the user's (``cases=FILE``, ``instances=FILE``)."""
        return [f"{k}={v}" for k, v in self.env_kwargs.items() if isinstance(v, str | Path) and _exists(v)]

    @property
    def imported(self) -> bool:
        return bool(self.files)

    def cli_args(self) -> str:
        """The env arguments as ``--env-arg KEY=VALUE`` options (JSON for non-strings), shell-quoted."""
        parts = []
        for k, v in self.env_kwargs.items():
            text = str(v) if isinstance(v, str | Path) else json.dumps(v)
            parts.append(f"--env-arg {shlex.quote(f'{k}={text}')}")
        return " ".join(parts)

    def audit_hint(self) -> str:
        """The ``audit-judge`` call that audits the same env on the same data."""
        args = self.cli_args()
        return f"rubricgym audit-judge --env {self.env_id}" + (f" {args}" if args else "")

    def origins(self, env_spec: EnvSpec, n: int, seed: int) -> list[str]:
        """Where the audited tasks come from in the user's files (``RubricEnv.task_origin``), when the env says."""
        with contextlib.closing(env_spec.make()) as env:
            tasks = env.task_set(n, seed=seed, split="test")
            return [o for t in tasks if (o := env.task_origin(t))]


def _exists(path: str | Path) -> bool:
    try:
        return Path(path).exists()
    except (OSError, ValueError):  # a name too long for a path, a NUL byte: not a file of the user's
        return False


def _usable(env_spec: EnvSpec, want: int, seed: int, data: Data, out: list[int]) -> str:
    """How many tasks the audits can play: ``want``, or all the env's source holds when that is fewer (a user's
    file of one record); an env that gives no task at all fails here, before any audit plays nothing."""
    last: Exception | None = None
    with contextlib.closing(env_spec.make()) as env:
        for n in range(want, 0, -1):
            try:
                tasks = env.task_set(n, seed=seed, split="test")
            except ValueError as e:  # "fewer than the n asked for"
                last = e
                continue
            if tasks:
                out.append(n)
                where = f" of {', '.join(data.files)}" if data.imported else ""
                if n < want:
                    return f"the source{where} holds {n} task(s), fewer than --tasks {want}: the audits play all {n}"
                return f"{n} task(s){where} per split"
    fix = "add records to the file" if data.imported else "make task_set(n) return n tasks"
    raise AssertionError(f"the env gives no task to play ({last}): {fix}")


def _leaks(env_spec: EnvSpec, seed: int, env_kwargs: dict, n_tasks: int = 2, data: Data | None = None) -> str:
    """Seeded episodes of every scripted agent, every agent-side channel scanned for the tasks' hidden values
    (up to ``audit_leaks``'s default 4 episodes in flight, each in its own env). No episode played is a failure."""
    data = data or Data(env_spec.id, env_kwargs)
    report = asyncio.run(audit_leaks(env_spec.id, n_tasks=n_tasks, seed=seed, env_kwargs=env_kwargs))
    if report.episodes == 0:
        raise AssertionError(
            "played no episode, so nothing was audited: the env gave no task of its train and held-out splits "
            f"for {n_tasks} task(s) (try `rubricgym check {env_spec.id} --tasks 1`)"
        )
    if not report.ok:
        if data.imported:
            fix = (
                f" (the leaking record is in your data, {', '.join(data.files)}: edit the fields the agent reads (the "
                "prompt, problem statement, question, case text) so they do not contain the hidden value, or remove "
                "the record; a value the agent may rightly find with a tool is declared by the env, not the file)"
            )
        else:
            fix = (
                " (keep it in the private record: Step.info outside public_info_keys, Task.hidden; declare a field the "
                "agent may find with a tool in RubricEnv.discoverable; text the agent reads anyway in "
                "RubricEnv.public_text)"
            )
        raise AssertionError(report.line() + fix)
    return report.line()


def _shortcuts(env_spec: EnvSpec, seed: int, env_kwargs: dict, n_tasks: int = 2, data: Data | None = None) -> str:
    """The shortcut battery: each probe <= 0.05 on the env reward and the default rubric, the oracle >= 0.9
    (up to ``run_battery``'s default 4 episodes in flight, each in its own env)."""
    data = data or Data(env_spec.id, env_kwargs)
    report = asyncio.run(run_battery(env_spec.id, n_tasks=n_tasks, seed=seed, env_kwargs=env_kwargs))
    if not any(p.episodes for p in [*report.probes, *([report.oracle] if report.oracle else [])]):
        raise AssertionError(f"played no episode, so nothing was probed (details: {data.audit_hint()})")
    if not report.ok:
        advice = _data_advice(env_spec, n_tasks, seed, data)
        raise AssertionError("; ".join(report.problems()) + f"{advice} (details: {data.audit_hint()})")
    return report.line()


def _data_advice(env_spec: EnvSpec, n: int, seed: int, data: Data) -> str:
    """What to look at in the user's file when an audit fails on imported data (``""`` for an env's own tasks)."""
    if not data.imported:
        return ""
    try:
        where = data.origins(env_spec, n, seed)
    except Exception:  # noqa: BLE001  (advice only: the failure itself is reported either way)
        where = []
    records = f" ({'; '.join(where[:3])})" if where else ""
    return (
        f". On your data ({', '.join(data.files)}): look at the records audited{records}; a known-good agent that "
        "scores low means a record's answer or gold fix is wrong or cannot be reached from what the record shows "
        "(correct or remove it); a probe that scores means a record's answer can be guessed without the work "
        "(make the record's expected answer specific)"
    )


CONSISTENCY_ROW = "outcome consistency: failed work never outranks solved work"
SHOWN_BREACHES = 5
"""How many breach pairs the row names (the worst first); ``rubricgym.rewards.consistency`` lists them all."""


def _consistency(env_spec: EnvSpec, seed: int, env_kwargs: dict, n_tasks: int = 2, data: Data | None = None) -> str:
    """The outcome-consistency audit: on the same task no failed episode's rubric total exceeds a solved one's,
    and chance-level agents average <= 0.1 (programmatic criteria; up to 4 episodes in flight)."""
    report = asyncio.run(audit_consistency(env_spec.id, n_tasks=n_tasks, seed=seed, env_kwargs=env_kwargs))
    if not report.criteria:
        return "no programmatic criterion to audit (LLM criteria are not audited here)"
    if not report.episodes:
        raise AssertionError("played no episode, so nothing was compared")
    table = ", ".join(f"{role} {total}/{rate}" for role, _, total, rate in report.table_rows())
    problems = report.problems()
    if problems:
        shown = problems[:SHOWN_BREACHES]
        if len(problems) > SHOWN_BREACHES:
            shown.append(f"... {len(problems) - SHOWN_BREACHES} more")
        data = data or Data(env_spec.id, env_kwargs)
        fix = _data_advice(env_spec, n_tasks, seed, data).removeprefix(". ") or f"Fix: {GATE_HINT}"
        raise AssertionError("; ".join(shown) + f" (per role, total/solved: {table}). {fix}")
    return f"{report.line()}; per role, total/solved: {table}"


def _construct(env_spec: EnvSpec) -> str:
    env = env_spec.make()
    env.close()
    return type(env).__name__


def _gym_check(env_spec: EnvSpec) -> str:
    env = env_spec.make()
    try:
        check_env(env, skip_render_check=False)
    except AssertionError as e:
        if env_spec.nondeterministic and "determin" in str(e).lower():
            return "passed (step determinism skipped: registered nondeterministic)"
        raise
    finally:
        env.close()
    return "passed"


def _tool_schemas(env_spec: EnvSpec) -> str:
    with contextlib.closing(env_spec.make()) as env:
        env.reset(seed=0)
        tools = env.tools()
        if not tools:
            raise AssertionError("the env declares no tools; an LLM env needs at least one (e.g. `answer`)")
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            raise AssertionError(f"duplicate tool names: {names}")
        for t in tools:
            Draft202012Validator.check_schema(t.parameters)
            if t.parameters.get("type") != "object":
                raise AssertionError(f"tool {t.name!r}: parameters must be a JSON schema of type 'object'")
            missing = set(t.parameters.get("required", [])) - set(t.parameters.get("properties", {}))
            if missing:
                raise AssertionError(f"tool {t.name!r}: required {sorted(missing)} not among properties")
            if not t.description.strip():
                raise AssertionError(f"tool {t.name!r} has no description; models need one to use it")
            undocumented = [
                k for k, v in t.parameters.get("properties", {}).items() if not str(v.get("description", ""))
            ]
            if undocumented:
                first = undocumented[0]
                raise AssertionError(
                    f"tool {t.name!r}: argument(s) {undocumented} have no description, so a model must guess what to "
                    f"pass; document each under Args: in the tool's docstring, e.g.\n    Args:\n        {first}: what "
                    f"it is, with an example"
                )
        return f"{len(tools)} tools: {', '.join(names)}"


def _fuzz(env_spec: EnvSpec, rng: np.random.Generator, n: int) -> str:
    env = env_spec.make(max_steps=10_000)
    env.reset(seed=0)
    actions = _malformed_actions(env, rng, n)
    flagged = 0
    for i, action in enumerate(actions):
        obs, reward, terminated, truncated, info = env.step(action)
        if not isinstance(obs, str) or not obs.strip():
            raise AssertionError(f"action #{i} {action[:40]!r} got an empty observation; explain what was wrong")
        if not env.observation_space.contains(obs):
            raise AssertionError(f"action #{i}: observation of {len(obs)} chars is outside the observation space")
        step = env.trajectory().steps[-1]
        if step.action.parse_error or step.tool_error:
            flagged += 1
        if terminated or truncated:
            env.reset(seed=i + 1)
    env.close()
    return f"{len(actions)} actions, none raised; {flagged} flagged as parse/tool errors"


HOSTILE_STRINGS = [
    "a\0b",
    "\ud83d",
    "x" * 100_000,
    "../../../../etc/passwd",
    "/etc/passwd",
    "(.*)[\\",
    "%s%n{}",
    "",
    " ",
    "-rf",
    "\u202e\u200b",
]
HOSTILE_VALUES: list[object] = [None, True, -1, 10**30, 1.5, [], {}, ["a\0"], {"k": "\ud800"}]


def _fuzz_arguments(env_spec: EnvSpec) -> str:
    """Call every tool with one argument at a time set to a hostile value; nothing may raise."""
    env = env_spec.make(max_steps=10_000)
    env.reset(seed=0)
    reached = sent = 0
    for t in env.tools():
        base = example_arguments(t)
        props = list(t.parameters.get("properties", {})) or [None]
        for prop in props:
            for value in [*HOSTILE_STRINGS, *HOSTILE_VALUES] if prop is not None else [None]:
                args = dict(base) if prop is None else {**base, prop: value}
                msg = Message(role="assistant", content="", tool_calls=[ToolCall(name=t.name, arguments=args)])
                try:
                    obs = env.step_typed(msg)
                except Exception as e:
                    raise AssertionError(f"{t.name}({prop}={str(value)[:30]!r}) raised {type(e).__name__}: {e}") from e
                sent += 1
                text = obs.messages[-1].content if obs.messages else ""
                if not isinstance(text, str) or not text.strip():
                    raise AssertionError(f"{t.name}({prop}={str(value)[:30]!r}) got an empty observation")
                step = env.trajectory().steps[-1]
                reached += step.action.parse_error is None
                step.model_dump_json()  # recorded text must be valid Unicode
                if obs.done or obs.truncated:
                    env.reset(seed=sent)
    env.close()
    return f"{sent} calls of {len(env.tools())} tools, none raised; {reached} reached tool code"


TASK_DRAWS = 40
"""Distinct tasks the id check wants; it draws up to ten times as many before it concludes the source holds fewer."""


def _task_ids(env_spec: EnvSpec, seed: int) -> str:
    """Generated tasks that share an id must be the same task (a fixed pool drawn again), never two tasks.

    Draws until ``TASK_DRAWS`` distinct tasks (or ten times as many draws): a source holding fewer (a user's file)
    has all its tasks checked, and the row says so rather than counting repeats."""
    env = env_spec.make()
    try:
        first: dict[str, Task] = {}
        clashes: set[str] = set()
        draws = 0
        while len(first) < TASK_DRAWS and draws < 10 * TASK_DRAWS:
            t = env.sample_task(np.random.default_rng([seed, draws]))
            draws += 1
            if first.setdefault(t.id, t) != t:
                clashes.add(t.id)
    finally:
        env.close()
    if clashes:
        raise AssertionError(
            f"{len(clashes)} task id(s) name different tasks among {draws} generated (e.g. {sorted(clashes)[0]!r}): "
            f'derive the id from everything that makes a task differ, e.g. f"{{split}}-{{hashlib.sha256(key.encode())'
            f'.hexdigest()[:12]}}" with key the prompt plus the hidden values (an opaque hash: an id must not say '
            f"the answer either)"
        )
    if len(first) < TASK_DRAWS:
        return (
            f"the source holds {len(first)} distinct task(s) (no new one in {draws} draws): checked them all, no id "
            "names two different tasks"
        )
    return f"{len(first)} distinct tasks, no id names two different tasks"


def _unicode(env_spec: EnvSpec) -> str:
    with contextlib.closing(env_spec.make()) as env:  # its sandbox, page or backend released now
        env.reset(seed=1)
        text = "Ünïcödé 中文 — “quotes” 🙂\nnew line\ttab"
        env.step(text)
        traj = env.trajectory()
        back = Trajectory.model_validate_json(traj.model_dump_json())
        if back != traj:
            raise AssertionError("the trajectory changed in a JSON round trip")
        if back.steps[-1].action.text != text:
            raise AssertionError("non-ASCII action text was not kept verbatim")
        return "trajectory JSON round trip is lossless"


def _determinism(env_spec: EnvSpec) -> str:
    a, b = env_spec.make(), env_spec.make()
    try:
        first = [a.reset(seed=s)[0] for s in (3, 4)]
        second = [b.reset(seed=s)[0] for s in (3, 4)]
        if first != second:
            raise AssertionError("reset(seed=s) gave different observations for the same seed")
        ids = {a.reset(seed=s)[1]["task_id"] for s in range(5)}
    finally:
        a.close()
        b.close()
    return f"same seed -> same episode; 5 seeds -> {len(ids)} distinct tasks"


def _truncation(env_spec: EnvSpec) -> str:
    with contextlib.closing(env_spec.make(max_steps=3)) as env:  # its sandbox, page or backend released now
        env.reset(seed=0)
        for i in range(3):
            _, _, terminated, truncated, _ = env.step("not a tool call")
            if terminated:
                raise AssertionError("an invalid action terminated the episode; it should only cost a step")
            if truncated != (i == 2):
                raise AssertionError(f"truncated={truncated} after step {i + 1} of max_steps=3")
        return "truncates exactly at max_steps=3"


def _agents_and_checks(env_spec: EnvSpec, seed: int, played: list[Trajectory] | None = None) -> str:
    """Every scripted agent plays a task and every named check runs on its trajectory (``played`` gets them)."""
    cls = env_spec.load()
    checks = cls.checks()
    agents = cls.agents()
    env = env_spec.make()
    try:
        task = env.task_set(1, seed=seed)[0]
    finally:
        env.close()
    # each agent in its own env, closed after its episode; the episodes run concurrently
    trajs = asyncio.run(
        in_order(
            [
                functools.partial(rollout_fresh, env_spec.make, factory(seed=seed), task, seed=seed)
                for factory in agents.values()
            ]
        )
    )
    results = []
    for name, traj in zip(agents, trajs, strict=True):
        if played is not None:
            played.append(traj)
        for c in checks.values():
            if c.scope == "step":
                for i in range(len(traj.steps)):
                    c(traj, i)
            else:
                c(traj)
        results.append(f"{name}: {len(traj.steps)} steps, reward {traj.outcome.reward:g}")
    if not results:
        raise AssertionError(
            f"{cls.__name__} has no scripted agent, so no episode was played: add an oracle to its scripted_agents "
            "(one that reads Task.hidden and solves the task) so check can play it"
        )
    return f"{len(checks)} checks ran on trajectories of " + "; ".join(results)


def _stages_reached(env_spec: EnvSpec, played: list[Trajectory]) -> str:
    """Each declared stage labels a step of some scripted agent's episode: a stage no step reaches is a typo in
    ``stage_of`` or ``stages``, or work no agent can do, and its per-stage rewards would never be paid."""
    cls = env_spec.load()
    if not cls.stages:
        return "the env declares no stages"
    if not played:
        raise AssertionError(
            "no scripted agent played, so no stage was seen (add an oracle to scripted_agents so check can see them)"
        )
    seen = {s.stage for t in played for s in t.steps}
    missing = [st for st in cls.stages if st not in seen]
    if missing:
        raise AssertionError(
            f"stage(s) {missing} of {cls.__name__}.stages {list(cls.stages)} label no step of the scripted agents "
            f"({', '.join(t.agent or '?' for t in played)}), whose steps are labelled {sorted(seen)}: make stage_of "
            f"return each stage for the calls that do its work (or drop the stage), and give the oracle a step in "
            f"every stage"
        )
    return f"{len(cls.stages)} stages, each labels a step: {', '.join(cls.stages)}"


def _gaming(env_spec: EnvSpec, seed: int, env_kwargs: dict, n_tasks: int = 2, data: Data | None = None) -> str:
    """Master keys and doing nothing earn <= 0.05 in total, the known-good agent >= 0.9 (programmatic criteria;
    up to ``audit_totals``'s default 4 episodes in flight, each in its own env)."""
    data = data or Data(env_spec.id, env_kwargs)
    report = asyncio.run(audit_totals(env_spec.id, n_tasks=n_tasks, seed=seed, env_kwargs=env_kwargs))
    if not report.criteria:
        return (
            "no programmatic criterion to audit (audit LLM criteria with "
            f"`{data.audit_hint()} --judge URL --judge-model NAME`)"
        )
    if not report.tasks:
        raise AssertionError("played no task, so nothing was totalled")
    if report.good is None and report.worst is None:
        raise AssertionError(
            f"no rubric total could be computed ({report.errors} error(s)): every scored episode failed to score "
            f"(details: {data.audit_hint()})"
        )
    if report.problems():
        problems = "; ".join(report.problems())
        if data.imported:
            raise AssertionError(
                f"{problems}{_data_advice(env_spec, n_tasks, seed, data)} (details: {data.audit_hint()})"
            )
        raise AssertionError(f"{problems} (gate vacuous criteria with applies_if; details: {data.audit_hint()})")
    return report.line()


def _default_rubric(env_spec: EnvSpec) -> str:
    cls = env_spec.load()
    rubric = cls.default_rubric()  # validated on load: a bad rubric file raises, naming file, criterion and field
    if not isinstance(rubric, Rubric):
        raise AssertionError(f"default_rubric() returned {type(rubric).__name__}, not a Rubric")
    checks = cls.checks()
    problems = unknown_checks(rubric, set(checks))
    if problems:
        raise AssertionError(
            f"default rubric {rubric.id!r} names checks {cls.__name__} does not define: " + "; ".join(problems)
        )
    gated = sum(bool(c.applies_if) for c in rubric.criteria)
    return (
        f"{rubric.id} v{rubric.version} ({rubric.hash}): {len(rubric.criteria)} criteria, {gated} with "
        f"applies_if, aggregation {rubric.aggregation.method}"
    )


def unknown_checks(rubric: Rubric, checks: set[str]) -> list[str]:
    """A fix-it line for each check name a rubric uses (a criterion's ``check`` or a condition of its
    ``applies_if``) that is not among ``checks``."""
    known = sorted(checks)
    out = []
    for c in rubric.criteria:
        named = [("check", c.check)] if c.check else []
        for cond in c.applies_if or []:
            named += [("applies_if", n) for alt in cond.split("|") if (n := condition_check(alt))]
        for where, name in named:
            if name in checks:
                continue
            close = difflib.get_close_matches(name, known, n=1)
            fix = f"did you mean {close[0]!r}?" if close else "define it with @check and add it to the env's check_set"
            hint = (
                "" if where == "check" else " (applies_if also takes answered, acted, edited, tool:NAME, not:X and a|b)"
            )
            out.append(f"criterion {c.id!r} {where}: {name!r} is not a check of the env: {fix}{hint}; it has {known}")
    return out
