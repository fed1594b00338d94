"""``EnvThreads``: the threads that run a server's env calls, handing results back to the event loop cheaply.

Every env call of a thread-isolated session runs off the event loop (``worker``), one call per step.
``loop.run_in_executor`` on a ``ThreadPoolExecutor`` pays on every call for a ``concurrent.futures.Future`` (a
``Condition``), a work item, the idle semaphore and the chaining of that future to an asyncio one (stepping a
single session in ``bench/server.py``, the whole hand-off, wake-ups included, was ~30% of the server's CPU per
step). ``EnvThreads.run`` puts ``(fn, args, future)`` on a ``SimpleQueue`` and the thread that runs it resolves
the asyncio future itself (``call_soon_threadsafe``): about half the CPU per hand-off in-process (~25 vs ~55 us on
the 2-core development machine), the same guarantees.

Threads start on demand, one for each call in flight when none is idle, up to ``max_threads`` (the server sizes
it to its sessions): as with ``ThreadPoolExecutor``, no call waits behind another session's (a slow env) until
that many are in flight. It is also a plain ``Executor`` (``submit``), for ``run_in_executor`` callers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_Item = tuple[Callable[..., Any], tuple[Any, ...], asyncio.AbstractEventLoop | None, Any]
"""(fn, args, the loop of an asyncio future or None for a concurrent one, the future)."""


class EnvThreads(concurrent.futures.Executor):
    """A thread pool whose ``run`` resolves an asyncio future directly (see the module docstring)."""

    def __init__(self, max_threads: int, name: str = "rubricgym-env"):
        if max_threads < 1:
            raise ValueError(f"max_threads must be at least 1, not {max_threads}")
        self.max_threads, self.name = max_threads, name
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting on the queue that no queued call has claimed yet
        self._in_flight = 0  # calls put and not yet finished
        self._threads: list[threading.Thread] = []
        self._shutdown = False

    def run(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """``fn(*args)`` on one of the threads; the future (of the running loop) resolves with what it returns or
        raises. Cancelling the future does not stop a call already running (as with ``run_in_executor``)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._put((fn, args, loop, future))
        return future

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        call = functools.partial(fn, *args, **kwargs) if kwargs else fn
        self._put((call, () if kwargs else args, None, future))
        return future

    def _put(self, item: _Item) -> None:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot run env calls after the server's threads were shut down")
            self._in_flight += 1
            if self._idle:
                self._idle -= 1  # an idle thread takes it
            elif len(self._threads) < self.max_threads:
                thread = threading.Thread(
                    target=self._work, name=f"{self.name}_{len(self._threads)}", daemon=True
                )  # daemon: the server closes every env before it stops; a stuck call must not hold the exit
                thread.start()
                self._threads.append(thread)
            self._queue.put(item)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, args, loop, future = item
            del item
            if loop is None:
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(fn(*args))
                    except BaseException as e:
                        future.set_exception(e)
                del fn, args, future
                with self._lock:
                    self._idle += 1
                    self._in_flight -= 1
                continue
            try:
                result, error = fn(*args), None
            except BaseException as e:
                result, error = None, e
            del fn, args
            with self._lock:
                self._idle += 1
                self._in_flight -= 1
            # last, so the loop's thread, woken by it, finds the interpreter lock free: this one is about to wait
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for this result any more
                loop.call_soon_threadsafe(_resolve, future, result, error)
            del loop, future, result, error

    def busy(self) -> bool:
        """Whether any call is queued or running (read without the lock: a hint, exact once calls settle)."""
        return self._in_flight > 0

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            threads = list(self._threads)
        if cancel_futures:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    _, _, loop, future = item
                    if loop is None:
                        future.cancel()
                    else:
                        with contextlib.suppress(RuntimeError):
                            loop.call_soon_threadsafe(future.cancel)
        for _ in threads:
            self._queue.put(None)
        if wait:
            for thread in threads:
                thread.join()


def _resolve(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(result)
        return
    try:
        future.set_exception(error)
    except TypeError:  # StopIteration cannot travel through a future
        future.set_exception(RuntimeError(f"{type(error).__name__}: {error}"))
