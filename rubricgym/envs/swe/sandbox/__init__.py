"""Sandboxes for the software-engineering env: the async interface and its ``bwrap`` and ``docker`` backends."""

from __future__ import annotations

from rubricgym.envs.swe.sandbox.base import (
    WORKDIR,
    ExecResult,
    Limits,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxPathError,
)
from rubricgym.envs.swe.sandbox.bwrap_backend import BwrapBackend
from rubricgym.envs.swe.sandbox.docker import DockerBackend

BACKENDS: dict[str, type[SandboxBackend]] = {"bwrap": BwrapBackend, "docker": DockerBackend}


def get_backend(name: str = "bwrap", **kwargs: object) -> SandboxBackend:
    """A backend by name (``bwrap`` or ``docker``); ``kwargs`` go to its constructor."""
    try:
        cls = BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown sandbox backend {name!r}; use one of {sorted(BACKENDS)}") from None
    return cls(**kwargs)


__all__ = [
    "BACKENDS",
    "WORKDIR",
    "BwrapBackend",
    "DockerBackend",
    "ExecResult",
    "Limits",
    "Sandbox",
    "SandboxBackend",
    "SandboxError",
    "SandboxPathError",
    "get_backend",
]
