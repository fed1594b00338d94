"""Shared fixtures: a real vLLM server for the slow tests, the exported local model, temp cache dirs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from rubricgym.agents.serve import VLLMServer, find_vllm_python


@pytest.fixture(scope="session")
def local_model_dir() -> Path:
    """SmolLM2-135M-Instruct exported to safetensors (once per cache dir)."""
    from rubricgym.agents.models import model_path

    try:
        return model_path("smollm2-135m-instruct")
    except FileNotFoundError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def vllm_server(local_model_dir: Path) -> Iterator[VLLMServer]:
    """A real vLLM OpenAI-compatible server for SmolLM2 on loopback (``.base_url``, ``.model``)."""
    if find_vllm_python() is None:
        if os.environ.get("CI"):
            pytest.fail("CI must have the vLLM venv: `make test` builds it with `make vllm`")
        pytest.skip("no vLLM venv: run `make vllm`")
    server = VLLMServer("smollm2-135m-instruct")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the tests that need the vLLM server last.

    The session-scoped server starts with the first of them and stops at the end; vLLM's CPU worker keeps cores
    busy while it is up, which would slow every torch test that ran beside it (OpenMP threads spin when cores
    are shared).
    """
    items.sort(key=lambda item: "vllm_server" in getattr(item, "fixturenames", ()))
