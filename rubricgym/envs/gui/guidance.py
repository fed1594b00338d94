"""Graded hints for a ``gui-v0`` task whose group of attempts all failed (``GuiEnv.guidance``), read off the
template's oracle plan (``hidden.plan``: the tool calls that solve it, elements named by role and name).

1. where to go: the app's page or section to open (the links the plan follows) and, when the task is about
   one item of a list, that the item is opened from the list there;
2. the elements to use, in order: buttons to click, the fields and lists of a form to fill in, the key to press,
   the answer-sheet fields to write and ``done()``.

A hint never carries what to type or choose (a plan's ``text`` and ``option``) nor an answer: an element named
with one of the task's secrets (``GuiEnv.secrets``: the answers the instruction does not state) is described
without its name, and a hint that still contains a secret is dropped (``None``).
"""

from __future__ import annotations

from typing import Any

from rubricgym.core.types import Task
from rubricgym.rewards.leaks import Scanner, make_secrets

LEVELS = 2
ITEM = {"mail": "email", "contacts": "contact", "notes": "note", "calendar": "event", "shop": "product"}
"""What one row of each app's list is."""


def _name(name: str) -> str:
    return f"whose name contains “{name[1:]}”" if name.startswith("~") else f"“{name}”"


def _element(step: dict[str, Any], scanner: Scanner) -> str:
    """One plan step as an instruction, without the text to type or the option to choose."""
    tool, role, name = step.get("tool"), str(step.get("role", "")), str(step.get("name", ""))
    if name and scanner.find(name):  # the element is named with an answer: say which kind of element only
        return f"{'click' if tool == 'click' else 'use'} the {role} that holds what the task asks for"
    if tool == "click":
        return f"click the {role} {_name(name)}"
    if tool == "fill":
        return f"fill in the {role} {_name(name)} (with what the task says)"
    if tool == "select":
        return f"choose the option the task asks for in the list {_name(name)}"
    if tool == "press":
        return f"press {step.get('key')}"
    if tool == "answer":
        fields = ", ".join(f"'{f}': ..." for f in step.get("fields", {}))
        return f"write what you found with answer({{{fields}}})"
    if tool == "done":
        return "call done()"
    return f"use {tool}"


def hint_parts(task: Task, scanner: Scanner) -> list[str | None]:
    """The new text of each level (``None``: nothing to say at that level for this task)."""
    plan: list[dict[str, Any]] = list(task.hidden.get("plan") or [])
    if not plan:
        return [None] * LEVELS
    app = str(task.params.get("app", ""))
    where = f"in the {app.capitalize()} app" if app else "in the app"
    is_link = [s.get("tool") == "click" and s.get("role") == "link" for s in plan]
    lead = next((i for i, link in enumerate(is_link) if not link), len(plan))
    pages = [_element(s, scanner).removeprefix("click the link ") for s in plan]
    first, later = pages[:lead], [p for p, link in zip(pages[lead:], is_link[lead:], strict=True) if link]
    if first:
        text = f"{where[0].upper()}{where[1:]}, go to the page of the link {' and then '.join(first)}."
    else:
        text = f"{where[0].upper()}{where[1:]}, start on the first page{'' if later else ' (no other page is needed)'}."
    step = plan[lead] if lead < len(plan) else {}
    if step.get("tool") == "click" and str(step.get("name", "")).startswith("~") and app in ITEM:
        text += f" Open the {ITEM[app]} you need from the list there."
    if later:
        text += f" Later you will need the page of the link {' and then '.join(later)}."
    level1 = text
    level2 = "The elements to use, in order: " + "; ".join(_element(s, scanner) for s in plan) + "."
    return [level1, level2]


def guidance(task: Task, level: int, secrets: list[tuple[str, Any]]) -> str | None:
    """The hint at ``level``: the parts of levels 1..``level`` (``None`` when that level has no part of its own)."""
    if not 1 <= level <= LEVELS:
        return None
    scanner = Scanner(make_secrets(secrets))
    parts = [p if p and not scanner.find(p) else None for p in hint_parts(task, scanner)]
    if parts[level - 1] is None:
        return None
    return " ".join(p for p in parts[:level] if p)
