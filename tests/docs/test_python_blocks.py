"""Every ```python block of README.md and of the docs site runs as written (each in a fresh temporary directory).

A block that cannot run on its own (it talks to a server the reader started, reads a run the reader made) says so
with ``<!-- no-run: REASON -->`` on the line above its fence: it is skipped with that reason, and the README may
not use it."""

from __future__ import annotations

import pytest

import rubricgym
from tests.docs.pages import blocks

BLOCKS = blocks("python")
EXAMPLE_ENVS = ("echo-v0", "price-check-v0")
"""Envs the examples register (the env tutorial's); unregistered after each block so the next starts clean."""


def test_the_docs_have_python_examples():
    assert {b.path for b in BLOCKS} >= {"README.md", "docs/getting-started.md", "docs/tutorials/register-env.md"}


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_python_block_runs(block, tmp_path, monkeypatch):
    if block.no_run is not None:
        assert block.no_run, f"{block.id}: a no-run marker must say why the block cannot run on its own"
        assert block.path != "README.md", "every README example runs as written"
        pytest.skip(f"{block.id}: {block.no_run}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path / "cache"))
    namespace: dict = {"__name__": "__docs__"}
    try:
        exec(compile(block.text, block.id, "exec"), namespace)
    finally:
        for env_id in EXAMPLE_ENVS:
            rubricgym.unregister(env_id)
