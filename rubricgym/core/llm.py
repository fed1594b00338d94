"""An async client for any OpenAI-compatible chat endpoint (vLLM, llama.cpp's server, a hosted API).

Shared by the API agent and the LLM judges: retries with exponential backoff on connection errors, timeouts,
429 and 5xx; a concurrency limit; and, once retries are spent, an ``EndpointError`` that says what to check.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from rubricgym.core.types import Message, ToolCall, ToolSpec

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class EndpointError(RuntimeError):
    """The endpoint could not be reached or kept failing after the configured retries."""


class EndpointResponseError(EndpointError):
    """The endpoint answered with a client error (bad model name, bad request): retrying will not help."""


@dataclass
class ChatResult:
    """One chat completion: the assistant message plus what the endpoint reported."""

    message: Message
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    latency_s: float = 0.0
    attempts: int = 1
    raw: dict[str, Any] = field(default_factory=dict)


def _parse_tool_calls(raw_calls: list[dict[str, Any]] | None) -> list[ToolCall] | None:
    if not raw_calls:
        return None
    calls = []
    for c in raw_calls:
        fn = c.get("function") or {}
        args: Any = fn.get("arguments") or "{}"
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                args = {"_unparsed": args}  # the env's validation then explains the bad arguments
        if not isinstance(args, dict):
            args = {"_unparsed": args}
        calls.append(ToolCall(id=c.get("id"), name=str(fn.get("name", "")), arguments=args))
    return calls


class ChatClient:
    """``await client.chat(messages)`` against ``{base_url}/chat/completions``.

    ``base_url`` includes the API prefix (``http://127.0.0.1:8000/v1``). The API key comes from ``api_key`` or
    ``$OPENAI_API_KEY`` (local servers accept any).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_concurrency: int = 8,
    ):
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_concurrency = max_concurrency
        key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self._headers = {"Authorization": f"Bearer {key}"}
        self._client: httpx.AsyncClient | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.calls = 0
        """Requests sent (including retries): benchmarks and cache tests count endpoint calls with it."""

    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client.is_closed or self._loop is not loop:
            # a client is bound to the event loop it was created in: make a new one per loop
            self._client = httpx.AsyncClient(timeout=self.timeout_s, headers=self._headers)
            self._semaphore = asyncio.Semaphore(self.max_concurrency)
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request with retries; returns the decoded JSON body."""
        client = self._http()
        assert self._semaphore is not None
        url = f"{self.base_url}{path}"
        last = "no attempt made"
        async with self._semaphore:
            for attempt in range(self.max_retries + 1):
                if attempt:
                    await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1) * (1 + random.random() / 4))
                self.calls += 1
                try:
                    resp = await client.request(method, url, json=body)
                except (httpx.TransportError, httpx.TimeoutException) as e:
                    last = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                    continue
                if resp.status_code in RETRYABLE_STATUS:
                    last = f"HTTP {resp.status_code}: {resp.text[:200]}"
                    continue
                if resp.status_code >= 400:
                    raise EndpointResponseError(f"{method} {url} returned HTTP {resp.status_code}: {resp.text[:500]}")
                try:
                    return resp.json()
                except ValueError:
                    raise EndpointResponseError(f"{method} {url} returned non-JSON: {resp.text[:200]}") from None
        raise EndpointError(
            f"{method} {url} failed after {self.max_retries + 1} attempt(s); last error: {last}. "
            "Check that the server is running and the URL is right (a local one: `rubricgym model serve`)."
        )

    async def chat(
        self,
        messages: list[Message] | list[dict[str, Any]],
        *,
        tools: list[ToolSpec] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        response_format: dict[str, Any] | None = None,
        seed: int | None = None,
        **extra: Any,
    ) -> ChatResult:
        """One chat completion. ``extra`` passes endpoint-specific fields through (e.g. ``top_p``, ``stop``)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [m.to_openai() if isinstance(m, Message) else m for m in messages],
        }
        if tools:
            body["tools"] = [t.to_openai() for t in tools]
        for key, value in (
            ("temperature", temperature),
            ("max_tokens", max_tokens),
            ("response_format", response_format),
            ("seed", seed),
        ):
            if value is not None:
                body[key] = value
        body.update(extra)
        calls_before = self.calls
        t0 = time.perf_counter()
        data = await self.request("POST", "/chat/completions", body)
        try:
            choice = data["choices"][0]
            msg = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise EndpointResponseError(f"unexpected chat completion shape: {json.dumps(data)[:300]}") from None
        message = Message(
            role="assistant", content=msg.get("content"), tool_calls=_parse_tool_calls(msg.get("tool_calls"))
        )
        return ChatResult(
            message=message,
            finish_reason=choice.get("finish_reason"),
            usage=data.get("usage") or {},
            latency_s=time.perf_counter() - t0,
            attempts=self.calls - calls_before,
            raw=data,
        )

    async def models(self) -> list[str]:
        data = await self.request("GET", "/models")
        return [m.get("id", "") for m in data.get("data", [])]


async def wait_until_ready(base_url: str, timeout_s: float = 120.0, interval_s: float = 0.5) -> list[str]:
    """Poll ``{base_url}/models`` until it answers; returns the served model ids or raises ``EndpointError``."""
    deadline = time.monotonic() + timeout_s
    last = ""
    async with httpx.AsyncClient(timeout=5.0) as client:
        while time.monotonic() < deadline:
            try:
                resp = await client.get(f"{base_url.rstrip('/')}/models")
                if resp.status_code == 200:
                    return [m.get("id", "") for m in resp.json().get("data", [])]
                last = f"HTTP {resp.status_code}"
            except httpx.HTTPError as e:
                last = type(e).__name__
            await asyncio.sleep(interval_s)
    raise EndpointError(f"{base_url} did not answer /models within {timeout_s:.0f}s (last: {last})")
