"""Agent programs as their frameworks' users write them, pointed at the recording proxy through the
``ProxyEpisode`` they are given: templates for your own, and what the tests train
(``generation.agent_program: rubricgym.proxy.examples:NAME``). LangGraph and the OpenAI Agents SDK are imported only
by the program that uses them (``pip install 'rubricgym[agents]'``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from rubricgym.proxy.episodes import ProxyEpisode

MAX_TURNS = 6


def plain_openai(ep: ProxyEpisode) -> None:
    """A script with the OpenAI client: call the model, run the tool it asks for, repeat until it stops."""
    import openai

    client = openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key, max_retries=0)
    tools: Any = ep.tools
    messages: list[Any] = [{"role": "user", "content": ep.prompt}]
    for _ in range(MAX_TURNS):
        reply = client.chat.completions.create(model=ep.model, messages=messages, tools=tools)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return
        for call in message.tool_calls:
            if call.type != "function":
                return
            out = ep.call_tool(call.function.name, json.loads(call.function.arguments or "{}"))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": out})


def langgraph_react(ep: ProxyEpisode) -> None:
    """LangGraph's prebuilt ReAct agent over ``ChatOpenAI``, the env's tools as LangChain tools."""
    from langchain_core.tools import StructuredTool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    llm = ChatOpenAI(model=ep.model, base_url=ep.base_url, api_key=ep.api_key, max_retries=0)
    tools = [
        StructuredTool.from_function(
            func=fn,
            name=spec["function"]["name"],
            description=spec["function"]["description"] or spec["function"]["name"],
            args_schema=spec["function"]["parameters"],
        )
        for fn, spec in zip(ep.functions(), ep.tools, strict=True)
    ]
    agent = create_react_agent(llm, tools)
    agent.invoke({"messages": [("user", ep.prompt)]}, {"recursion_limit": 2 * MAX_TURNS + 1})


async def openai_agents_sdk(ep: ProxyEpisode) -> None:
    """The OpenAI Agents SDK: an ``Agent`` on a chat-completions model whose client points at the proxy."""
    import openai
    from agents import Agent, FunctionTool, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
    from agents.exceptions import MaxTurnsExceeded

    set_tracing_disabled(True)
    client = openai.AsyncOpenAI(base_url=ep.base_url, api_key=ep.api_key, max_retries=0)

    def tool(spec: dict[str, Any]) -> FunctionTool:
        name = spec["function"]["name"]

        async def invoke(ctx: Any, args: str) -> str:
            return await asyncio.to_thread(ep.call_tool, name, json.loads(args or "{}"))

        return FunctionTool(
            name=name,
            description=spec["function"]["description"] or name,
            params_json_schema=spec["function"]["parameters"],
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    agent = Agent(
        name="solver",
        instructions="Solve the task with the tools.",
        model=OpenAIChatCompletionsModel(model=ep.model, openai_client=client),
        tools=[tool(s) for s in ep.tools],
    )
    with contextlib.suppress(MaxTurnsExceeded):  # a small model may keep calling tools: the episode is still kept
        await Runner.run(agent, ep.prompt, max_turns=MAX_TURNS)
