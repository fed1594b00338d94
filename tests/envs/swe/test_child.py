"""``Launcher`` and ``Child``: a sandbox command's host process, parked ahead, then read from the event loop
(real processes, no sandbox needed)."""

from __future__ import annotations

import asyncio
import os

import pytest

from rubricgym.envs.swe.sandbox.base import quote
from rubricgym.envs.swe.sandbox.child import Child, Launcher


async def _run(argv: list[str], cap: int = 1000, prelude: str = "") -> tuple[Child, list[int]]:
    calls: list[int] = []
    launcher = Launcher(prelude)
    child = Child(launcher, cap, on_overflow=lambda: (calls.append(1), os.killpg(child.pid, 9)))
    launcher.go(f"exec {quote(argv)} </dev/null\n")
    try:
        await asyncio.wait_for(asyncio.gather(child.exited, child.drained), 60)
    finally:
        child.close()
    return child, calls


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "waiter-thread"])
async def test_output_and_exit_code_come_back(monkeypatch, pidfd):
    if not pidfd:  # a kernel without pidfd_open (Linux < 5.3): a worker thread waits for the exit instead

        def missing(pid: int) -> int:
            raise OSError(38, "Function not implemented")

        monkeypatch.setattr(os, "pidfd_open", missing)
    child, calls = await _run(["/bin/sh", "-c", "echo out; echo err >&2; exit 3"])
    assert child.returncode == 3 and calls == []
    assert bytes(child.output["stdout"]) == b"out\n" and bytes(child.output["stderr"]) == b"err\n"
    assert child.over is None


async def test_past_the_cap_it_calls_back_once_and_keeps_one_byte_more():
    child, calls = await _run(["/bin/sh", "-c", "yes; sleep 600"], cap=5000)
    assert calls == [1] and child.over == "stdout"
    assert len(child.output["stdout"]) == 5001, "the cut keeps one byte past the cap, so the caller sees it was cut"
    assert child.returncode == -9


async def test_the_environment_is_empty_and_stdin_is_closed():
    child, _ = await _run(["/usr/bin/env"])
    assert bytes(child.output["stdout"]) == b""
    child, _ = await _run(["/bin/cat"])
    assert child.returncode == 0 and bytes(child.output["stdout"]) == b""


async def test_the_prelude_runs_first_and_a_failing_one_stops_the_launch():
    child, _ = await _run(["/bin/sh", "-c", "ulimit -c"], prelude="ulimit -c 7 || exit 125; ")
    assert bytes(child.output["stdout"]) == b"7\n"
    child, _ = await _run(["/bin/echo", "must not run"], prelude="false || exit 125; ")
    assert child.returncode == 125 and bytes(child.output["stdout"]) == b""


async def test_a_parked_launcher_waits_and_runs_any_argument_verbatim():
    odd = 'it\'s "quoted" $HOME `id` \\ \n a newline and ' + "x" * 100_000
    launcher = Launcher()
    await asyncio.sleep(0.2)
    assert launcher.alive(), "a launcher waits for its command"
    child = Child(launcher, 1_000_000, on_overflow=lambda: None)
    launcher.go(f"exec {quote(['/usr/bin/printf', '%s', odd])} </dev/null\n")
    try:
        await asyncio.wait_for(asyncio.gather(child.exited, child.drained), 60)
    finally:
        child.close()
    assert child.returncode == 0 and bytes(child.output["stdout"]).decode() == odd


def test_an_unused_launcher_is_discarded():
    launcher = Launcher()
    launcher.discard()
    assert not launcher.alive()
