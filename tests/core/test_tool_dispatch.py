"""Which method a step runs (``core.dispatch``'s rule): the synchronous step runs every call through ``call_tool``;
``astep_typed`` awaits an ``async def`` tool's call through ``acall_tool`` and runs any other call through
``call_tool``; each base hands the other kind to the other method. So a ``call_tool`` override wraps plain ``def``
tools (and tools served without ``@tool``) under both faces, an ``acall_tool`` override wraps ``async def`` tools
under both faces, and every wrap runs exactly once per call."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from rubricgym import RubricEnv, Task, ToolOutput, tool
from rubricgym.core.types import ToolCall, ToolSpec


def call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


class Mixed(RubricEnv):
    """A plain ``def`` tool and an ``async def`` one, noting the thread each ran on."""

    env_id, stages = "dispatch-test-v0", ("act",)
    default_max_steps = 50

    def __init__(self, **kw):
        super().__init__(**kw)
        self.wrapped: list[str] = []
        self.threads: list[str] = []

    def sample_task(self, rng, split="train"):
        return Task(id="dispatch-0", env_id=self.env_id, prompt="Call tools.")

    @tool
    def upper(self, text: str) -> str:
        """Upper-case text."""
        self.threads.append(threading.current_thread().name)
        return text.upper()

    @tool
    async def later(self, text: str) -> str:
        """Return text after yielding to the loop once."""
        await asyncio.sleep(0)
        self.threads.append(threading.current_thread().name)
        return f"later {text}"


class WrapsCallTool(Mixed):
    def call_tool(self, c: ToolCall) -> ToolOutput:
        self.wrapped.append(f"call_tool {c.name}")
        return super().call_tool(c)


class WrapsACallTool(Mixed):
    async def acall_tool(self, c: ToolCall) -> ToolOutput:
        self.wrapped.append(f"acall_tool {c.name}")
        out = await super().acall_tool(c)
        out.text += " (checked)"
        return out


def _play(env: RubricEnv, face: str, actions: list[str]) -> list[str]:
    """The replies to ``actions`` through ``face``: ``step``, ``step_typed`` or ``astep_typed`` (on a fresh loop)."""
    env.reset(seed=0)
    if face == "step":
        return [env.step(a)[0] for a in actions]
    if face == "step_typed":
        return [env.step_typed(a).messages[-1].content for a in actions]

    async def play() -> list[str]:
        return [(await env.astep_typed(a)).messages[-1].content for a in actions]

    return asyncio.run(play())


ACTIONS = [call("upper", text="a"), call("later", text="b"), "no call", call("upper", text=3)]
FACES = ["step", "step_typed", "astep_typed"]


@pytest.mark.parametrize("face", FACES)
def test_both_kinds_of_tool_run_under_every_face_with_the_same_replies(face):
    env = Mixed()
    replies = _play(env, face, ACTIONS)
    assert replies[:2] == ["A", "later b"]
    assert replies[2].startswith("Invalid action: no tool call found")
    assert "argument 'text' of tool 'upper' must be string" in replies[3]
    assert [s.tool_result for s in env.steps] == ["A", "later b", None, None]


@pytest.mark.parametrize("face", FACES)
def test_a_call_tool_override_wraps_each_plain_tool_call_once_under_every_face(face):
    env = WrapsCallTool()
    _play(env, face, ACTIONS)
    plain = [w for w in env.wrapped if w.endswith("upper")]
    assert plain == ["call_tool upper"]  # once, and never for the malformed actions
    # the synchronous step runs the async tool through call_tool too; astep_typed awaits it through acall_tool
    assert env.wrapped.count("call_tool later") == (0 if face == "astep_typed" else 1)


@pytest.mark.parametrize("face", FACES)
def test_an_acall_tool_override_wraps_each_async_tool_call_once_under_every_face(face):
    env = WrapsACallTool()
    replies = _play(env, face, ACTIONS)
    assert env.wrapped == ["acall_tool later"]  # the plain tool goes through call_tool, the malformed nowhere
    assert replies[:2] == ["A", "later b (checked)"]
    assert env.steps[1].tool_result == "later b (checked)"


async def test_astep_awaits_an_async_tool_on_the_callers_loop_and_runs_a_plain_one_in_place():
    env = WrapsACallTool()
    env.reset(seed=0)
    here = threading.current_thread().name
    await env.astep_typed(call("later", text="x"))
    await env.astep_typed(call("upper", text="y"))
    assert env.threads == [here, here]


async def test_astep_never_blocks_the_loop_on_an_async_tool_whatever_the_env_overrides():
    """Two envs' async tools, one waiting for the other: under ``astep_typed`` both make progress on one loop
    (a step that blocked the loop on its tool would wait for the other forever)."""
    gate = asyncio.Event()

    class Waits(WrapsCallTool):
        @tool
        async def later(self, text: str) -> str:
            """Wait for the gate (``open``) or open it."""
            if text == "open":
                gate.set()
                return "opened"
            await asyncio.wait_for(gate.wait(), 10)
            return "passed"

    first, second = Waits(), Waits()
    first.reset(seed=0)
    second.reset(seed=0)
    waiting = asyncio.ensure_future(first.astep_typed(call("later", text="wait")))
    await asyncio.sleep(0)
    opened = await second.astep_typed(call("later", text="open"))
    assert opened.messages[-1].content == "opened"
    assert (await asyncio.wait_for(waiting, 10)).messages[-1].content == "passed"


class Bridge(RubricEnv):
    """Serves tools it declares no method for (as the OpenEnv and verifiers bridges do): ``call_tool`` runs them."""

    env_id, stages = "bridge-test-v0", ("act",)
    SPEC = ToolSpec(
        name="remote",
        description="A tool served elsewhere.",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    )

    def sample_task(self, rng, split="train"):
        return Task(id="bridge-0", env_id=self.env_id, prompt="Call remote.")

    def tools(self) -> list[ToolSpec]:
        return [self.SPEC]

    def call_tool(self, c: ToolCall) -> ToolOutput:
        return ToolOutput(text=f"served {c.arguments['q']}")


@pytest.mark.parametrize("face", FACES)
def test_an_env_serving_undeclared_tools_runs_them_through_its_call_tool_under_every_face(face):
    env = Bridge()
    assert _play(env, face, [call("remote", q="x")]) == ["served x"]
    assert not Bridge.is_async()


async def test_acall_tool_of_a_plain_tool_goes_to_call_tool():
    env = WrapsCallTool()
    env.reset(seed=0)
    out = await env.acall_tool(ToolCall(name="upper", arguments={"text": "z"}))
    assert out.text == "Z" and env.wrapped == ["call_tool upper"]


def test_tools_are_asked_every_step_even_when_the_class_keeps_the_declared_ones():
    """An instance given its own ``tools`` mid-episode is validated against them from the next step on."""
    env = Mixed()
    env.reset(seed=0)
    assert env.step(call("later", text="a"))[0] == "later a"
    only_upper = [t for t in Mixed().tools() if t.name == "upper"]
    env.tools = lambda: only_upper  # type: ignore[method-assign]
    obs, *_, info = env.step(call("later", text="a"))
    assert info["parse_error"] == "unknown tool 'later'; available tools: upper"
    assert env.steps[-1].observation.tools == only_upper
