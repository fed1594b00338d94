"""Sandbox latency: bwrap vs a container backend (podman's Docker API), measured in the same run.

Prints create+exec+destroy latency (p50/p95) for each backend and the ratio, 32 concurrent sandboxes, and the
``swe-v0`` reset time for a 2 MB repository. The container backend uses ``DOCKER_HOST`` when set; otherwise, as
root with podman installed, a podman service is started on a temporary socket for the run (and stopped).

    .venv/bin/python bench/sandbox.py [--n 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from rubricgym.envs.swe import SweEnv, SweInstance
from rubricgym.envs.swe.sandbox import BwrapBackend, DockerBackend, SandboxBackend

CONF = (
    '[containers]\ndefault_ulimits = ["nofile=16384:16384", "nproc=16384:16384"]\n\n[engine]\nruntime = "runc"\n'
    'exit_command_delay = 5\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def make_repo(root: Path, files: int, size: int) -> Path:
    for i in range(files):
        p = root / f"pkg{i % 10}" / f"mod{i}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(("x = 1  # padding line\n" * (size // 22 + 1))[:size])
    return root


async def cycle(backend: SandboxBackend, repo: Path) -> float:
    t0 = time.perf_counter()
    sb = await backend.create(repo)
    res = await sb.exec("true")
    await sb.destroy()
    assert res.exit_code == 0, res.describe()
    return time.perf_counter() - t0


async def latency(backend: SandboxBackend, repo: Path, n: int) -> list[float]:
    await cycle(backend, repo)  # warm-up: runtime dir, images
    return [await cycle(backend, repo) for _ in range(n)]


async def concurrent(backend: SandboxBackend, repo: Path, k: int) -> float:
    t0 = time.perf_counter()
    await asyncio.gather(*(cycle(backend, repo) for _ in range(k)))
    return time.perf_counter() - t0


def start_podman(tmp: Path) -> tuple[subprocess.Popen | None, str | None]:
    if os.environ.get("DOCKER_HOST"):
        return None, os.environ["DOCKER_HOST"]
    if os.geteuid() != 0 or not shutil.which("podman"):
        return None, None
    (tmp / "containers.conf").write_text(CONF)
    sock = tmp / "podman.sock"
    proc = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{sock}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "CONTAINERS_CONF": str(tmp / "containers.conf")},
    )
    for _ in range(300):
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(str(sock))
                s.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
                if b"OK" in s.recv(1024):
                    return proc, f"unix://{sock}"
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    return None, None


async def main(n: int, k: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        small = make_repo(tmp / "small", 20, 1000)
        big = make_repo(tmp / "big", 200, 10_000)  # 2 MB
        bw = BwrapBackend()
        b_lat = await latency(bw, small, n)
        print(f"bwrap   create+exec+destroy: p50 {pct(b_lat, 0.5) * 1e3:7.1f} ms  p95 {pct(b_lat, 0.95) * 1e3:7.1f} ms")
        proc, url = start_podman(tmp)
        try:
            if url:
                dk = DockerBackend(base_url=url)
                d_lat = await latency(dk, small, n)
                print(
                    f"docker  create+exec+destroy: p50 {pct(d_lat, 0.5) * 1e3:7.1f} ms  "
                    f"p95 {pct(d_lat, 0.95) * 1e3:7.1f} ms"
                )
                print(f"ratio docker/bwrap (p50): {pct(d_lat, 0.5) / pct(b_lat, 0.5):.1f}x (target >= 20x)")
            else:
                print("docker: no Docker API (set DOCKER_HOST or install podman as root); ratio not measured")
            wall = await concurrent(bw, small, k)
            print(
                f"bwrap   {k} concurrent sandboxes on {os.cpu_count()} cores: {wall * 1e3:.0f} ms wall "
                f"({k / wall:.0f} sandboxes/s)"
            )
            if url:
                wall_d = await concurrent(dk, small, k)
                print(
                    f"docker  {k} concurrent sandboxes: {wall_d * 1e3:.0f} ms wall ({k / wall_d:.1f} sandboxes/s); "
                    f"ratio {wall_d / wall:.1f}x"
                )
                await dk.aclose()
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
        inst = SweInstance(
            instance_id="bench",
            repo="bench",
            problem_statement="bench",
            patch="",
            FAIL_TO_PASS=["t"],
            snapshot=str(big),
        )
        env = SweEnv(instances=[inst])
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            env.reset_typed(task=inst.to_task())
            times.append(time.perf_counter() - t0)
        env.close()
        size = sum(p.stat().st_size for p in big.rglob("*") if p.is_file())
        print(
            f"swe-v0 reset, {size / 1e6:.1f} MB repository (bwrap): p50 {pct(times, 0.5) * 1e3:.1f} ms  "
            f"p95 {pct(times, 0.95) * 1e3:.1f} ms (target < 50 ms)"
        )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20, help="cycles per backend")
    ap.add_argument("--concurrent", type=int, default=32)
    args = ap.parse_args()
    asyncio.run(main(args.n, args.concurrent))
