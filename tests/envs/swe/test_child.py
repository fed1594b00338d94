"""``Child``: a sandbox command's host process read from the event loop (real processes, no sandbox needed)."""

from __future__ import annotations

import asyncio
import os

import pytest

from rubricgym.envs.swe.sandbox.child import Child


async def _run(argv: list[str], cap: int = 1000) -> tuple[Child, list[int]]:
    calls: list[int] = []
    child = Child(argv, cap, on_overflow=lambda: (calls.append(1), os.killpg(child.pid, 9)))
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
