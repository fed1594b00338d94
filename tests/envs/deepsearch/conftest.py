"""Deep search tests build their indexes under a temporary cache, never in the user's ~/.cache."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _deepsearch_cache(tmp_path_factory: pytest.TempPathFactory):
    old = os.environ.get("RUBRICGYM_CACHE")
    os.environ["RUBRICGYM_CACHE"] = str(tmp_path_factory.mktemp("rubricgym-cache"))
    yield
    if old is None:
        os.environ.pop("RUBRICGYM_CACHE", None)
    else:
        os.environ["RUBRICGYM_CACHE"] = old


@pytest.fixture(scope="session")
def ds_env():
    """The default deep search env (a 500-page world); its world and index are shared through the memo."""
    from rubricgym.core.registry import make

    return make("deepsearch-v0")


@pytest.fixture(scope="session")
def ds_tasks(ds_env):
    """Two tasks of each difficulty from the default world."""
    from rubricgym.envs.deepsearch import DeepSearchEnv

    out = []
    for d in ("easy", "medium", "hard"):
        out += DeepSearchEnv(difficulty=d).task_set(2, seed=7)
    return out
