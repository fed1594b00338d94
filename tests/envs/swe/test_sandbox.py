"""The sandbox interface on the default bwrap backend (fast: a command costs milliseconds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rubricgym.envs.swe.sandbox import Limits, SandboxError, SandboxPathError
from rubricgym.envs.swe.testrun import run_pytest


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_add.py").write_text(
        "from pkg import add\n\ndef test_ok():\n    assert add(1, 2) == 3\n\n"
        "def test_bad():\n    assert add(1, 1) == 3\n"
    )
    return root


async def test_exec_runs_unprivileged_in_the_work_dir(bwrap, repo):
    async with await bwrap.create(repo) as sb:
        res = await sb.exec("pwd; ls pkg; id -u; echo err >&2; exit 3")
        assert res.exit_code == 3
        assert res.stdout.split()[:2] == ["/work", "__init__.py"]
        assert res.stdout.split()[2] != "0"
        assert res.stderr == "err\n"
        assert "exit code: 3" in res.describe()


async def test_files_and_diff_against_the_snapshot(bwrap, repo):
    async with await bwrap.create(repo) as sb:
        await sb.write_file("pkg/new/mod.py", "X = 1\n")
        assert await sb.read_file("/work/pkg/new/mod.py") == b"X = 1\n"
        await sb.exec("sed -i 's/a + b/a - b/' pkg/__init__.py && rm tests/test_add.py")
        diff = await sb.diff()
        assert "-    return a + b\n+    return a - b\n" in diff
        assert "deleted file" in diff and "new file" in diff
        fp = await sb.fingerprint()
        assert "pkg/new/mod.py" in fp and "tests/test_add.py" not in fp
    assert (repo / "pkg" / "__init__.py").read_text().endswith("a + b\n"), "the snapshot must not change"


async def test_bad_paths_are_clear_errors(bwrap, repo):
    async with await bwrap.create(repo) as sb:
        with pytest.raises(SandboxPathError, match="does not exist"):
            await sb.read_file("nope.py")
        with pytest.raises(SandboxPathError, match="outside the repository"):
            await sb.read_file("../etc/passwd")
        with pytest.raises(SandboxPathError, match="outside the repository"):
            await sb.read_file("/etc/passwd")
        with pytest.raises(SandboxPathError, match="directory"):
            await sb.read_file("pkg")


async def test_timeout_and_output_cap_are_reported(bwrap, repo):
    async with await bwrap.create(repo, Limits(output_bytes=1000)) as sb:
        slow = await sb.exec("sleep 30", timeout=0.5)
        assert slow.timed_out and slow.duration_s < 10
        loud = await sb.exec("yes")
        assert loud.limit == "output" and len(loud.stdout) <= 1000
        assert (await sb.exec("true")).ok


async def test_destroy_removes_everything_and_is_idempotent(bwrap, repo):
    sb = await bwrap.create(repo)
    work = sb.work
    assert work.is_dir()
    await sb.destroy()
    await sb.destroy()
    assert not work.exists()
    with pytest.raises(SandboxError):
        await sb.exec("true")


async def test_pytest_runner_reports_each_test(bwrap, repo):
    async with await bwrap.create(repo) as sb:
        run = await run_pytest(sb, [], ["."])
        assert run.results == {"tests/test_add.py::test_ok": "passed", "tests/test_add.py::test_bad": "failed"}
        assert "assert 2 == 3" in run.messages["tests/test_add.py::test_bad"]
        one = await run_pytest(sb, ["tests/test_add.py::test_ok"], ["."])
        assert one.results == {"tests/test_add.py::test_ok": "passed"}
        assert (await sb.diff()) == "", "running tests must not write into the repository"


OWNER_DIES = """
import asyncio, os, sys
from pathlib import Path
from rubricgym.envs.swe.sandbox import BwrapBackend
async def main():
    backend = BwrapBackend()
    sb = await backend.create(Path(sys.argv[1]))
    await sb.exec("echo hi > planted.txt")
    for _ in range(500):  # until the spare made ahead is ready, so that it is left behind too
        if backend._spare_slots:
            break
        await asyncio.sleep(0.01)
    print(sb.home, flush=True)
    os.kill(os.getpid(), 9)
asyncio.run(main())
"""


async def test_startup_sweeps_what_a_killed_owner_left(bwrap, repo, tmp_path, monkeypatch):
    import subprocess
    import sys

    from rubricgym.envs.swe.sandbox import BwrapBackend
    from rubricgym.envs.swe.sandbox.hoststate import mounts_under

    root = tmp_path / "sbroot"
    monkeypatch.setenv("RUBRICGYM_SANDBOX_DIR", str(root))
    proc = subprocess.run(
        [sys.executable, "-c", OWNER_DIES, str(repo)],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "PYTHONPATH": ":".join(sys.path)},
        timeout=120,
    )
    assert proc.returncode == -9, proc.stderr
    home = Path(proc.stdout.strip())
    assert home.is_dir() and home.parent.parent == root, "the killed owner should have left its sandbox"
    left = set((root / "work").iterdir())  # its sandbox, and the spare made ahead if it was ready
    async with await BwrapBackend().create(repo) as sb:  # a new backend sweeps at its first create
        assert not home.exists(), "the dead owner's sandbox was not swept"
        assert left.isdisjoint((root / "work").iterdir()), "the dead owner's spare sandbox was not swept"
        assert mounts_under(home) == []
        assert sb.home.is_dir(), "a live sandbox must never be swept"
        assert BwrapBackend().sweep() == [] and sb.home.is_dir()
    sid = home.name
    assert not any(Path(f"/sys/fs/cgroup/{c}/rubricgym/{sid}").exists() for c in ("memory", "pids", "cpu"))


async def test_unused_snapshot_copies_are_evicted(repo, tmp_path, monkeypatch):
    from rubricgym.envs.swe.sandbox import BwrapBackend

    if BwrapBackend.unavailable_reason() or __import__("os").geteuid() != 0:
        pytest.skip("the shared lower/ copies exist with the root overlay mode only")
    monkeypatch.setenv("RUBRICGYM_SANDBOX_DIR", str(tmp_path / "sbroot"))
    backend = BwrapBackend(max_lowers=1)
    held = await backend.create(repo)
    for i in range(3):
        other = tmp_path / f"repo{i}"
        other.mkdir()
        (other / "m.py").write_text(f"X = {i}\n")
        async with await backend.create(other) as sb:
            assert (await sb.read_file("m.py")) == f"X = {i}\n".encode()
    lowers = [p for p in (tmp_path / "sbroot" / "lower").iterdir() if not p.name.startswith(".")]
    assert len(lowers) <= 2, f"{len(lowers)} snapshot copies kept with max_lowers=1 (one of them in use)"
    assert (await held.read_file("pkg/__init__.py")).startswith(b"def add"), "an in-use copy was evicted"
    await held.destroy()


def _limits_inside(text: str) -> dict[str, str]:
    return {line[:26].strip(): line[26:].split()[0] for line in text.splitlines() if line.startswith("Max ")}


@pytest.mark.parametrize("sh_rlimits", [True, False], ids=["shell-ulimit", "prlimit"])
async def test_rlimits_uid_and_capabilities_hold_whichever_way_the_limits_are_set(repo, sh_rlimits):
    import os

    from rubricgym.envs.swe.sandbox import BwrapBackend
    from rubricgym.envs.swe.sandbox.bwrap import shell_sets_rlimits

    if BwrapBackend.unavailable_reason():
        pytest.skip(BwrapBackend.unavailable_reason())
    if sh_rlimits and not shell_sets_rlimits():
        pytest.skip("this /bin/sh's ulimit does not set the limits in the units we use (prlimit is used instead)")
    backend = BwrapBackend(cgroups=False)  # no pids cgroup: the process limit is then an rlimit too
    backend._sh_rlimits = sh_rlimits  # the way of setting them chosen here instead of by the probe
    async with await backend.create(repo, Limits(memory_mb=1000, file_mb=7, pids=99)) as sb:
        res = await sb.exec("cat /proc/self/limits; grep -E '^(Uid|Gid|Groups|CapEff|CapBnd):' /proc/self/status")
    assert res.ok, res.describe()
    limits = _limits_inside(res.stdout)
    assert limits["Max address space"] == str(1000 * 1024 * 1024)
    assert limits["Max file size"] == str(7 * 1024 * 1024)
    assert limits["Max core file size"] == "0"
    assert limits["Max processes"] == "99"
    status = dict(line.split(":", 1) for line in res.stdout.splitlines() if line[:3] in ("Uid", "Gid", "Gro", "Cap"))
    assert status["Groups"].split() == [], "supplementary groups must be dropped"
    assert status["CapEff"].strip() == status["CapBnd"].strip() == "0000000000000000"
    if os.geteuid() == 0:
        assert status["Uid"].split() == ["65534"] * 4 and status["Gid"].split() == ["65534"] * 4


async def test_a_cancelled_command_leaves_no_process_behind(bwrap, repo):
    import asyncio
    import os
    import time
    import uuid

    marker = f"rg-cancelled-{uuid.uuid4().hex[:8]}"

    def running() -> list[int]:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(int(pid))
            except OSError:
                continue
        return found

    async with await bwrap.create(repo) as sb:
        name = f'{marker[:6]}""{marker[6:]}'  # the command line itself must not hold the marker
        task = asyncio.create_task(sb.exec(f"(exec -a {name} sleep 300) & exec -a {name} sleep 300", timeout=600))
        deadline = time.monotonic() + 60
        while len(running()) < 2 and time.monotonic() < deadline and not task.done():
            await asyncio.sleep(0.05)
        assert len(running()) == 2, "the command's two processes did not start"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        deadline = time.monotonic() + 30  # killed processes may take a moment to finish exiting
        while running() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert running() == [], "cancelling exec must kill every process the command started"
        assert (await sb.exec("echo still usable")).stdout == "still usable\n"


async def _spare(backend, timeout: float = 60.0):
    """The spare the backend makes in a thread after a create (polled: it is ready in milliseconds)."""
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    while not backend._spare_slots and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert backend._spare_slots, "no spare was made after a create"
    return backend._spare_slots[-1]


async def test_a_sandbox_made_from_a_spare_sees_nothing_of_another(repo):
    import asyncio
    import os
    import time

    from rubricgym.envs.swe.sandbox import BwrapBackend

    if BwrapBackend.unavailable_reason():
        pytest.skip(BwrapBackend.unavailable_reason())
    backend = BwrapBackend(spares=1)
    first = await backend.create(repo)
    res = await first.exec(
        "echo secret > pkg/planted.py; echo secret > /tmp/planted; (exec -a rg-first-sandbox sleep 300 &) ; "
        "cat /proc/self/status | grep -E '^NSpid'"
    )
    assert res.ok, res.describe()
    spare = await _spare(backend)
    second = await backend.create(repo)
    try:
        assert second.home == spare.home and second.home != first.home, "the second sandbox did not use the spare"
        assert (await first.read_file("pkg/planted.py")) == b"secret\n", "the first sandbox must be untouched"
        res = await second.exec(
            "find /work /tmp -mindepth 1 | sort; for p in /proc/[0-9]*; do cat $p/cmdline | tr '\\0' ' '; echo; done"
        )
        assert res.ok, res.describe()
        seen = res.stdout
        assert "planted" not in seen, "the second sandbox sees the first one's files"
        assert "rg-first-sandbox" not in seen, "the second sandbox sees the first one's processes"
        assert sorted(line for line in seen.splitlines() if line.startswith("/work/")) == sorted(
            f"/work/{p.relative_to(repo)}" for p in repo.rglob("*")
        ), "the second sandbox's /work is not exactly the snapshot"
        assert not [line for line in seen.splitlines() if line.startswith("/tmp/")], "/tmp is not fresh"
        if second.cgroups:
            # once its last command's bwrap has finished exiting, only the launcher parked for its next command
            # (a host process that has run nothing yet) is left in them
            deadline = time.monotonic() + 30
            while True:
                parked = {str(second._launcher.pid)} if second._launcher else set()
                members = {d: set((d / "cgroup.procs").read_text().split()) for d in second.cgroups.values()}
                if all(m <= parked for m in members.values()) or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.05)
            assert all(m <= parked for m in members.values()), f"left in the new sandbox's cgroups: {members}"
            assert set(second.cgroups.values()).isdisjoint(first.cgroups.values())
    finally:
        await first.destroy()
        await second.destroy()
        await backend.aclose()
    assert not os.path.exists(first.home) and not os.path.exists(second.home)


async def test_spares_are_removed_by_aclose(repo, tmp_path):
    from rubricgym.envs.swe.sandbox import BwrapBackend

    if BwrapBackend.unavailable_reason():
        pytest.skip(BwrapBackend.unavailable_reason())
    backend = BwrapBackend(spares=1)
    async with await backend.create(repo):
        spare = await _spare(backend)
        assert spare.home.is_dir() and spare.launcher.alive()
    await backend.aclose()
    assert not spare.home.exists() and not spare.launcher.alive()
    assert not any(d.exists() for d in spare.cgroups.values())
    with pytest.raises(SandboxError):  # a closed backend still creates (without spares)
        await backend.create(tmp_path / "missing")
    async with await backend.create(repo) as sb:
        assert (await sb.exec("true")).ok
    assert backend._spare_slots == []
