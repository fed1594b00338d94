"""verifiers (0.4, ``verifiers.v1``) taskset over any rubricgym env: ``vf-eval rubricgym_verifiers``.

verifiers finds a taskset as a top-level module whose ``__all__`` exports one ``Taskset`` (and here one ``Env`` and
one ``Harness``), so this module ships beside the ``rubricgym`` package. Each task is one seeded episode of
``--env.taskset.env`` (a registered id or a served env's ``ws://`` URL); the env speaks first (system prompt +
task), every model reply is one env step, and the episode is scored with the env's rubric (or
``--env.taskset.rubric FILE``) through rubricgym's process reward model: the ``rubric`` reward (left out when a
verdict errored, never a 0) plus the env's own reward as a zero-weight ``env_reward``. The harness runs in-process
and sends each turn through verifiers' interception endpoint, so any OpenAI-compatible server works (``rubricgym
model serve``) and nothing is installed at run time; the agent seat's runtime defaults to a local subprocess.

    vf-eval rubricgym_verifiers --env.taskset.env toy-calculator-v0 -m smollm2-135m-instruct \\
        --client.base-url http://127.0.0.1:8000/v1 --client.api-key-var KEY --no-push -n 4 -r 1
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf
from openai import AsyncOpenAI
from verifiers.v1.dialects.chat import message_to_wire

from rubricgym.core.registry import make
from rubricgym.core.types import Task
from rubricgym.rewards.prm import ProcessRewardModel
from rubricgym.rewards.rubric import load_rubric


class RubricGymConfig(vf.TasksetConfig):
    """``--env.taskset.*``: which env, how many tasks from which seed and split, and an optional rubric file."""

    env: str = "toy-calculator-v0"
    n: int = 10
    seed: int = 0
    split: str = "train"
    rubric: str | None = None


class RubricGymData(vf.TaskData):
    """One episode: the env, the rubricgym task (with its hidden fields) and the reset seed."""

    env: str
    seed: int
    task: dict[str, Any]


class RubricGymTask(vf.Task[RubricGymData, vf.State, vf.TaskConfig]):
    """Scoring happens in ``RubricGymEnv.run``, where the episode record is at hand."""


class RubricGymTaskset(vf.Taskset[RubricGymTask, RubricGymConfig]):
    def load(self) -> Iterator[RubricGymTask]:
        c = self.config
        env = make(c.env)
        try:
            tasks = env.task_set(c.n, seed=c.seed, split=c.split)
        finally:
            env.close()
        for i, task in enumerate(tasks):
            data = RubricGymData(
                id=task.id, name=task.id, prompt=None, env=c.env, seed=c.seed + i, task=task.model_dump(mode="json")
            )
            yield RubricGymTask(data, c.task)


class RubricGymEnvConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class RubricGymEnv(vf.Env[RubricGymEnvConfig]):
    """Plays the rubricgym env as the user of the exchange and scores the finished episode."""

    async def run(self, task: RubricGymTask, agents: Any) -> None:
        data = task.data
        env = make(data.env)
        try:
            obs = env.reset_typed(seed=data.seed, task=Task.model_validate(data.task))
            async with agents.agent.interaction(task) as interaction:
                segment = await interaction.turn(obs.text)
                while not segment.terminated:
                    obs = await env.astep_typed(segment.last_reply or "")
                    if obs.done or obs.truncated:
                        break
                    segment = await interaction.turn(obs.text)
                await self._score(env.trajectory(agent="verifiers"), interaction.trace)
        finally:
            env.close()

    async def _score(self, trajectory: Any, trace: Any) -> None:
        rubric_file = self.config.taskset.rubric
        spec_rubric = trajectory.task.rubric or type(make(self.config.taskset.env)).default_rubric()
        prm = ProcessRewardModel(load_rubric(rubric_file or spec_rubric))
        breakdown = await prm.score(trajectory)
        if breakdown.valid:
            trace.record_reward("rubric", float(breakdown.total), 1.0)
        trace.record_reward("env_reward", float(trajectory.outcome.reward), 0.0)
        trace.info["rubricgym"] = {
            "steps": len(trajectory.steps),
            "rubric_errors": breakdown.n_errors,
            "per_criterion": breakdown.per_criterion,
            "answer": trajectory.outcome.answer,
        }


class RubricGymHarnessConfig(vf.HarnessConfig):
    pass


class RubricGymHarness(vf.Harness[RubricGymHarnessConfig]):
    """An in-process chat loop: one model call per turn, through verifiers' interception endpoint."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: Any,
        trace: Any,
        runtime: Any,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
        **_: Any,
    ) -> vf.ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt:
            messages += [message_to_wire(m) for m in prompt]
        async with AsyncOpenAI(base_url=endpoint, api_key=secret) as client:
            reply = await client.chat.completions.create(model=ctx.model, messages=messages)  # type: ignore[arg-type]
        return vf.ProgramResult(exit_code=0, stdout=reply.choices[0].message.content or "", stderr="")


__all__ = ["RubricGymEnv", "RubricGymHarness", "RubricGymTaskset"]
