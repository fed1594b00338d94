"""Task templates (AndroidWorld / MobileGym style): typed parameters drawn from the seed, goals, oracle plans.

A template is a function ``(rng, state) -> Spec`` registered with ``@template``: it reads the seeded app
state (and may change it, e.g. put items in a cart first), draws its parameters and returns the instruction,
the goal predicates over the final state, the state paths it is allowed to change (``expected_changes``),
the answer-sheet fields (information-seeking tasks) and the oracle's plan: the tool calls that solve it,
naming elements by ARIA role and accessible name (the oracle finds their refs in each observation).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from rubricgym.envs.gui.judge import Goal

Split = Literal["train", "test"]


@dataclass
class Spec:
    """What one drawn task needs: instruction, goals, allowed changes, oracle plan."""

    instruction: str
    goals: list[Goal]
    plan: list[dict[str, Any]]
    expected_changes: list[str] = field(default_factory=list)
    answer_fields: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Template:
    id: str
    app: str
    level: int
    split: Split
    fn: Callable[[np.random.Generator, dict[str, Any]], Spec]
    max_steps: int | None = None

    def draw(self, rng: np.random.Generator, state: dict[str, Any]) -> Spec:
        return self.fn(rng, state)


TEMPLATES: dict[str, Template] = {}

HELDOUT_SHARE = 4
"""One answer value in ``HELDOUT_SHARE`` (by a stable hash of its text) is asked only by held-out tasks."""


def heldout_answer(value: Any) -> bool:
    """Whether the answer-sheet value ``value`` is reserved for held-out tasks (whatever field asks for it).

    Counts, names and prices recur across templates (a training ``notes.count_folder`` and a held-out
    ``mail.count_unread`` both answer "4"), so templates alone do not keep answers apart: values do.
    """
    text = " ".join(str(value).split()).casefold()
    return int(hashlib.sha1(f"gui-v0|answer|{text}".encode()).hexdigest()[:8], 16) % HELDOUT_SHARE == 0


def answer_split(spec: Spec) -> str | None:
    """The split a drawn task's answers allow: ``"test"`` when every answer value is held out, ``"train"`` when
    none is, ``"mixed"`` (neither may take it) when some are; ``None`` for a task with no answer sheet (its
    template's split places it: templates of the two splits do different things)."""
    held = [heldout_answer(g.expected) for g in spec.goals if g.field.startswith("answer.")]
    if not held:
        return None
    return "test" if all(held) else "train" if not any(held) else "mixed"


def template(
    id: str, app: str, level: int, split: Split = "train", max_steps: int | None = None
) -> Callable[[Callable[..., Spec]], Template]:
    """Register a template function under ``id`` (``app.verb``), difficulty ``level`` 1-4."""

    def wrap(fn: Callable[..., Spec]) -> Template:
        if id in TEMPLATES:
            raise ValueError(f"template {id!r} is registered twice")
        if not 1 <= level <= 4:
            raise ValueError(f"template {id!r}: level must be 1-4, got {level}")
        TEMPLATES[id] = t = Template(id, app, level, split, fn, max_steps)
        return t

    return wrap


# ---- goals and plan steps -------------------------------------------------------------------------------


def G(field: str, expected: Any = None, op: str = "eq") -> Goal:  # noqa: N802 - reads like a table row
    return Goal(field=field, op=op, expected=expected)


def click(role: str, name: str) -> dict[str, Any]:
    """Click the element with ``role`` and accessible ``name`` (``~text``: the name contains text)."""
    return {"tool": "click", "role": role, "name": name}


def fill(role: str, name: str, text: str) -> dict[str, Any]:
    return {"tool": "fill", "role": role, "name": name, "text": text}


def select(name: str, option: str) -> dict[str, Any]:
    return {"tool": "select", "role": "combobox", "name": name, "option": option}


def press(key: str) -> dict[str, Any]:
    return {"tool": "press", "key": key}


def answer(**fields: Any) -> dict[str, Any]:
    return {"tool": "answer", "fields": {k: str(v) for k, v in fields.items()}}


DONE: dict[str, Any] = {"tool": "done"}


def pick(rng: np.random.Generator, items: list[Any]) -> Any:
    """One of ``items`` (never empty: templates guarantee it by building their data)."""
    if not items:
        raise ValueError("nothing to pick from")
    return items[int(rng.integers(len(items)))]


def pick_where(rng: np.random.Generator, items: list[dict[str, Any]], **where: Any) -> dict[str, Any]:
    """One of the ``items`` whose fields equal ``where`` (e.g. ``favorite=False``)."""
    return pick(rng, [x for x in items if all(x[k] == v for k, v in where.items())])


def next_id(prefix: str, items: list[dict[str, Any]]) -> str:
    """The id after the highest of ``items`` (ids are ``prefix`` and a number: ``c7`` -> ``c8``)."""
    return prefix + str(max(int(x["id"][len(prefix) :]) for x in items) + 1)


def quote(text: str) -> str:
    return f"“{text}”"
