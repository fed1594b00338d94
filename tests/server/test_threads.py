"""``EnvThreads``: the server's env-call threads give back results and errors, and never queue one session's call
behind another's while threads are left."""

from __future__ import annotations

import asyncio
import threading

import pytest

from rubricgym.server.threads import EnvThreads


def test_run_returns_results_and_raises_errors_on_the_loop() -> None:
    threads = EnvThreads(4)

    def fail() -> None:
        raise ValueError("bad seed")

    async def main() -> None:
        assert await threads.run(pow, 2, 10) == 1024
        with pytest.raises(ValueError, match="bad seed"):
            await threads.run(fail)
        # a plain Executor too: what run_in_executor and submit callers get
        assert await asyncio.get_running_loop().run_in_executor(threads, pow, 3, 3) == 27
        assert threads.submit(int, "7", base=8).result(5) == 7

    asyncio.run(main())
    threads.shutdown()


def test_a_blocked_call_does_not_hold_up_another() -> None:
    """Each call in flight gets a thread of its own: a second call runs while the first still blocks."""
    threads = EnvThreads(8)
    release = threading.Event()

    async def main() -> list[str]:
        blocked = threads.run(release.wait, 30)
        done = await asyncio.wait_for(threads.run(lambda: "second"), 10)  # would time out queued behind the first
        release.set()
        return [done, str(await blocked)]

    assert asyncio.run(main()) == ["second", "True"]
    threads.shutdown()


def test_calls_past_the_thread_cap_wait_their_turn_and_all_finish() -> None:
    threads = EnvThreads(2)

    async def main() -> list[int]:
        return list(await asyncio.gather(*(threads.run(pow, i, 2) for i in range(50))))

    assert asyncio.run(main()) == [i * i for i in range(50)]
    assert len(threads._threads) <= 2
    threads.shutdown()


def test_shutdown_refuses_new_calls_and_cancels_queued_ones() -> None:
    threads = EnvThreads(1)
    started, release = threading.Event(), threading.Event()

    def hold() -> bool:
        started.set()
        return release.wait(30)

    running = threads.submit(hold)
    assert started.wait(10)
    queued = threads.submit(int, "1")  # the only thread is busy: this one waits in the queue
    threads.shutdown(wait=False, cancel_futures=True)
    assert queued.cancelled()
    with pytest.raises(RuntimeError, match="shut down"):
        threads.submit(int, "2")
    release.set()
    assert running.result(10) is True


def test_busy_while_a_call_is_queued_or_running():
    threads = EnvThreads(2)
    started, release = threading.Event(), threading.Event()

    def hold() -> bool:
        started.set()
        return release.wait(30)

    assert not threads.busy()
    running = threads.submit(hold)
    assert started.wait(10) and threads.busy()
    release.set()
    assert running.result(10) is True
    for _ in range(1000):  # the thread counts the call done just after it hands back the result
        if not threads.busy():
            break
        threading.Event().wait(0.01)
    assert not threads.busy()
    threads.shutdown()
