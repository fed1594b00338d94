"""An env whose tool is ``async def`` is served as an async env: the server awaits ``astep_typed`` on its loop."""

from __future__ import annotations

import asyncio
import threading

from rubricgym import ToolOutput, tool
from rubricgym.envs.toy.calculator import CalculatorEnv
from rubricgym.server.worker import is_async

from .conftest import call, open_ws

CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "2 + 2"}}</tool_call>'


class AsyncCalculator(CalculatorEnv):
    """The calculator with an async tool that notes the thread it ran on."""

    threads: list[str] = []

    @tool(examples={"expression": "17 * 23 - 4"})
    async def calculator(self, expression: str) -> ToolOutput:
        """Evaluate an arithmetic expression.

        Args:
            expression: e.g. '17 * 23 - 4'
        """
        await asyncio.sleep(0)
        self.threads.append(threading.current_thread().name)
        return super().calculator(expression)


def test_an_async_tool_env_is_stepped_on_the_servers_loop(serve):
    assert is_async(AsyncCalculator) and not is_async(CalculatorEnv)
    server = serve(factory=AsyncCalculator)
    with open_ws(server) as ws:
        assert call(ws, "reset", {"seed": 0})["type"] == "observation"
        reply = call(ws, "step", {"text": CALL})
    assert reply["data"]["observation"]["text"] == "4"
    assert AsyncCalculator.threads == ["rubricgym-server"]  # awaited on the server's loop, not on an env thread
