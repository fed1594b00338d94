"""``async def`` tools: awaited by ``astep_typed``, run to completion by the synchronous ``step``, on the env's loop;
a plain ``def`` tool that returns a coroutine is the env author's bug, a ``TypeError`` naming the tool."""

from __future__ import annotations

import asyncio
import threading
import warnings

import pytest

import rubricgym
from rubricgym import ToolOutput, tool
from rubricgym.core.aio import arun_on, run_on
from rubricgym.core.env import RubricEnv
from rubricgym.envs.toy.calculator import CalculatorEnv

CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "6 * 7"}}</tool_call>'


class AsyncCalc(CalculatorEnv):
    """The calculator whose ``calculator`` tool is async and notes the thread it ran on."""

    ran_on: list[str]

    @tool(examples={"expression": "17 * 23 - 4"})
    async def calculator(self, expression: str) -> ToolOutput:
        """Evaluate an arithmetic expression.

        Args:
            expression: e.g. '17 * 23 - 4'
        """
        await asyncio.sleep(0)
        self.ran_on = [*getattr(self, "ran_on", []), threading.current_thread().name]
        return super().calculator(expression)


class Forgot(CalculatorEnv):
    """A plain ``def`` tool that returns the coroutine of an async helper: it would never run."""

    async def _eval(self, expression: str) -> ToolOutput:
        return super().calculator(expression)

    @tool(examples={"expression": "17 * 23 - 4"})
    def calculator(self, expression: str) -> ToolOutput:
        """Evaluate an arithmetic expression.

        Args:
            expression: e.g. '17 * 23 - 4'
        """
        return self._eval(expression)  # type: ignore[return-value]


def test_the_gymnasium_step_runs_an_async_tool():
    env = AsyncCalc()
    env.reset(seed=0)
    obs, *_ = env.step(CALL)
    assert obs.startswith("42") and "coroutine" not in obs
    assert AsyncCalc.is_async() and not CalculatorEnv.is_async()


async def test_astep_awaits_an_async_tool_on_the_callers_loop_and_step_typed_works_inside_a_loop():
    env = AsyncCalc()
    env.reset_typed(seed=0)
    obs = await env.astep_typed(CALL)
    assert obs.messages[-1].content.startswith("42") and env.ran_on == [threading.current_thread().name]
    obs = env.step_typed(CALL)  # a blocking step inside a running loop still completes (on a worker thread)
    assert obs.messages[-1].content.startswith("42") and env.steps[-1].tool_result == "42"


def test_a_plain_def_returning_a_coroutine_is_a_type_error_naming_the_tool():
    env = Forgot()
    env.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the coroutine is closed, not left to warn "never awaited"
        with pytest.raises(TypeError, match="Forgot's tool 'calculator' returned an un-awaited coroutine"):
            env.step(CALL)


class LoopThread:
    """An event loop running in a thread of its own (as a browser pool's does)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="env-loop", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture
def own_loop():
    lt = LoopThread()
    yield lt
    lt.close()


async def test_async_tools_run_on_the_env_loop_from_both_faces(own_loop):
    class OnItsLoop(AsyncCalc):
        @property
        def tool_loop(self) -> asyncio.AbstractEventLoop | None:
            return own_loop.loop

    env = OnItsLoop()
    env.reset_typed(seed=0)
    await env.astep_typed(CALL)
    await asyncio.to_thread(env.step_typed, CALL)
    assert env.ran_on == ["env-loop", "env-loop"]
    with pytest.raises(RuntimeError, match="would wait for itself"):
        await arun_on(own_loop.loop, _block_on(own_loop.loop))


async def _block_on(loop: asyncio.AbstractEventLoop) -> None:
    """A blocking ``run_on`` from inside ``loop`` itself (a deadlock, refused)."""
    run_on(loop, asyncio.sleep(0))


def test_a_stopped_env_loop_fails_with_what_to_do():
    loop = asyncio.new_event_loop()
    with pytest.raises(RuntimeError, match="not running .* make a new env"):
        run_on(loop, asyncio.sleep(0))
    loop.close()


def test_an_env_that_overrides_step_typed_keeps_it_under_astep():
    class Own(CalculatorEnv):
        def step_typed(self, action):
            self.seen = action
            return super().step_typed(action)

    env = Own()
    env.reset_typed(seed=0)
    asyncio.run(env.astep_typed(CALL))
    assert env.seen == CALL


@pytest.mark.parametrize("env_id", ["swe-v0", "clinical-v0", "gui-v0"])
def test_the_io_envs_step_through_the_core_bridge(env_id):
    """Their tools are async and they keep no step path of their own (no private loop, no pending results)."""
    cls = rubricgym.spec(env_id).load()
    assert cls.is_async() and cls.astep_typed is RubricEnv.astep_typed and cls.step_typed is RubricEnv.step_typed
