"""Attacks from inside a sandbox, on both backends: each is contained, the host is unchanged, the sandbox
stays usable, and the result says what happened."""

from __future__ import annotations

import asyncio
import contextlib
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
        res = await sb.exec(
            f"cat {secret}; cat /proc/1/root{secret}; grep -r {token} /tmp /etc /work 2>/dev/null; cat /etc/shadow"
        )
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
            code = (
                f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
                "    print('CONNECTED')\nexcept OSError as e:\n    print('refused', e)"
            )
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
        res = await sb.exec(
            f"ln -s {secret} leak && ln -s /etc/passwd passwd && ln -s / hostroot && ln -s {tmp_path} outdir"
        )
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


# ---- red-team findings (issue 10): each fails on the code before the fix --------------------------------------


async def test_no_host_environment_anywhere_under_proc(backend, repo, monkeypatch):
    token = uuid.uuid4().hex
    monkeypatch.setenv("RG_HOST_SECRET_TOKEN", token)
    async with await backend.create(repo, LIMITS) as sb:
        res = await sb.exec(
            "cat /proc/1/environ /proc/*/environ /proc/*/task/*/environ 2>/dev/null | tr '\\0' '\\n'; "
            "grep -rs RG_HOST_SECRET /proc/*/environ; env"
        )
        assert token not in res.stdout + res.stderr, "a host environment variable is visible inside"
        assert "RG_HOST_SECRET" not in res.stdout
        await _usable(sb)


SWAPPER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("d", exist_ok=True)
open("d/secret.txt", "w").write("inner\n")
os.symlink(sys.argv[1], "l")
end = time.monotonic() + float(sys.argv[2])
n = 0
while time.monotonic() < end:
    libc.renameat2(-100, b"d", -100, b"l", 2)  # RENAME_EXCHANGE: d <-> l
    n += 1
print("swaps", n)
"""


async def test_file_ops_race_with_a_folder_swapped_for_a_host_link(backend, repo, tmp_path):
    """renameat2(RENAME_EXCHANGE) of a folder and a link to a host folder while the host reads and writes."""
    host = tmp_path / "hostdir"
    host.mkdir()
    token = uuid.uuid4().hex
    (host / "secret.txt").write_text(token)
    host.chmod(0o700)
    async with await backend.create(repo, LIMITS) as sb:
        swapper = asyncio.ensure_future(sb.exec(["/usr/bin/python3", "-c", SWAPPER, str(host), "4"], timeout=15))
        await asyncio.sleep(0.7)
        leaked = planted = 0
        for i in range(3000):
            if swapper.done():
                break
            with contextlib.suppress(SandboxPathError):
                leaked += token.encode() in await sb.read_file("d/secret.txt")
            with contextlib.suppress(SandboxPathError):
                await sb.write_file(f"d/planted-{i}.txt", "x")
            await asyncio.sleep(0)
        res = await swapper
        planted = len(list(host.glob("planted-*")))
        if backend.name == "bwrap":  # docker's file operations are commands inside, and end every process
            assert "swaps" in res.stdout, res.describe()
        assert leaked == 0, f"the host read a host file through the swapped link {leaked} times"
        assert planted == 0, f"the host wrote {planted} files into a host folder through the swapped link"
        await _usable(sb)


async def test_disk_quota_stops_a_disk_filler(backend, repo):
    async with await backend.create(repo, Limits(timeout_s=30, memory_mb=512, pids=64, disk_mb=48)) as sb:
        res = await sb.exec("head -c 200000000 /dev/zero > big; ls -la big")
        assert res.limit == "disk", res.describe()
        assert "disk quota" in res.describe()
        du = await sb.exec("du -sm --apparent-size /work | cut -f1")
        assert int(du.stdout.strip()) <= 50  # du rounds up
        tmp = await sb.exec("head -c 200000000 /dev/zero > /tmp/big")
        assert tmp.limit == "disk" and "No space left" in tmp.stderr
        with pytest.raises(SandboxPathError):
            await sb.write_file("big2.bin", b"\0" * (60 * 1024 * 1024))
        await sb.exec("rm -f big /tmp/big")
        await _usable(sb)


async def test_one_sandbox_cannot_starve_another_of_processes(backend, repo):
    lim = Limits(timeout_s=30, memory_mb=512, pids=64)
    async with await backend.create(repo, lim) as a, await backend.create(repo, lim) as b:
        hog = a.exec("for i in $(seq 55); do sleep 6 & done; wait; echo hog-done")
        fork = b.exec("sleep 2; for i in $(seq 30); do sleep 1 & done; wait; echo forked-ok")
        res_a, res_b = await asyncio.gather(hog, fork)
        assert "forked-ok" in res_b.stdout and "fork" not in res_b.stderr, res_b.describe()
        await _usable(b)


async def test_deeply_nested_tree_is_diffed_and_destroyed(backend, repo):
    deep = (
        "import os\nfor _ in range(1300):\n    os.mkdir('d')\n    os.chdir('d')\n"
        "open('deep.txt', 'w').write('deep\\n')\n"
    )
    sb = await backend.create(repo, LIMITS)
    res = await sb.exec(["/usr/bin/python3", "-c", deep])
    assert res.exit_code == 0, res.describe()
    deep_path = "d/" * 1300 + "deep.txt"
    assert deep_path in await sb.fingerprint()
    assert "+deep" in await sb.diff()
    home = getattr(sb, "home", None)
    await sb.destroy()
    if home is not None:
        assert not home.exists(), "destroy left files behind"


async def test_patch_headers_new_empty_files_and_odd_names(backend, repo):
    from rubricgym.envs.swe.patch import parse_patch

    async with await backend.create(repo, LIMITS) as sb:
        res = await sb.exec("touch pkg/__init__.py; printf 'x\\n' > \"$(printf 'evil\\n+++ evil2')\"")
        assert res.exit_code == 0, res.describe()
        diff = await sb.diff()
        files = {fp.path: fp for fp in parse_patch(diff)}
        assert files["pkg/__init__.py"].is_new, diff
        assert "evil\n+++ evil2" in files
        assert "\n+++ evil2" not in diff, "a file name wrote raw lines into the patch headers"


async def test_inputs_that_cannot_be_run_return_results(backend, repo):
    async with await backend.create(repo, LIMITS) as sb:
        nul = await sb.exec("echo a\0b")
        assert nul.exit_code != 0 and nul.limit == "input" and "NUL" in nul.describe()
        huge = await sb.exec("echo " + "x" * 200_000)
        assert huge.exit_code != 0 and "script" in huge.describe()
        surrogate = await sb.exec("echo \ud83d")
        assert surrogate.exit_code != 0 and "surrogate" in surrogate.describe()
        for bad in ("a\0b", "pkg/\0mod.py", "\ud83d.py"):
            with pytest.raises(SandboxPathError):
                await sb.read_file(bad)
            with pytest.raises(SandboxPathError):
                await sb.write_file(bad, "x")
        await _usable(sb)
