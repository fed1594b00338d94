"""Sandbox latency: bwrap vs a container backend (podman's Docker API), measured in the same run.

Both sides run interleaved: each round times ``--n`` create+exec+destroy cycles per backend (a small repository,
the command ``true``), one cycle of each side in turn (which side goes first alternates), so both sample the same
stretch of a load that comes and goes on a shared machine; with ``--concurrent K`` each round then starts K
cycles at once per side. Per side it prints the median over rounds of each round's median, with the rounds' min
and max, the bwrap side's CPU time per cycle (this process with its threads, and its children: every process
bwrap starts), the ratio of medians docker/bwrap against the target (>= 20x) and whether it is met. Then the
``swe-v0`` reset time for a 2 MB repository (bwrap only). The container backend uses ``DOCKER_HOST`` when set;
otherwise, as root with podman installed, a podman service is started on a temporary socket for the run (and
stopped).

    .venv/bin/python bench/sandbox.py [--rounds 5] [--n 10] [--concurrent 32]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from rubricgym.envs.swe import SweEnv, SweInstance
from rubricgym.envs.swe.sandbox import BwrapBackend, DockerBackend, SandboxBackend

TARGET = 20.0
CONF = (
    '[containers]\ndefault_ulimits = ["nofile=16384:16384", "nproc=16384:16384"]\n\n[engine]\nruntime = "runc"\n'
    'exit_command_delay = 5\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
)


def make_repo(root: Path, files: int, size: int) -> Path:
    for i in range(files):
        p = root / f"pkg{i % 10}" / f"mod{i}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(("x = 1  # padding line\n" * (size // 22 + 1))[:size])
    return root


def cpu_s() -> float:
    """CPU seconds of this process and its waited-for children (every sandboxed process of bwrap)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


async def cycle(backend: SandboxBackend, repo: Path) -> float:
    t0 = time.perf_counter()
    sb = await backend.create(repo)
    res = await sb.exec("true")
    await sb.destroy()
    assert res.exit_code == 0, res.describe()
    return time.perf_counter() - t0


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
        cwd=tmp,  # conmon writes an `oom` marker file into the service's working directory
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


def spread(xs: list[float], scale: float = 1e3, unit: str = "ms") -> str:
    return f"median {statistics.median(xs) * scale:8.1f} {unit}  (min {min(xs) * scale:.1f}, max {max(xs) * scale:.1f})"


async def rounds(sides: dict[str, SandboxBackend], repo: Path, n_rounds: int, n: int, k: int) -> None:
    lat: dict[str, list[float]] = {s: [] for s in sides}
    cpu: list[float] = []
    wall: dict[str, list[float]] = {s: [] for s in sides}
    for b in sides.values():
        await cycle(b, repo)  # warm-up: runtime dir, images, the first sweep
    for r in range(n_rounds):
        walls: dict[str, list[float]] = {s: [] for s in sides}
        bwrap_cpu = 0.0
        for i in range(n):  # one cycle per side in turn, the first side alternating: both span the same time
            for name in list(sides) if (r * n + i) % 2 == 0 else list(reversed(sides)):
                c0 = cpu_s()
                walls[name].append(await cycle(sides[name], repo))
                if name == "bwrap":
                    bwrap_cpu += cpu_s() - c0
        for name in sides:
            lat[name].append(statistics.median(walls[name]))
        cpu.append(bwrap_cpu / n)
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for name in order if k else []:
            wall[name].append(await concurrent(sides[name], repo, k))
        print(f"  round {r + 1}/{n_rounds}: " + "  ".join(f"{s} {lat[s][-1] * 1e3:.1f} ms" for s in sides), flush=True)
    print(f"create+exec+destroy, {n_rounds} rounds x {n} cycles per side (median of the round medians):")
    for s in sides:
        extra = (
            f"  CPU/cycle {statistics.median(cpu) * 1e3:.1f} ms (this process, its threads, its children)"
            if s == "bwrap"
            else ""
        )
        print(f"  {s:7s} {spread(lat[s])}{extra}")
    if "docker" in sides:
        ratios = [d / b for d, b in zip(lat["docker"], lat["bwrap"], strict=True)]
        ratio = statistics.median(lat["docker"]) / statistics.median(lat["bwrap"])
        print(f"  ratio docker/bwrap of medians: {ratio:.1f}x (rounds: min {min(ratios):.1f}x, max {max(ratios):.1f}x)")
        print(f"  target: >= {TARGET:g}x  -> {'MET' if ratio >= TARGET else 'NOT MET'}")
    else:
        print("  docker: no Docker API (set DOCKER_HOST or install podman as root); ratio not measured")
    if k:
        print(f"{k} concurrent sandboxes on {os.cpu_count()} cores, {n_rounds} rounds:")
        for s in sides:
            print(f"  {s:7s} wall {spread(wall[s])}  ({k / statistics.median(wall[s]):.1f} sandboxes/s)")
        if "docker" in sides:
            ratio = statistics.median(wall["docker"]) / statistics.median(wall["bwrap"])
            print(f"  ratio docker/bwrap of medians: {ratio:.1f}x")


def reset_times(big: Path, n: int) -> list[float]:
    inst = SweInstance(
        instance_id="bench", repo="bench", problem_statement="bench", patch="", FAIL_TO_PASS=["t"], snapshot=str(big)
    )
    env = SweEnv(instances=[inst])
    times = []
    for _ in range(n + 1):
        t0 = time.perf_counter()
        env.reset_typed(task=inst.to_task())
        times.append(time.perf_counter() - t0)
    env.close()
    return times[1:]


async def main(n_rounds: int, n: int, k: int) -> None:
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        small = make_repo(tmp / "small", 20, 1000)
        big = make_repo(tmp / "big", 200, 10_000)  # 2 MB
        sides: dict[str, SandboxBackend] = {"bwrap": BwrapBackend()}
        proc, url = start_podman(tmp)
        try:
            if url:
                sides["docker"] = DockerBackend(base_url=url)
            await rounds(sides, small, n_rounds, n, k)
            for b in sides.values():
                await b.aclose()
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
        times = reset_times(big, n)
        size = sum(p.stat().st_size for p in big.rglob("*") if p.is_file())
        print(f"swe-v0 reset, {size / 1e6:.1f} MB repository (bwrap), {n} resets: {spread(times)} (target < 50 ms)")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    ap.add_argument("--n", type=int, default=10, help="serial cycles per backend per round")
    ap.add_argument("--concurrent", type=int, default=32, help="sandboxes started at once per round (0: skip)")
    args = ap.parse_args()
    asyncio.run(main(args.rounds, args.n, args.concurrent))
