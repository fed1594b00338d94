"""Bring your own web tasks: any page in a local folder or on a loopback URL becomes an env from a small spec.

The spec (YAML or ``WebTaskSpec(...)`` in Python) says how to reset the page with a seed, read the
instruction, the reward, whether the episode is over and whether it succeeded: JavaScript functions over the
page's own globals, so community task suites that compute their reward in JS (MiniWoB++-style) plug in without
code. Optional goal predicates over a JS ``state`` function give progress and success as in ``gui-v0``.

Success is its own field, never read off a time-scaled reward: a ``success`` JS function (the page's own full
success, e.g. its raw reward at 1), or else the page's reward at or above ``success_threshold``. The episode's
reward is that success (1 or 0); a negative page reward is a failure, and a page that ends the episode
unsuccessfully is a false completion, not a finish in time. A page that pays partly right work a fraction gives it
as ``progress`` (a JS function in [0, 1]): partial credit the rubric ranks failed episodes by, never success.

    spec = WebTaskSpec.load("my_tasks/spec.yaml")
    register_web_tasks(spec)          # registers web-<name>-v0: rubricgym run web-<name>-v0 --agent random ...

or, with no registration at all, the id ``web:my_tasks/spec.yaml`` (``rubricgym run web:my_tasks/spec.yaml``): runs
record it with the spec's absolute path, and ``score``, ``show``, ``eval`` and ``arena`` resolve it again from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rubricgym.core.jsonl import read_text
from rubricgym.core.registry import EnvSpec, register
from rubricgym.core.types import Task, ToolCall
from rubricgym.envs.gui import checks
from rubricgym.envs.gui.browser_env import BrowserEnv
from rubricgym.envs.gui.judge import (
    Goal,
    changed_paths,
    check_goals,
    gained,
    progress,
    state_progress,
    unexpected_changes,
)
from rubricgym.envs.gui.session import ActionFailed, Session
from rubricgym.envs.gui.site import Site

EXAMPLE_SPEC = Path(__file__).with_name("byo_example") / "spec.yaml"
FAKE_ORIGIN = "http://{name}.web.rubricgym.test"
RANDOM_AGENT = "rubricgym.envs.gui.agents:RandomClicker"
WEB_PREFIX = "web:"
PARTIAL_CAP = 0.99
"""The most progress a failed episode shows: full progress is success's alone."""


class WebTaskSpec(BaseModel):
    """How to turn a web page into tasks (every JS field is a function expression evaluated in the page)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    url: str
    """A path under ``root`` (served on a private origin), or an absolute loopback URL (``http://127.0.0.1:...``);
    either may carry a query string (``index.html?mode=test``)."""
    root: Path | None = None
    scope: str = "/"
    """Where the episode's pages must stay, as a path on the site: a folder ending in ``/`` (default: the whole
    site) or one page (``/miniwob/click-button.html``, with any query or fragment). A page outside it ends the
    episode as a failed escape."""
    reset: str = "seed => {}"
    instruction: str = "() => document.title"
    """A JS function returning the instruction: a string, or an object whose ``instruction_field`` is the string
    (its other fields, which may hold the answers, are never shown)."""
    instruction_field: str = "text"
    reward: str = "() => 0"
    done: str = "() => false"
    state: str | None = None
    goals: list[Goal] = Field(default_factory=list)
    expected_changes: list[str] = Field(default_factory=lambda: ["*"])
    success: str | None = None
    """A JS function: true when the episode succeeded by the page's own criterion, its full reward (e.g.
    ``() => WOB_RAW_REWARD >= 1`` for a page whose reward shrinks with time; a partly right submission that the
    page pays a fraction is not a success); unset: the page's reward at or above ``success_threshold``."""
    progress: str | None = None
    """A JS function: the page's own partial credit in [0, 1] (e.g. ``() => Math.max(0, WOB_RAW_REWARD)``, the
    share of checkboxes right); it is the episode's progress (the rubric's ``goal_progress``), never its success.
    Unset (and no ``goals``): progress is all or nothing, the success."""
    success_threshold: float = Field(default=1.0, gt=0)
    """With no ``success`` function: the page's reward at or above this is success (above 0, or doing nothing,
    reward 0, would succeed)."""
    max_steps: int = Field(default=15, ge=1)
    seeds: int = Field(default=1000, ge=1)
    test_every: int = Field(default=5, ge=2)
    """Seeds divisible by this are the held-out test split."""

    @model_validator(mode="after")
    def _where(self) -> WebTaskSpec:
        if self.root is None and not self.url.startswith(("http://127.0.0.1", "http://localhost")):
            raise ValueError("give `root` (a folder to serve) or a loopback `url` (http://127.0.0.1:PORT/...)")
        if self.goals and self.state is None:
            raise ValueError("`goals` are predicates over the page state: give a `state` JS function too")
        if self.goals and self.progress is not None:
            raise ValueError("give `goals` (progress is the share of goals that hold) or `progress`, not both")
        if not self.scope.startswith("/") or "?" in self.scope or "#" in self.scope:
            raise ValueError(f"`scope` is a path on the site starting with '/' (no ? or #), got {self.scope!r}")
        return self

    @classmethod
    def load(cls, path: str | Path) -> WebTaskSpec:
        """A spec from YAML; a relative ``root`` is relative to the spec file."""
        path = Path(path)
        try:
            data = yaml.safe_load(read_text(path))
            spec = cls.model_validate(data)
        except (OSError, yaml.YAMLError) as e:
            raise ValueError(f"cannot read web task spec {path}: {e}") from None
        except ValidationError as e:
            raise ValueError(f"web task spec {path} is invalid:\n{e}") from None
        if spec.root is not None and not spec.root.is_absolute():
            spec.root = (path.parent / spec.root).resolve()
        if spec.root is not None and not (spec.root / urlsplit(spec.url).path).is_file():
            raise ValueError(f"web task spec {path}: url {spec.url!r} is not a file under root {spec.root}")
        return spec

    def site(self) -> Site:
        if self.root is not None:
            return Site(FAKE_ORIGIN.format(name=self.name), self.root)
        parts = self.url.split("/")
        return Site("/".join(parts[:3]))

    def start_url(self) -> str:
        return f"{self.site().origin}/{self.url.lstrip('/')}" if self.root is not None else self.url

    def scope_url(self) -> str:
        """The absolute URL (a folder ending in ``/`` or one page) the episode's pages must stay in."""
        return self.site().origin + self.scope

    def instruction_text(self, value: Any) -> str:
        """The instruction from what the ``instruction`` function returned (a string, or an object's field)."""
        if isinstance(value, dict):
            if not isinstance(value.get(self.instruction_field), str):
                raise ValueError(
                    f"web task {self.name!r}: `instruction` returned an object without a string field "
                    f"{self.instruction_field!r} (it has {sorted(value)}); set `instruction_field` to the field "
                    "holding the instruction, or return a string"
                )
            return value[self.instruction_field]
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            return str(value)
        raise ValueError(
            f"web task {self.name!r}: `instruction` returned {type(value).__name__}; return a string, or an object "
            f"with the string field {self.instruction_field!r}"
        )


class WebTaskEnv(BrowserEnv):
    """Tasks of one ``WebTaskSpec`` (a spec, a dict or a YAML path).

    The env id its tasks carry: the class's own (a registered spec, ``web-example-v0``) when it runs its default
    spec, else ``web:<absolute path>`` for a spec file (any later command resolves that again), else
    ``web-<name>-v0`` (what ``register_web_tasks`` registers).
    """

    env_id = "web-example-v0"  # the worked example's, when it runs its default spec
    default_spec: ClassVar[WebTaskSpec | Path] = EXAMPLE_SPEC

    check_set = checks.ALL
    rubric_file = Path(__file__).with_name("rubric.yaml")
    scripted_agents: ClassVar[Mapping[str, str]] = {
        "random": RANDOM_AGENT,
        "oracle": "rubricgym.envs.gui.agents:FlightOracle",  # the worked example's (web-example-v0) only
    }

    def __init__(self, spec: WebTaskSpec | dict[str, Any] | str | Path | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        own = spec is None
        spec = self.default_spec if spec is None else spec
        path = Path(spec).resolve() if isinstance(spec, str | Path) else None
        if path is not None:
            spec = WebTaskSpec.load(path)
        self.web_spec = spec if isinstance(spec, WebTaskSpec) else WebTaskSpec.model_validate(spec)
        if own and type(self).env_id:
            self.env_id = type(self).env_id
        else:
            self.env_id = f"{WEB_PREFIX}{path}" if path is not None else f"web-{self.web_spec.name}-v0"
        self._site = self.web_spec.site()
        self._instruction = ""
        self._reward = 0.0
        self._over = False
        self._succeeded = False
        self._partial = 0.0
        self._start_state_progress = 0.0
        self._initial: Any = None
        self._last: Any = None
        self._progress = 0.0

    def sample_task(self, rng: np.random.Generator, split: str = "train") -> Task:
        if split not in ("train", "test"):
            raise ValueError(f"{self.env_id} has the splits 'train' and 'test', not {split!r}")
        every = self.web_spec.test_every
        seeds = [s for s in range(self.web_spec.seeds) if (s % every == 0) == (split == "test")] or [0]
        seed = seeds[int(rng.integers(len(seeds)))]
        return Task(
            id=f"{self.web_spec.name}-{seed}",
            env_id=self.env_id,
            split=split,
            prompt="Complete the task on the web page.",
            params={"page_seed": seed},
        )

    def site(self, task: Task) -> Site:
        return self._site

    def begin(self, task: Task) -> None:
        self.max_steps = self._max_steps_arg or self.web_spec.max_steps
        super().begin(task)

    async def open_episode(self, session: Session, task: Task) -> None:
        self.scope = self.web_spec.scope_url()
        await session.open(self.web_spec.start_url())
        await self._reset_page(session, task)
        self._instruction = self.web_spec.instruction_text(await session.evaluate(f"({self.web_spec.instruction})()"))
        self._reward, self._over, self._succeeded, self._partial = 0.0, False, False, 0.0
        self._initial = self._last = await self._state(session)
        self._progress = self._goal_progress(self._initial)
        if self.web_spec.goals:
            self._start_state_progress = state_progress(check_goals(self.web_spec.goals, self._initial or {}, {}))

    async def _reset_page(self, session: Session, task: Task) -> None:
        await session.evaluate(f"seed => ({self.web_spec.reset})(seed)", int(task.params.get("page_seed", 0)))

    async def restore_page(self, session: Session) -> None:  # the page's own state cannot be put back: reset it
        assert self._task is not None, "restore_page() runs inside an episode"
        seed = int(self._task.params.get("page_seed", 0))
        await session.page.evaluate(f"seed => ({self.web_spec.reset})(seed)", seed)

    def stage_of(self, call: ToolCall | None) -> str:
        """``finish`` for the step on which the page ended its episode (a submission is a claim to be done)."""
        if call is not None and self._over and self.escaped is None:
            return "finish"
        return super().stage_of(call)

    async def episode_prompt(self, task: Task) -> str:
        return f"Task: {self._instruction}\n{task.prompt} Call done() when it is complete."

    async def _state(self, session: Session) -> Any:
        return await session.evaluate(f"({self.web_spec.state})()") if self.web_spec.state else None

    def _goal_progress(self, state: Any) -> float:
        """Goal progress with goals; else the page's own partial credit (``progress``), capped below 1 unless the
        episode succeeded; else all or nothing (a page's reward may shrink with time)."""
        if self.web_spec.goals:
            return progress(check_goals(self.web_spec.goals, state or {}, self.answer_sheet))
        if self._success():
            return 1.0
        return min(self._partial, PARTIAL_CAP)

    async def judge_step(self, session: Session, tool: str) -> tuple[bool, dict[str, Any]]:
        spec = self.web_spec
        partial: Any = self._partial
        try:
            self._reward = float(await session.evaluate(f"({spec.reward})()"))
            self._over = bool(await session.evaluate(f"({spec.done})()"))
            if spec.success is not None:
                self._succeeded = bool(await session.evaluate(f"({spec.success})()"))
            if spec.progress is not None:
                partial = await session.evaluate(f"({spec.progress})()")
            state = await self._state(session)
        except (ActionFailed, TypeError, ValueError):
            state = self._last
        self._partial = _unit(partial, spec)  # a spec's bad `progress` is an error that says what to return
        info: dict[str, Any] = {"page_reward": self._reward, "prev_progress": self._progress}
        changed = spec.state is not None and bool(changed_paths(self._last or {}, state or {}))
        if spec.goals:
            info["goals"] = check_goals(spec.goals, state or {}, self.answer_sheet)
        if spec.state is not None:
            info["unexpected"] = unexpected_changes(self._last or {}, state or {}, spec.expected_changes)
        self._last = state
        self._progress = self._goal_progress(state)
        info.update(progress=self._progress, episode_over=self._over, changed=changed)
        return changed, info

    def step_reward(self, info: dict[str, Any], final: bool) -> float:
        if final:
            return float(self._success())
        if not self.web_spec.goals:  # the page's own reward is revealed only at the end: no oracle mid-episode
            return 0.0
        return gained(state_progress(info["goals"]), self._start_state_progress)

    def _success(self) -> bool:
        spec = self.web_spec
        if self.escaped is not None:
            return False
        if spec.goals and self._progress < 1.0 - 1e-9:
            return False
        if spec.state is not None and unexpected_changes(self._initial or {}, self._last or {}, spec.expected_changes):
            return False  # the task done by also changing what it did not ask for is not done
        if spec.success is not None:
            return self._succeeded
        return bool(spec.goals) or self._reward >= spec.success_threshold

    def summary(self) -> dict[str, Any]:
        if not self._records:
            return {}
        last = self._records[-1]
        spec = self.web_spec
        success = self._success()
        ended = last.out.done and last.call is not None and (last.call.name == "done" or self._over)
        side = (
            unexpected_changes(self._initial or {}, self._last or {}, self.web_spec.expected_changes)
            if self.web_spec.state
            else []
        )
        return {
            "spec": spec.name,
            "page_reward": self._reward,
            "success": success,
            "progress": self._progress,
            "false_completion": bool(ended and not success and self.escaped is None),
            "overdue": bool((last.truncated and not last.out.done) or self.timed_out()),
            "side_effects": side,
            "answer_sheet": dict(self.answer_sheet),
            "escaped": self.escaped is not None,
        }


def _unit(value: Any, spec: WebTaskSpec) -> float:
    """The ``progress`` function's value as a number in [0, 1], or a ``ValueError`` saying what to return."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ValueError(
            f"web task {spec.name!r}: `progress` returned {value!r}; return a number in [0, 1] (the page's partial "
            "credit, e.g. () => Math.max(0, WOB_RAW_REWARD))"
        )
    return min(1.0, max(0.0, float(value)))


def register_web_tasks(
    spec: WebTaskSpec | str | Path, *, agents: Mapping[str, str] | None = None, replace: bool = True
) -> EnvSpec:
    """Register ``web-<name>-v0`` for a spec (then ``rubricgym.make`` / ``rubricgym run`` know it).

    ``agents`` are the spec's own scripted agents as ``"module:Class"`` (its ``oracle``, which ``rubricgym check``
    holds to a total of 0.9); the worked example's flight oracle is not one of them.
    """
    spec = spec if isinstance(spec, WebTaskSpec) else WebTaskSpec.load(spec)
    env_id = f"web-{spec.name}-v0"
    return register(
        env_id,
        web_task_class(spec, env_id, agents),
        replace=replace,
        description=f"Web tasks of the page {spec.url} (bring-your-own spec {spec.name!r}).",
    )


def web_task_class(spec: WebTaskSpec, env_id: str, agents: Mapping[str, str] | None = None) -> type[WebTaskEnv]:
    """A ``WebTaskEnv`` subclass that runs ``spec`` by default under ``env_id``, with its own scripted agents."""
    return type(
        f"WebTasks_{spec.name.replace('-', '_')}",
        (WebTaskEnv,),
        {
            "__module__": __name__,
            "env_id": env_id,
            "default_spec": spec,
            "scripted_agents": {"random": RANDOM_AGENT, **(agents or {})},
        },
    )


class SpecFileWebTaskEnv(WebTaskEnv):
    """The env of a ``web:<spec file>`` id: the spec's tasks with the random agent (the example's oracle is not
    its oracle); its tasks carry the ``web:`` id."""

    env_id = ""
    scripted_agents: ClassVar[Mapping[str, str]] = {"random": RANDOM_AGENT}


def web_env_spec(env_id: str) -> EnvSpec:
    """The registry's spec of ``web:<path to a spec YAML>``: the spec file's tasks, no registration needed
    (``rubricgym run web:my_site/spec.yaml``); a relative path is made absolute, which is the id runs record."""
    path = Path(env_id.removeprefix(WEB_PREFIX)).expanduser().resolve()
    try:
        spec = WebTaskSpec.load(path)
    except ValueError as e:
        raise KeyError(f"{env_id!r} names no usable web task spec: {e}") from None
    return EnvSpec(
        id=f"{WEB_PREFIX}{path}",
        entry_point=SpecFileWebTaskEnv,
        kwargs={"spec": str(path)},
        description=f"Web tasks of the page {spec.url} (spec file {path}).",
    )
