"""Running coroutines from synchronous code, and on a given event loop: the one bridge every env uses.

An env's async tools and resources (a sandbox, a browser pool, an LLM client) run on the env's loop
(``RubricEnv.tool_loop``): an event loop running in a thread of its own (a browser pool's), or ``None`` for the
caller's loop under ``astep_typed`` and a fresh loop under the synchronous Gymnasium ``step``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code, even when an event loop is running in this thread
    (then on a worker thread with its own loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _running() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _usable(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> None:
    if loop.is_closed() or not loop.is_running():
        coro.close()
        raise RuntimeError("the env's event loop is not running (was the env or its pool closed?): make a new env")


def run_on(loop: asyncio.AbstractEventLoop | None, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code: on ``loop`` (running in another thread), or with
    ``None`` as ``run_sync`` does."""
    if loop is None:
        return run_sync(coro)
    _usable(loop, coro)
    if _running() is loop:
        coro.close()
        raise RuntimeError("a blocking call on the env's own loop would wait for itself: await astep_typed instead")
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


async def arun_on(loop: asyncio.AbstractEventLoop | None, coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on ``loop`` from any event loop (on the caller's own when ``loop`` is ``None`` or it)."""
    if loop is None or loop is asyncio.get_running_loop():
        return await coro
    _usable(loop, coro)
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))
