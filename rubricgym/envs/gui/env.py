"""``gui-v0``: everyday tasks in bundled web apps (notes, mail, calendar, contacts, settings, shop) in Chromium.

Each task comes from a parameterised template (``templates/``): the app starts in a seeded state, the agent
operates it through browser tools on ARIA-snapshot observations, and every reward is read from the app's own
state (``state()`` in its JS): the state diff minus the template's expected changes gives unexpected side
effects, and success is every goal predicate holding with no such side effect (deleting every contact is no way
to delete one); ``done`` on an unfinished task is a false completion, running out of steps is an overdue
termination and a page that leaves the task's app is a failed escape. The episode's reward is its success (1 or
0); the steps before it earn the share of the state goals gained so far (answers count only at the end).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from rubricgym.core.types import Task
from rubricgym.envs.gui import checks, guidance
from rubricgym.envs.gui.browser_env import BrowserEnv
from rubricgym.envs.gui.data import APPS, initial_state
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
from rubricgym.envs.gui.templates import TEMPLATES
from rubricgym.envs.gui.templates.base import answer_split

APP_ROOT = Path(__file__).with_name("apps")
APP_ORIGIN = "http://apps.rubricgym.test"
ENV_ID = "gui-v0"
MAX_REDRAWS = 500
"""Draws of a template's data a task may take to land on its split's side of the answer partition."""


class GuiEnv(BrowserEnv):
    """Bundled-app tasks. ``templates`` / ``apps`` / ``levels`` narrow the templates tasks are drawn from.

    ``split="train"`` draws from the training templates, ``"test"`` from the held-out ones (never seen in
    training). Answers are kept apart too: a value an answer sheet asks for (a count, a name, an address) is
    either a training value or a held-out one by a stable hash of its text (one in four held out,
    ``templates.base.heldout_answer``); a draw whose answers belong to the other split is redrawn, so no held-out
    goal is ever a training goal. An env narrowed to one split's templates draws them for either split (the
    answer partition still holds).

    ``screenshot=True`` adds a base64 JPEG of the page to every step's ``info``. ``guidance`` gives two levels of
    hints for a failing group: the page to go to, then the elements to use (``guidance.py``).
    """

    env_id = ENV_ID
    check_set = checks.ALL
    rubric_file = Path(__file__).with_name("rubric.yaml")
    scripted_agents = {
        "oracle": "rubricgym.envs.gui.agents:Oracle",
        "random": "rubricgym.envs.gui.agents:RandomClicker",
        "teacher": "rubricgym.envs.gui.teacher:Teacher",
    }
    outcome_agents: ClassVar[Mapping[str, str]] = {
        "partial": "rubricgym.envs.gui.agents:PartialOracle",  # one form field wrong, or the last click left out
        "failed": "rubricgym.envs.gui.agents:WrongSubmit",  # a well-formed wrong answer, or done() at once
    }
    guidance_levels = guidance.LEVELS
    open_ahead = True  # the bundled apps render nothing of their own until load(state)
    discoverable: ClassVar[Mapping[str, frozenset[str]]] = {
        "goals": frozenset({"*"}),  # what an information task asks for is on the app's pages (and on the sheet)
        "plan": frozenset({"*"}),  # the oracle's plan names elements of those pages and the text it types
    }

    def __init__(
        self,
        templates: list[str] | None = None,
        apps: list[str] | None = None,
        levels: list[int] | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        unknown = sorted(set(templates or []) - set(TEMPLATES)) + sorted(set(apps or []) - set(APPS))
        if unknown:
            raise ValueError(f"unknown template(s)/app(s) {unknown}; templates: {sorted(TEMPLATES)}; apps: {APPS}")
        self.template_ids = [
            t.id
            for t in TEMPLATES.values()
            if (templates is None or t.id in templates)
            and (apps is None or t.app in apps)
            and (levels is None or t.level in levels)
        ]
        if not self.template_ids:
            raise ValueError("no template matches the given templates/apps/levels")
        self._site = Site(APP_ORIGIN, APP_ROOT)
        self._goals: list[Goal] = []
        self._expected: list[str] = []
        self._initial: dict[str, Any] = {}
        self._last: dict[str, Any] = {}
        self._progress = 0.0
        self._start_state_progress = 0.0

    @classmethod
    def secrets(cls, task: Task) -> list[tuple[str, Any]]:
        """The answers the agent must find out (answer-sheet goals) that the instruction does not state.

        State goals describe the state the instruction asks for, in the app's own vocabulary (a folder named
        "sent"). An answer is on a page the agent opens (``discoverable`` through every tool: the company asked
        for is on the contact's card), so the audit holds it to the channels no action reaches: ids, the first
        observation, ``info`` and ``state()``; which one it is, the shortcut battery checks. No app's start page
        shows an answer: the contact list shows names only, the inbox senders' names (their addresses are on the
        opened message), the agenda titles and places (dates and times are on the event's card) and the shop's
        front page its categories and a search box (products and prices are on a category's page or a search's).
        A number the sheet takes approximately (a price) is also scanned for with two decimals, as the apps show
        it ("22.50" for 22.5).
        """
        shown = task.prompt.casefold()
        out: list[tuple[str, Any]] = []
        for i, g in enumerate(task.hidden.get("goals", [])):
            expected = g.get("expected")
            if not str(g.get("field", "")).startswith("answer.") or str(expected).casefold() in shown:
                continue
            out.append((f"goals[{i}].expected", expected))
            if g.get("op") == "approx" and isinstance(expected, int | float) and not isinstance(expected, bool):
                out.append((f"goals[{i}].expected", f"{expected:.2f}"))
        return out

    def guidance(self, task: Task, level: int) -> str | None:
        """Level 1: the app page or section to go to (and that the item is opened from its list); 2: the elements
        to use, in order. Never the text to type, the option to choose or an answer (``guidance.py``)."""
        return guidance.guidance(task, level, type(self).secrets(task))

    # ---- tasks ----------------------------------------------------------------------------------------------

    def sample_task(self, rng: np.random.Generator, split: str = "train") -> Task:
        pool = [t for t in self.template_ids if TEMPLATES[t].split == split]
        if split not in ("train", "test"):
            raise ValueError(f"gui-v0 has the splits 'train' and 'test' (held-out templates), not {split!r}")
        if not pool:  # a narrowed env may hold templates of one split only
            pool = self.template_ids
        tmpl = TEMPLATES[pool[int(rng.integers(len(pool)))]]
        for _ in range(MAX_REDRAWS):  # the same draw as before whenever its answers are the split's
            data_seed = int(rng.integers(2**31))
            state = initial_state(tmpl.app, data_seed)
            spec = tmpl.draw(rng, state)
            if answer_split(spec) in (None, split):
                break
        else:
            raise ValueError(
                f"template {tmpl.id!r} drew no task whose answers belong to split {split!r} in {MAX_REDRAWS} draws "
                f"(held-out tasks answer only values that training never asks, templates.base.heldout_answer); "
                f"give its answers a wider range of values"
            )
        sheet = ", ".join(repr(f) + ": ..." for f in spec.answer_fields)
        fields = (
            f" Put the answer on the answer sheet with answer({{{sheet}}}) before calling done()."
            if spec.answer_fields
            else ""
        )
        prompt = (
            f"Task: {spec.instruction}\nYou are operating the {tmpl.app.capitalize()} app in a web browser."
            f"{fields}"
            " Call done() when the task is complete."
        )
        return Task(
            id=f"{tmpl.id}-{data_seed}",
            env_id=self.env_id,
            split=split,
            prompt=prompt,
            params={
                "template": tmpl.id,
                "app": tmpl.app,
                "level": tmpl.level,
                "data_seed": data_seed,
                "max_steps": tmpl.max_steps or max(8, 2 * len(spec.plan) + 4),
                "answer_fields": spec.answer_fields,
            },
            hidden={
                # the app's data: the answers are in it, and task params go to every client (the server's `tasks`
                # reply); the agent reads it only as the app's pages show it
                "state": state,
                "goals": [g.model_dump() for g in spec.goals],
                "expected_changes": spec.expected_changes,
                "plan": spec.plan,
            },
        )

    # ---- episode ----------------------------------------------------------------------------------------------

    def site(self, task: Task) -> Site:
        return self._site

    def begin(self, task: Task) -> None:
        self.max_steps = self._max_steps_arg or int(task.params.get("max_steps", self.default_max_steps))
        self._goals = [Goal.model_validate(g) for g in task.hidden.get("goals", [])]
        self._expected = list(task.hidden.get("expected_changes", []))
        super().begin(task)

    async def open_episode(self, session: Session, task: Task) -> None:
        app = task.params["app"]
        if app not in APPS:
            raise ValueError(f"task {task.id!r}: unknown app {app!r}; bundled apps: {', '.join(APPS)}")
        self.scope = f"{APP_ORIGIN}/{app}/"
        await session.open(self.scope + "index.html")
        self._initial = self._last = await session.evaluate("s => (load(s), state())", task.hidden["state"])
        rows = check_goals(self._goals, self._initial, {})
        self._progress, self._start_state_progress = progress(rows), state_progress(rows)

    async def restore_page(self, session: Session) -> None:
        await session.page.evaluate("s => load(s)", self._last)

    async def judge_step(self, session: Session, tool: str) -> tuple[bool, dict[str, Any]]:
        try:
            state = await session.evaluate("() => state()")
        except ActionFailed:  # the page is not the app (went back past it): the app's state is where it was
            state = self._last
        rows = check_goals(self._goals, state, self.answer_sheet)
        now = progress(rows)
        changed = bool(changed_paths(self._last, state))
        info: dict[str, Any] = {
            "progress": now,
            "prev_progress": self._progress,
            "goals": rows,
            "changed": changed,
            "unexpected": unexpected_changes(self._last, state, self._expected),
        }
        self._last, self._progress = state, now
        return changed, info

    def step_reward(self, info: dict[str, Any], final: bool) -> float:
        if final:
            return float(self._success())
        return gained(state_progress(info["goals"]), self._start_state_progress)

    def _success(self) -> bool:
        """Every goal holds, nothing the task did not ask for changed (deleting every contact is no way to delete
        one) and the page never left the app."""
        done = bool(self._goals) and self._progress >= 1.0 - 1e-9 and self.escaped is None
        return done and not unexpected_changes(self._initial, self._last, self._expected)

    def summary(self) -> dict[str, Any]:
        if not self._records or self._task is None:
            return {}
        last = self._records[-1]
        success = self._success()
        claimed = last.out.done and last.call is not None and last.call.name == "done"
        return {
            "template": self._task.params.get("template"),
            "app": self._task.params.get("app"),
            "level": self._task.params.get("level"),
            "success": success,
            "progress": self._progress,
            "false_completion": bool(claimed and not success),
            "overdue": bool((last.truncated and not last.out.done) or self.timed_out()),
            "side_effects": unexpected_changes(self._initial, self._last, self._expected),
            "answer_sheet": dict(self.answer_sheet),
            "invalid_steps": sum(1 for r in self._records if r.parse_error or r.out.error),
            "escaped": self.escaped is not None,
        }
