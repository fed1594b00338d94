"""``EpisodeViews``: what a ``RubricEnv`` shows of its current episode, read-only (a base of ``RubricEnv``).

The env keeps its episode as step records (``core.record``); these views build the typed objects from them on
demand: the ``Outcome`` once the episode ends, the ``Step`` list, the chat, the ``State`` and the ``Trajectory``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rubricgym.core.record import StepRecord
from rubricgym.core.types import Message, Outcome, State, Step, Task, Trajectory


class EpisodeViews:
    """The episode as ``Outcome``, ``Step`` list, chat, ``State`` and ``Trajectory`` (``RubricEnv`` sets the state)."""

    env_id: str
    max_steps: int
    _records: list[StepRecord]
    _outcome: Outcome | None
    _done: bool
    _task: Task | None
    _seed: int | None
    _stage: str | None
    _env_key: str
    _episodes: int
    _head: Callable[[], list[Message]]

    @property
    def outcome(self) -> Outcome:
        """How the episode ended (an empty ``Outcome`` while it runs)."""
        if self._outcome is not None:
            return self._outcome
        if not self._done:  # built here, not per reset: most episodes are never asked before they end
            self._outcome = Outcome()
            return self._outcome
        last = self._records[-1]
        self._outcome = Outcome(
            answer=last.out.answer,
            reward=last.out.reward,
            terminated=last.out.done,
            truncated=last.truncated,
            summary=self.summary(),
            solved=last.out.solved,
        )
        return self._outcome

    @property
    def steps(self) -> list[Step]:
        """The steps of the current episode so far."""
        return [r.materialise()[0] for r in self._records]

    def last_step(self) -> tuple[Step, list[Message]]:
        """The episode's latest step and its two messages (the assistant's and the reply), without building the
        whole history as ``steps`` and ``messages`` do (a server reads this after every step)."""
        if not self._records:
            raise ValueError("last_step() needs a step: call step() after reset()")
        step, assistant, reply = self._records[-1].materialise()
        return step, [assistant, reply]

    @property
    def messages(self) -> list[Message]:
        """The whole chat of the current episode: system, task, then assistant/reply pairs."""
        out = self._head()
        for r in self._records:
            out += r.materialise()[1:]
        return out

    def state(self) -> State:
        """Where the episode stands; ``extras`` holds ``summary()`` once the episode is over, never before (a
        running summary such as goal progress would tell the agent which guess is right)."""
        return State(
            episode_id=f"{self._env_key}-{self._episodes}" if self._episodes else None,
            env_id=self.env_id,
            task_id=self._task.id if self._task else None,
            step_count=len(self._records),
            stage=self._stage,
            done=self._done,
            max_steps=self.max_steps,
            extras=self.summary() if self._task and self._done else {},
        )

    def summary(self) -> dict[str, Any]:
        """Env-specific final-state summary recorded in ``Outcome.summary`` (JSON-serialisable)."""
        return {}

    def trajectory(self, **fields: Any) -> Trajectory:
        """The episode so far as a ``Trajectory`` (``fields`` set agent, model, seed, versions...)."""
        if self._task is None:
            raise RuntimeError("no episode: call reset() first")
        fields.setdefault("seed", self._seed)
        return Trajectory(task=self._task, messages=self.messages, steps=self.steps, outcome=self.outcome, **fields)
