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
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import difflib
import functools
import json
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass

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


def check_env_id(env_id: str, *, fuzz: int = 200, seed: int = 0, env_kwargs: dict | None = None) -> CheckReport:
    """Run every check on env ``env_id`` (built with ``env_kwargs``) and return the table of results."""
    env_spec = spec(env_id)
    if env_kwargs:
        env_spec = dataclasses.replace(env_spec, kwargs={**env_spec.kwargs, **env_kwargs})
    rows: list[CheckRow] = []
    rng = np.random.default_rng(seed)

    rows.append(_run("construct", lambda: _construct(env_spec)))
    if not rows[-1][1]:
        return CheckReport(env_id, rows)
    rows.append(_run("gymnasium check_env", lambda: _gym_check(env_spec)))
    rows.append(_run("tool schemas", lambda: _tool_schemas(env_spec)))
    rows.append(_run(f"fuzz {fuzz} malformed/random actions", lambda: _fuzz(env_spec, rng, fuzz)))
    rows.append(_run("hostile argument values in every tool", lambda: _fuzz_arguments(env_spec)))
    rows.append(_run("distinct task ids", lambda: _task_ids(env_spec, seed)))
    rows.append(_run("unicode round trip", lambda: _unicode(env_spec)))
    rows.append(_run("seeded reset determinism", lambda: _determinism(env_spec)))
    rows.append(_run("truncation at max_steps", lambda: _truncation(env_spec)))
    played: list[Trajectory] = []
    rows.append(_run("scripted agents + named checks", lambda: _agents_and_checks(env_spec, seed, played)))
    rows.append(_run("every stage reached by a scripted agent", lambda: _stages_reached(env_spec, played)))
    rows.append(_run("default rubric validates", lambda: _default_rubric(env_spec)))
    kw = env_kwargs or {}
    rows.append(_run("default rubric pays nothing for nothing", lambda: _gaming(env_spec, seed, kw)))
    rows.append(_run("leak audit: no hidden value reaches the agent side", lambda: _leaks(env_spec, seed, kw)))
    rows.append(_run("shortcut battery: no reward without the work", lambda: _shortcuts(env_spec, seed, kw)))
    rows.append(_run(CONSISTENCY_ROW, lambda: _consistency(env_spec, seed, kw)))
    return CheckReport(env_id, rows)


def _leaks(env_spec: EnvSpec, seed: int, env_kwargs: dict) -> str:
    """Seeded episodes of every scripted agent, every agent-side channel scanned for the tasks' hidden values
    (up to ``audit_leaks``'s default 4 episodes in flight, each in its own env)."""
    report = asyncio.run(audit_leaks(env_spec.id, n_tasks=2, seed=seed, env_kwargs=env_kwargs))
    if not report.ok:
        raise AssertionError(
            report.line() + " (keep it in the private record: Step.info outside public_info_keys, Task.hidden; "
            "declare a field the agent may find with a tool in RubricEnv.discoverable; text the agent reads anyway in "
            "RubricEnv.public_text)"
        )
    return report.line()


def _shortcuts(env_spec: EnvSpec, seed: int, env_kwargs: dict) -> str:
    """The shortcut battery: each probe <= 0.05 on the env reward and the default rubric, the oracle >= 0.9
    (up to ``run_battery``'s default 4 episodes in flight, each in its own env)."""
    report = asyncio.run(run_battery(env_spec.id, n_tasks=2, seed=seed, env_kwargs=env_kwargs))
    if not report.ok:
        raise AssertionError("; ".join(report.problems()) + f" (details: rubricgym audit-judge --env {env_spec.id})")
    return report.line()


CONSISTENCY_ROW = "outcome consistency: failed work never outranks solved work"
SHOWN_BREACHES = 5
"""How many breach pairs the row names (the worst first); ``rubricgym.rewards.consistency`` lists them all."""


def _consistency(env_spec: EnvSpec, seed: int, env_kwargs: dict) -> str:
    """The outcome-consistency audit: on the same task no failed episode's rubric total exceeds a solved one's,
    and chance-level agents average <= 0.1 (programmatic criteria; up to 4 episodes in flight)."""
    report = asyncio.run(audit_consistency(env_spec.id, n_tasks=2, seed=seed, env_kwargs=env_kwargs))
    if not report.criteria:
        return "no programmatic criterion to audit (LLM criteria are not audited here)"
    table = ", ".join(f"{role} {total}/{rate}" for role, _, total, rate in report.table_rows())
    problems = report.problems()
    if problems:
        shown = problems[:SHOWN_BREACHES]
        if len(problems) > SHOWN_BREACHES:
            shown.append(f"... {len(problems) - SHOWN_BREACHES} more")
        raise AssertionError("; ".join(shown) + f" (per role, total/solved: {table}). Fix: {GATE_HINT}")
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


def _task_ids(env_spec: EnvSpec, seed: int) -> str:
    """Generated tasks that share an id must be the same task (a fixed pool drawn again), never two tasks."""
    env = env_spec.make()
    tasks = [env.sample_task(np.random.default_rng([seed, i])) for i in range(40)]
    env.close()
    first: dict[str, Task] = {}
    clashes = sorted({t.id for t in tasks if first.setdefault(t.id, t) != t})
    if clashes:
        raise AssertionError(
            f"{len(clashes)} task id(s) name different tasks among 40 generated (e.g. {clashes[0]!r}): derive "
            f'the id from everything that makes a task differ, e.g. f"{{split}}-{{hashlib.sha256(key.encode())'
            f'.hexdigest()[:12]}}" with key the prompt plus the hidden values (an opaque hash: an id must not say '
            f"the answer either)"
        )
    return f"40 generated tasks: {len(first)} distinct, no id names two different tasks"


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
    return f"{len(checks)} checks ran on trajectories of " + ("; ".join(results) or "no scripted agents")


def _stages_reached(env_spec: EnvSpec, played: list[Trajectory]) -> str:
    """Each declared stage labels a step of some scripted agent's episode: a stage no step reaches is a typo in
    ``stage_of`` or ``stages``, or work no agent can do, and its per-stage rewards would never be paid."""
    cls = env_spec.load()
    if not cls.stages:
        return "the env declares no stages"
    if not played:
        return "no scripted agents to play the stages (add an oracle to scripted_agents so check can see them)"
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


def _gaming(env_spec: EnvSpec, seed: int, env_kwargs: dict) -> str:
    """Master keys and doing nothing earn <= 0.05 in total, the known-good agent >= 0.9 (programmatic criteria;
    up to ``audit_totals``'s default 4 episodes in flight, each in its own env)."""
    report = asyncio.run(audit_totals(env_spec.id, n_tasks=2, seed=seed, env_kwargs=env_kwargs))
    if not report.criteria:
        return "no programmatic criterion to audit (audit LLM criteria with `rubricgym audit-judge --judge URL`)"
    if report.problems():
        raise AssertionError(
            "; ".join(report.problems()) + " (gate vacuous criteria with applies_if; "
            f"details: rubricgym audit-judge --env {env_spec.id})"
        )
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
