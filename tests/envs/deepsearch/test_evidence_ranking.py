"""Deep search rewards rise only with the work (#39): an answer with no evidence path never outranks one with it.

At equal correctness: (a) a right answer with no search at all, (b) the same answer after reading the gold pages
without citing them, (d) the same answer cited from the pages read; and (c) a wrong answer after the whole reading.
Required: (d) > (b) > (a) > (c), by the env's reward and by the rubric total the process reward model gives.
Before the fix (measured): on generated tasks (a) and (b) tied at 0.70; on a real-corpus question without
statements they tied at 0.85, since a bare answer got the derived chain's citation-integrity row for free (and
(b) with an uncited fact sentence fell to 0.80, below (a)). After it: 0.70 < 0.85 (the evidence seen) < 1.0.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from rubricgym.core.agent import Agent, TaskAgent, tool_call
from rubricgym.core.registry import make
from rubricgym.core.rollout import rollout
from rubricgym.core.types import Message, Task, ToolSpec, Trajectory
from rubricgym.envs.deepsearch import DeepSearchEnv
from rubricgym.envs.deepsearch.agents import MisreadOracle, OracleAgent, UncitedOracle
from rubricgym.rewards import CheckJudge, ProcessRewardModel


class BareAnswer(TaskAgent):
    """The right answer at once: no search, no page read, no citation (a model that memorised it)."""

    name = "bare"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        return tool_call("answer", text=f"Answer: {self.episode_task().hidden['answer']}")


AGENTS: dict[str, Callable[..., Agent]] = {
    "a_bare": BareAnswer,
    "b_read_uncited": UncitedOracle,
    "c_wrong_after_reading": MisreadOracle,
}


def scores(task: Task, **env_kwargs: str) -> dict[str, tuple[float, float]]:
    """(env reward, rubric total) of each agent on ``task``, the total from the task's rubric (else the default)."""
    rubric = task.rubric or DeepSearchEnv.default_rubric()
    prm = ProcessRewardModel(rubric, [CheckJudge(DeepSearchEnv.checks())])
    out = {}
    players: dict[str, Callable[..., Agent]] = {**AGENTS, "d_oracle": OracleAgent}
    for name, cls in players.items():
        traj: Trajectory = asyncio.run(rollout(make("deepsearch-v0", **env_kwargs), cls(seed=0), task, seed=0))
        breakdown = asyncio.run(prm.score(traj))
        assert breakdown.total is not None and breakdown.n_errors == 0
        out[name] = (traj.outcome.reward, breakdown.total)
    return out


def assert_ranked(s: dict[str, tuple[float, float]]) -> None:
    for k in (0, 1):  # the env's reward and the rubric's total agree, and rank the same way
        d, b, a, c = (s[n][k] for n in ("d_oracle", "b_read_uncited", "a_bare", "c_wrong_after_reading"))
        assert d > b > a > c, s
    assert all(r == pytest.approx(t) for r, t in s.values()), s
    assert s["d_oracle"][0] == 1.0 and s["c_wrong_after_reading"][0] == 0.0  # only the oracle solves it


def test_reading_the_evidence_outranks_a_bare_right_answer_on_generated_tasks(ds_tasks):
    for task in ds_tasks[::2]:  # one task of each difficulty
        assert_ranked(scores(task))


def test_reading_the_evidence_outranks_a_bare_right_answer_without_statements(real_corpus, tmp_path: Path):
    folder, _ = real_corpus
    questions = tmp_path / "bare.jsonl"
    question = {"id": "q-bare", "question": "Which poet was born in Brook?", "answer": "Ada Vell"}
    questions.write_text(json.dumps({**question, "gold_docs": ["people/ada_vell.md"]}) + "\n", encoding="utf-8")
    kw = {"corpus": str(folder), "questions": str(questions)}
    task = make("deepsearch-v0", **kw).task_set(1, seed=0)[0]
    assert not task.hidden.get("statements") and task.rubric is None  # the chain is derived from the answer
    s = scores(task, **kw)
    assert_ranked(s)
    assert s["a_bare"][0] == pytest.approx(0.7) and s["b_read_uncited"][0] == pytest.approx(0.85)
