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
    sb = await BwrapBackend().create(Path(sys.argv[1]))
    await sb.exec("echo hi > planted.txt")
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
    async with await BwrapBackend().create(repo) as sb:  # a new backend sweeps at its first create
        assert not home.exists(), "the dead owner's sandbox was not swept"
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
