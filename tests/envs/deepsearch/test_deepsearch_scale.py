"""Large worlds (slow): a 100,000-page world builds, indexes and answers searches; oracle episodes at 20,000."""

from __future__ import annotations

import asyncio

import pytest

from rubricgym.core.registry import make
from rubricgym.core.rollout import rollout
from rubricgym.envs.deepsearch import DeepSearchEnv
from rubricgym.envs.deepsearch.agents import AGENTS
from rubricgym.envs.deepsearch.index import SearchIndex
from rubricgym.envs.deepsearch.render import render_world
from rubricgym.envs.deepsearch.world import generate_world


@pytest.mark.slow
def test_hundred_thousand_page_world_is_searchable(tmp_path):
    corpus = render_world(generate_world(0, 100_000))
    assert len(corpus) == 100_000
    index = SearchIndex.open_or_build(corpus, tmp_path)
    for doc in corpus.docs[::20_000]:
        assert doc.id in [corpus.docs[h.doc].id for h in index.search(doc.title, k=5)]


@pytest.mark.slow
@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_oracle_solves_questions_in_a_large_world(difficulty):
    env = DeepSearchEnv(n_docs=20_000, difficulty=difficulty)
    checks = DeepSearchEnv.checks()
    for task in env.task_set(3, seed=1):
        oracle = asyncio.run(rollout(make("deepsearch-v0", n_docs=20_000), AGENTS["oracle"](), task, seed=0))
        lucky = asyncio.run(rollout(make("deepsearch-v0", n_docs=20_000), AGENTS["shortcut-lucky"](), task, seed=0))
        assert oracle.outcome.reward == 1.0, checks["carr_rubric"](oracle).details
        assert lucky.outcome.reward < oracle.outcome.reward
