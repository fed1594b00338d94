"""Shared fixtures: a real vLLM server for the slow tests, the exported local model, temp cache dirs.

A test that needs a system dependency (the bwrap sandbox, podman, the vLLM venv) calls ``missing_dependency``
when it is absent, or carries ``@pytest.mark.sandbox``: outside CI it is skipped with the reason; under
``CI=true`` it fails loudly, so CI can never pass by skipping what it was meant to test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from rubricgym.agents.serve import VLLMServer, find_vllm_python
from tests.tree_guard import pytest_sessionfinish, pytest_sessionstart  # noqa: F401 (the run must leave the tree clean)


def in_ci() -> bool:
    """Whether the tests run under CI (``CI=true``, as CI services set it)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def missing_dependency(reason: str) -> NoReturn:
    """Skip the current test because a system dependency is missing; fail it instead under ``CI=true``."""
    if in_ci():
        pytest.fail(
            f"CI=true and a system dependency is missing: {reason} (scripts/apt-deps.sh installs it)", pytrace=False
        )
    pytest.skip(reason)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sandbox: needs the bwrap sandbox (skipped where missing; fails under CI=true)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("sandbox") is not None:
        from rubricgym.envs.swe.sandbox import BwrapBackend

        reason = BwrapBackend.unavailable_reason()
        if reason:
            missing_dependency(f"bwrap backend unavailable: {reason}")


@pytest.fixture(scope="session")
def local_model_dir() -> Path:
    """SmolLM2-135M-Instruct exported to safetensors (once per cache dir)."""
    from rubricgym.agents.models import model_path

    try:
        return model_path("smollm2-135m-instruct")
    except FileNotFoundError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, local_model_dir: Path) -> Path:
    """A tiny randomly initialised Llama with SmolLM2's tokenizer: exercises model mechanics in seconds."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    out = tmp_path_factory.mktemp("tiny-llama")
    tok = AutoTokenizer.from_pretrained(local_model_dir)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def vllm_server(local_model_dir: Path) -> Iterator[VLLMServer]:
    """A real vLLM OpenAI-compatible server for SmolLM2 on loopback (``.base_url``, ``.model``)."""
    if find_vllm_python() is None:
        missing_dependency("no vLLM venv: run `make vllm` (`make test` builds it)")
    server = VLLMServer("smollm2-135m-instruct")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def vllm_server_to_stop(vllm_server: VLLMServer) -> VLLMServer:
    """The session's vLLM server, handed to a test that stops it mid-run (rather than starting a second server,
    ~40 s here). Such tests run after every other test that uses ``vllm_server`` (``pytest_collection_modifyitems``);
    a server an earlier one stopped is started again."""
    if vllm_server.process is None or vllm_server.process.poll() is not None:
        vllm_server.start()
    return vllm_server


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the tests that need the vLLM server last, and those that stop it after all of them.

    The session-scoped server starts with the first of them and stops at the end; vLLM's CPU worker keeps cores
    busy while it is up, which would slow every torch test that ran beside it (OpenMP threads spin when cores
    are shared).
    """

    def key(item: pytest.Item) -> tuple[bool, bool]:
        names = getattr(item, "fixturenames", ())
        return "vllm_server" in names, "vllm_server_to_stop" in names

    items.sort(key=key)
