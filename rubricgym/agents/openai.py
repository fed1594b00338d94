"""``OpenAIAgent``: any OpenAI-compatible chat endpoint as an agent (vLLM, llama.cpp's server, a hosted API)."""

from __future__ import annotations

from rubricgym.core.agent import AgentError, BaseAgent
from rubricgym.core.llm import ChatClient, EndpointError
from rubricgym.core.types import Message, Task, ToolSpec


class OpenAIAgent(BaseAgent):
    """Chats with ``{base_url}/chat/completions``.

    With ``native_tools=True`` the env's tools are sent as OpenAI ``tools`` and structured tool calls come back
    as a ``Message``; otherwise the model writes calls in text (``<tool_call>{...}</tool_call>``), which works
    with any server. An endpoint that stays down after ``max_retries`` raises ``AgentError``.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        temperature: float = 0.7,
        max_tokens: int = 512,
        native_tools: bool = False,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        max_concurrency: int = 8,
        seed: int | None = None,
    ):
        self.client = ChatClient(
            base_url,
            model,
            api_key=api_key,
            timeout_s=timeout_s,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
        )
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.native_tools = native_tools
        self.seed = seed

    def episode(self, task: Task, seed: int | None) -> OpenAIAgent:
        view = object.__new__(OpenAIAgent)
        view.__dict__.update(self.__dict__)
        view.seed = seed if seed is not None else self.seed
        return view

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str | Message:
        try:
            result = await self.client.chat(
                messages,
                tools=tools if self.native_tools else None,
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                seed=self.seed,
            )
        except EndpointError as e:
            raise AgentError(f"agent {self.model!r} at {self.client.base_url}: {e}") from e
        if result.message.tool_calls:
            return result.message
        return result.message.content or ""

    async def aclose(self) -> None:
        await self.client.aclose()
