"""A multi-turn verifiers (v1) env: its own ``Env.run`` answers each guess with a hint (its env response) until
the guess is right or four guesses are spent — a test data module (``verifiers:rg_vf_guess``)."""

from __future__ import annotations

from collections.abc import Iterator

import verifiers.v1 as vf

SECRETS = [107, 113, 118]


class GuessData(vf.TaskData):
    answer: str


class GuessTask(vf.Task[GuessData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=1.0)
    async def found(self, task: GuessData, trace: vf.Trace) -> float:
        return float(trace.last_reply.strip() == task.answer)


class GuessTaskset(vf.Taskset[GuessTask, vf.TasksetConfig]):
    def load(self) -> Iterator[GuessTask]:
        for secret in SECRETS:
            prompt = "I picked a whole number from 100 to 120. Guess it: reply with the number alone."
            yield GuessTask(GuessData(prompt=prompt, answer=str(secret)), self.config.task)


class GuessConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class GuessEnv(vf.Env[GuessConfig]):
    async def run(self, task: GuessTask, agents: vf.Agents) -> None:
        secret = int(task.data.answer)
        async with agents.agent.interaction(task) as game:
            segment = await game.turn()
            guesses = 1
            while segment.last_reply != str(secret) and guesses < 4:
                reply = segment.last_reply
                hint = "higher" if reply.isdigit() and int(reply) < secret else "lower"
                segment = await game.turn(f"No. Go {hint}.")
                if segment.terminated:
                    break
                guesses += 1
            game.trace.record_metric("guesses", guesses)


__all__ = ["GuessEnv", "GuessTaskset"]
