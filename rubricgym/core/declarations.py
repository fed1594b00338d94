"""``EnvDeclarations``: what an env declares beside its episodes, for rewards, agents, the leak audit and guidance.

A base of ``RubricEnv``: the class attributes an env sets (its named checks, default rubric, scripted, shortcut
and outcome-audit agents, which ``info`` keys the agent sees, its typed step records, what of ``Task.hidden`` is
secret, discoverable or hintable, its hint levels) and the methods that read them. Nothing here runs an episode.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from rubricgym.core.agent import Agent
from rubricgym.core.checks import NamedCheck
from rubricgym.core.leaves import leaves
from rubricgym.core.rubric import Rubric
from rubricgym.core.steprecord import StepRecords
from rubricgym.core.types import Task

OUTCOME_ROLES = ("partial", "failed", "activity")
"""The roles an env's ``outcome_agents`` may fill (see ``EnvDeclarations.outcome_agents``)."""


class EnvDeclarations:
    """The declarations of a ``RubricEnv`` (see the module doc); an env sets the attributes on its class."""

    env_id: str
    check_set: ClassVar[Mapping[str, NamedCheck]] = {}
    """The named programmatic checks rubric criteria may reference (usually a checks module's ``ALL``)."""
    rubric_file: ClassVar[str | Path | None] = None
    """The default rubric as a YAML file, usually next to the env's checks."""
    held_out_splits: ClassVar[tuple[str, ...]] = ("test",)
    """The splits besides ``train`` that ``task_set`` serves, the main one first: the family demos evaluate on
    each, and the shortcut battery probes each (a constant that answers only one held-out split still pays there).
    An env refusing one for its arguments (a ``ValueError`` from ``task_set``) is not probed on it."""
    scripted_agents: ClassVar[Mapping[str, str]] = {}
    """Scripted agents by name, as ``"module:Class"`` strings imported on first use."""
    shortcut_agents: ClassVar[Mapping[str, str]] = {}
    """The env's own agents for the shortcut battery, by probe (``info_reader``, ``shotgun``, ``wrong_submit``,
    ``escape``), as ``"module:Class"``; the battery's generic agents play the probes an env does not name."""
    outcome_agents: ClassVar[Mapping[str, str]] = {}
    """Extra scripted agents for the outcome-consistency audit (``rewards.consistency``), by role, as
    ``"module:Class"``: ``partial`` (real work, partly right: a careful work-up with a near-miss answer),
    ``failed`` (completes the protocol with a wrong outcome), ``activity`` (calls tools, achieves nothing; it
    replaces the audit's generic activity probe). The audit plays them beside ``scripted_agents`` to check that
    no failed episode's rubric total exceeds a solved one's."""
    public_info_keys: ClassVar[frozenset[str]] = frozenset()
    """Keys of a step's ``ToolOutput.info`` an agent may see (the Gymnasium ``info["details"]`` and the server's
    step ``details``). Every other key of ``Step.info`` is the private record that only checks and judges read."""
    step_records: ClassVar[StepRecords | None] = None
    """The typed record each tool writes in ``Step.info`` (``core.steprecord``): checks read ``RECORDS.of(step)``,
    so a renamed key is an error verdict, never a quietly unmet check."""
    discoverable: ClassVar[Mapping[str, frozenset[str]]] = {}
    """Top-level ``Task.hidden`` fields the agent may legitimately find, each with the tools whose output may show
    it (``"*"``: any tool), e.g. a deep-search answer on a page the agent opened. The leak audit exempts these
    there and nowhere else (never in ids, ``info``, ``state()`` or the first observation)."""
    guidance_levels: ClassVar[int] = 0
    """How many graded hint levels ``guidance`` gives (0: none; the trainer then falls back to rubric criteria)."""
    hintable: ClassVar[frozenset[str]] = frozenset()
    """Top-level ``Task.hidden`` fields ``guidance`` may name (SWE: the failing tests and the files to edit): still
    secrets everywhere else (ids, observations, ``info``, ``state()``), and never the answer itself."""

    def guidance(self, task: Task, level: int) -> str | None:
        """A hint for ``task`` at ``level`` (1 = the least help .. ``guidance_levels``), or ``None`` for none.

        The trainer shows it to a policy whose group of attempts at ``task`` all failed (``guidance:`` in the
        training config). It is agent-visible: it may narrow the search (a specialty to consider, the page to
        open, the failing test), never state an answer; the leak audit scans every level for ``secrets(task)``.
        """
        return None

    @classmethod
    def checks(cls) -> Mapping[str, NamedCheck]:
        """The env's named programmatic checks (``check_set``), for rubric criteria to reference by name."""
        return cls.check_set

    @classmethod
    def default_rubric(cls) -> Rubric:
        """The env's default rubric, validated: ``rubric_file`` (YAML, JSON or TOML; a bad file raises a
        ``RubricError`` naming the file, criterion and field) or an empty rubric."""
        if cls.rubric_file is None:
            return Rubric(id=cls.env_id or cls.__name__, version="1", criteria=[])
        return _load_rubric(Path(cls.rubric_file)).model_copy(deep=True)

    @classmethod
    def secrets(cls, task: Task) -> list[tuple[str, Any]]:
        """The values of ``task.hidden`` that must never reach the agent side, as ``(path, value)`` pairs; the
        leak audit scans every channel for them. Default: every leaf of ``hidden``. An env narrows it to what
        is secret (an answer, a key-exam list) and leaves out what it shows on purpose (the question's text)."""
        return list(leaves(task.hidden))

    @classmethod
    def public_text(cls, task: Task) -> Iterable[str]:
        """Text the agent may read for ``task`` anyway, so a value of ``secrets(task)`` found in it is no secret
        (the leak audit leaves it out): SWE's problem statement and the repository at its base commit, where a
        line of the fix or an expected output may already stand. Default: none."""
        return ()

    @classmethod
    def agents(cls) -> dict[str, Callable[..., Agent]]:
        """Named scripted agents (oracle, random, ...) that ``rubricgym run --agent NAME`` finds."""
        return {
            name: _import(target, f"{cls.__name__}.scripted_agents[{name!r}]")
            for name, target in cls.scripted_agents.items()
        }

    @classmethod
    def outcome_roles(cls) -> dict[str, Callable[..., Agent]]:
        """The env's outcome-consistency agents (``outcome_agents``) by role, imported; an unknown role raises."""
        unknown = sorted(set(cls.outcome_agents) - set(OUTCOME_ROLES))
        if unknown:
            raise ValueError(
                f"{cls.__name__}.outcome_agents has unknown role(s) {unknown}: use {list(OUTCOME_ROLES)} (an agent "
                f"that solves the task belongs in scripted_agents)"
            )
        return {
            role: _import(target, f"{cls.__name__}.outcome_agents[{role!r}]")
            for role, target in cls.outcome_agents.items()
        }

    @classmethod
    def shortcuts(cls) -> dict[str, Callable[..., Agent]]:
        """The env's own shortcut-battery agents (``shortcut_agents``), imported."""
        return {
            name: _import(target, f"{cls.__name__}.shortcut_agents[{name!r}]")
            for name, target in cls.shortcut_agents.items()
        }


@functools.cache
def _load_rubric(path: Path) -> Rubric:
    return Rubric.load(path)


def _import(target: str, where: str) -> Any:
    module, _, attr = target.partition(":")
    if not attr:
        raise ValueError(f"{where} must be 'module:Class', got {target!r}")
    return getattr(importlib.import_module(module), attr)
