"""Attacks from inside a sandbox, on both backends: each is contained, the host is unchanged, the sandbox
stays usable, and the result says what happened."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest

from rubricgym.envs.swe.sandbox import Limits, SandboxPathError

pytestmark = pytest.mark.slow

LIMITS = Limits(timeout_s=20, memory_mb=512, pids=64, output_bytes=200_000)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("VALUE = 1\n")
    return root


async def _usable(sb) -> None:
    res = await sb.exec("echo still-alive && python3 -c 'print(6 * 7)'")
    assert res.exit_code == 0 and "still-alive" in res.stdout and "42" in res.stdout, res.describe()


async def test_writes_outside_the_work_dir_do_not_reach_the_host(backend, repo):
    tag = uuid.uuid4().hex
    targets = [f"/etc/rg-{tag}", f"/usr/rg-{tag}", f"/tmp/rg-{tag}", f"/rg-{tag}", f"/usr/bin/rg-{tag}"]
    async with await backend.create(repo, LIMITS) as sb:
        res = await sb.exec("; ".join(f"echo pwned > {t}" for t in targets) + "; true")
        assert res.exit_code == 0
        for t in targets:
            assert not os.path.exists(t), f"{t} was written on the host"
        assert "Read-only file system" in res.stderr or "Permission denied" in res.stderr
        await _usable(sb)
    assert (repo / "pkg" / "mod.py").read_text() == "VALUE = 1\n"


async def test_host_secret_is_not_readable(backend, repo, tmp_path):
    secret = tmp_path / "secret.txt"
    token = uuid.uuid4().hex
    secret.write_text(token)
    async with await backend.create(repo, LIMITS) as sb:
        res = await sb.exec(f"cat {secret}; cat /proc/1/root{secret}; grep -r {token} /tmp /etc /work 2>/dev/null; "
                            "cat /etc/shadow")
        assert token not in res.stdout + res.stderr
        assert res.exit_code != 0
        await _usable(sb)


async def test_no_network_to_a_host_listener(backend, repo):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    try:
        async with await backend.create(repo, LIMITS) as sb:
            code = (f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
                    "    print('CONNECTED')\nexcept OSError as e:\n    print('refused', e)")
            res = await sb.exec(["/usr/bin/python3", "-c", code])
            assert "CONNECTED" not in res.stdout and "refused" in res.stdout, res.describe()
            with pytest.raises(TimeoutError):
                server.accept()
            await _usable(sb)
    finally:
        server.close()


async def test_fork_bomb_is_contained(backend, repo):
    async with await backend.create(repo, LIMITS) as sb:
        res = await sb.exec(":(){ :|:& };:; sleep 3", timeout=5)
        assert res.duration_s < 60
        assert "exit code" in res.describe()
        left = await sb.exec("ps -eo args= | grep -c '[:]|:&' || true")
        assert left.stdout.strip() == "0", "fork bomb processes survived the command"
        await _usable(sb)


async def test_memory_bomb_is_contained(backend, repo):
    async with await backend.create(repo, LIMITS) as sb:
        bomb = "blocks = []\nwhile True:\n    blocks.append(bytearray(64 << 20))"
        res = await sb.exec(["/usr/bin/python3", "-c", bomb])
        assert res.exit_code != 0
        assert "MemoryError" in res.stderr or res.exit_code == 137, res.describe()
        assert "exit code" in res.describe()
        await _usable(sb)


async def test_infinite_loop_times_out_and_kills_the_tree(backend, repo):
    async with await backend.create(repo, LIMITS) as sb:
        res = await sb.exec("(while true; do :; done) & sleep 1001 & while true; do :; done", timeout=2)
        assert res.limit == "timeout" and res.timed_out
        assert "timed out" in res.describe()
        assert res.duration_s < 30
        ps = await sb.exec("ps -eo args= | grep -c '^sleep 1001$' || true")
        assert ps.stdout.strip() == "0", "a process of the timed-out command survived"
        await _usable(sb)


async def test_a_gigabyte_of_output_is_capped(backend, repo):
    async with await backend.create(repo, LIMITS) as sb:
        res = await sb.exec("head -c 1000000000 /dev/zero | tr '\\0' x", timeout=60)
        assert res.limit == "output" and res.stdout_truncated
        assert len(res.stdout) <= LIMITS.output_bytes
        assert "too much output" in res.describe()
        await _usable(sb)


async def test_symlinks_to_host_paths_are_not_followed(backend, repo, tmp_path):
    secret = tmp_path / "host-secret.txt"
    token = uuid.uuid4().hex
    secret.write_text(token)
    async with await backend.create(repo, LIMITS) as sb:
        res = await sb.exec(f"ln -s {secret} leak && ln -s /etc/passwd passwd && ln -s / hostroot && "
                            f"ln -s {tmp_path} outdir")
        assert res.exit_code == 0, res.describe()
        for path in ("leak", "passwd", "hostroot/etc/hostname"):
            with pytest.raises(SandboxPathError):
                await sb.read_file(path)
        with pytest.raises(SandboxPathError):
            await sb.write_file("outdir/planted.txt", "x")
        assert not (tmp_path / "planted.txt").exists()
        diff = await sb.diff()
        assert token not in diff and "symbolic link to" in diff
        await _usable(sb)


async def test_killing_the_parent_is_impossible(backend, repo):
    me = os.getpid()
    async with await backend.create(repo, LIMITS) as sb:
        await sb.exec(f"kill -9 {me}; kill -9 $PPID; kill -9 1; kill -9 -1")
        assert os.getpid() == me  # we are still here to assert it
        await _usable(sb)
