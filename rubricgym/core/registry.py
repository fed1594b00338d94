"""The env registry: the one piece of module-level mutable state, behind an explicit API.

``register`` records an ``EnvSpec`` and registers the env with Gymnasium as ``rubricgym/<Name>-v0`` too, so
``gymnasium.make`` works. Third-party packages add envs through the ``rubricgym.envs`` entry-point group: each
entry point names a zero-argument callable that calls ``register`` (or the module that does, on import).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import re
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium

from rubricgym.core.agent import Agent
from rubricgym.core.env import RubricEnv
from rubricgym.core.types import Task

ENTRY_POINT_GROUP = "rubricgym.envs"
_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*-v\d+$")


@dataclass(frozen=True)
class EnvSpec:
    """How to build a registered env."""

    id: str
    entry_point: str | type[RubricEnv]
    kwargs: dict[str, Any] = field(default_factory=dict)
    nondeterministic: bool = False
    description: str = ""
    gym_id: str = ""

    def load(self) -> type[RubricEnv]:
        if not isinstance(self.entry_point, str):
            return self.entry_point
        module, _, attr = self.entry_point.partition(":")
        try:
            cls = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise ImportError(f"env {self.id!r}: cannot load entry point {self.entry_point!r}: {e}") from e
        if not (isinstance(cls, type) and issubclass(cls, RubricEnv)):
            raise TypeError(f"env {self.id!r}: {self.entry_point!r} is not a RubricEnv subclass")
        return cls

    def make(self, **kwargs: Any) -> RubricEnv:
        return self.load()(**{**self.kwargs, **kwargs})


class _Registry:
    def __init__(self) -> None:
        self.specs: dict[str, EnvSpec] = {}
        self.discovered = False
        self.discovering = False  # this thread is loading plugins (a plugin that looks an env up must not recurse)
        self.lock = threading.RLock()  # threads wait for discovery to finish instead of seeing half of it
        self.url_spec: str | None = None
        self.prefixes: dict[str, str] = {}
        self.hints: dict[str, str] = {}
        self.reasons: dict[str, Callable[[str], str | None]] = {}


def register_url_handler(target: str) -> None:
    """Make ``spec``/``make`` resolve ``scheme://...`` ids through ``target`` (``"module:function"`` returning
    an ``EnvSpec``, imported on first use); ``import rubricgym`` registers the env server's ``RemoteEnv``."""
    if ":" not in target:
        raise ValueError(f"the URL handler must be 'module:function', got {target!r}")
    _REGISTRY.url_spec = target


def register_id_prefix(prefix: str, target: str) -> None:
    """Make ``spec``/``make`` resolve ids starting with ``prefix`` (e.g. ``web:``) through ``target``
    (``"module:function"`` taking the whole id and returning an ``EnvSpec``, imported on first use). Such ids need
    no registration: a run records the id, and every later command resolves it again."""
    if ":" not in target:
        raise ValueError(f"the id prefix handler must be 'module:function', got {target!r}")
    if not prefix.endswith(":") or "/" in prefix:
        raise ValueError(f"an id prefix is a word ending in ':' (e.g. 'web:'), got {prefix!r}")
    _REGISTRY.prefixes[prefix] = target


def register_id_hint(prefix: str, hint: str) -> None:
    """Say ``hint`` when an unknown id starts with ``prefix`` (a family whose optional package is missing:
    ``miniwob-`` ids without ``pip install 'rubricgym[miniwob]'``)."""
    _REGISTRY.hints[prefix] = hint


def register_id_reason(prefix: str, reason: Callable[[str], str | None]) -> None:
    """Answer an unregistered id starting with ``prefix`` with ``reason(id)`` (why it is left out, e.g. a MiniWoB++
    page that needs a mouse drag) instead of "unknown env id"; ``reason`` returns ``None`` for ids it does not know."""
    _REGISTRY.reasons[prefix] = reason


def _call(target: str, id: str) -> EnvSpec:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)(id)


_REGISTRY = _Registry()


def _gym_id(env_id: str) -> str:
    base, _, version = env_id.rpartition("-v")
    name = "".join(part.capitalize() for part in re.split(r"[-_.]", base) if part)
    return f"rubricgym/{name}-v{version}"


def register(
    id: str,
    entry_point: str | type[RubricEnv],
    *,
    kwargs: dict[str, Any] | None = None,
    nondeterministic: bool = False,
    description: str = "",
    replace: bool = False,
) -> EnvSpec:
    """Register an env under ``id`` (lower-case, ending in ``-vN``, e.g. ``toy-calculator-v0``).

    ``entry_point`` is a ``RubricEnv`` subclass or ``"module:Class"`` (imported lazily by ``make``). Envs whose
    reward calls a sampled LLM judge must pass ``nondeterministic=True``.
    """
    if not _ID.match(id):
        raise ValueError(f"env id {id!r} must be lower-case words joined by '-' and end in a version, e.g. 'my-env-v0'")
    if id in _REGISTRY.specs and not replace:
        raise ValueError(f"env {id!r} is already registered; pass replace=True to override it")
    spec = EnvSpec(
        id=id,
        entry_point=entry_point,
        kwargs=dict(kwargs or {}),
        nondeterministic=nondeterministic,
        description=description,
        gym_id=_gym_id(id),
    )
    _REGISTRY.specs[id] = spec
    gymnasium.register(
        id=spec.gym_id,
        # a RubricEnv class builds a gymnasium.Env from keyword arguments; gymnasium's EnvCreator protocol asks
        # for a callable taking **any** keyword, which no class with a real signature matches
        entry_point=spec.entry_point,  # type: ignore[arg-type]
        nondeterministic=nondeterministic,
        kwargs=dict(spec.kwargs),
        disable_env_checker=True,
    )
    return spec


def unregister(id: str) -> None:
    """Remove ``id`` (and its Gymnasium twin) from the registry."""
    spec = _REGISTRY.specs.pop(id, None)
    if spec is not None:
        gymnasium.registry.pop(spec.gym_id, None)


def _discover() -> None:
    if _REGISTRY.discovered:
        return
    with _REGISTRY.lock:
        if _REGISTRY.discovered or _REGISTRY.discovering:
            return
        _REGISTRY.discovering = True
        try:
            for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
                _load_plugin(ep)
        finally:
            _REGISTRY.discovered, _REGISTRY.discovering = True, False


def _load_plugin(ep: importlib.metadata.EntryPoint) -> None:
    try:
        loaded = ep.load()
    except Exception as e:  # a broken plugin must not take the registry down; say which one
        warnings.warn(f"rubricgym: could not load env plugin {ep.name!r} ({ep.value}): {e}", stacklevel=3)
        return
    if callable(loaded) and not isinstance(loaded, type):
        try:
            loaded()
        except Exception as e:  # its registration callable failed: every other command must still work
            warnings.warn(
                f"rubricgym: env plugin {ep.name!r} ({ep.value}) failed to register: {type(e).__name__}: {e}",
                stacklevel=3,
            )


def spec(id: str) -> EnvSpec:
    """The ``EnvSpec`` of ``id`` (or of the env served at a ``ws://``/``http://`` URL, or of a ``prefix:`` id such
    as ``web:spec.yaml``); an unknown id raises ``KeyError`` listing close matches."""
    prefix = next((p for p in _REGISTRY.prefixes if id.startswith(p)), None)
    if prefix is not None:
        return _call(_REGISTRY.prefixes[prefix], id)
    if "://" in id:
        if _REGISTRY.url_spec is None:
            raise KeyError(f"{id!r} is a URL but no URL handler is registered (import rubricgym registers one)")
        return _call(_REGISTRY.url_spec, id)
    _discover()
    try:
        return _REGISTRY.specs[id]
    except KeyError:
        for p, reason in _REGISTRY.reasons.items():
            why = reason(id) if id.startswith(p) else None
            if why:
                raise KeyError(f"env id {id!r} is not registered: {why}") from None
        close = difflib.get_close_matches(id, list(_REGISTRY.specs), n=3, cutoff=0.4)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        hint += "".join(f" {h}" for p, h in _REGISTRY.hints.items() if id.startswith(p))
        raise KeyError(f"unknown env id {id!r}.{hint} Run `rubricgym envs` to list registered envs.") from None


def make(id: str, **kwargs: Any) -> RubricEnv:
    """A new instance of env ``id``; ``kwargs`` override the registered ones (e.g. ``max_steps``)."""
    return spec(id).make(**kwargs)


def make_group(id: str, task: Task, n: int, **kwargs: Any) -> list[RubricEnv]:
    """``n`` independent instances of env ``id``, each reset to ``task`` (one GRPO group)."""
    if n < 1:
        raise ValueError(f"group size must be >= 1, got {n}")
    envs = [make(id, **kwargs) for _ in range(n)]
    for env in envs:
        env.reset_typed(task=task)
    return envs


def list_envs() -> list[EnvSpec]:
    """Every registered env, sorted by id."""
    _discover()
    return [_REGISTRY.specs[k] for k in sorted(_REGISTRY.specs)]


def env_agents(id: str) -> dict[str, Callable[..., Agent]]:
    """The named scripted agents env ``id`` provides."""
    return spec(id).load().agents()
