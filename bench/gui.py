"""GUI env memory and speed vs BrowserGym, in one run on this machine.

1. PSS per live instance: ``--instances`` live episodes of ``gui-v0`` (one shared Chromium, a context each) vs as
   many live ``browsergym.core`` envs (a browser per env, plus its chat browser) on the same page (our mail app).
   PSS of the browser side (the Playwright driver and every Chromium process) and of the whole process tree.
2. Reset latency: mean over ``--resets`` resets of a live instance, ours vs BrowserGym's.
3. Agent steps per second with 1, 2, 4, 8 and 16 concurrent episodes in one process (random clicks; each step is
   an action, a state read and an ARIA snapshot), to find the knee on this machine.

BrowserGym pins an old Playwright, so it runs in its own venv (``bench/.venv-browsergym``, created on first use
with ``pip install browsergym-core``; ``--browsergym-python`` points at another). Its Chromium is the same
Debian binary (``executable_path`` injected into its ``launch`` calls); ``slow_mo=0`` so it is not throttled.

    .venv/bin/python bench/gui.py [--instances 8] [--our-instances 32] [--resets 10] [--seconds 8] [--no-browsergym]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from rubricgym.core.rollout import rollout
from rubricgym.envs.gui.agents import RandomClicker
from rubricgym.envs.gui.env import APP_ROOT, GuiEnv
from rubricgym.envs.gui.pool import BrowserPool, find_chromium

BENCH = Path(__file__).resolve().parent
BG_VENV = BENCH / ".venv-browsergym"

WORKER = textwrap.dedent("""
    import json, sys, time
    from browsergym.core import _get_global_playwright
    pw = _get_global_playwright()
    launch = pw.chromium.launch
    def same_chromium(**kw):
        kw["executable_path"] = sys.argv[1]
        kw["args"] = [*kw.get("args", []), "--no-sandbox"]
        return launch(**kw)
    pw.chromium.launch = same_chromium
    from browsergym.core.env import BrowserEnv
    from browsergym.core.task import OpenEndedTask
    n, url, resets = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    envs = [BrowserEnv(task_entrypoint=OpenEndedTask, task_kwargs={"start_url": url, "goal": "read mail"},
                       headless=True, slow_mo=0) for _ in range(n)]
    for e in envs:
        e.reset(seed=0)
    times = []
    for i in range(resets):
        t = time.perf_counter(); envs[0].reset(seed=i); times.append(time.perf_counter() - t)
    print(json.dumps({"reset_s": times}), flush=True)
    sys.stdin.readline()  # live until the parent has measured memory
    for e in envs:
        e.close()
""")


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def pss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def memory(root: int) -> tuple[float, float]:
    """(browser-side PSS, whole-tree PSS) in MB for the process ``root``."""
    pids = tree(root)
    return pss_mb([p for p in pids if p != root]), pss_mb(pids)


def ours(instances: int, resets: int) -> dict[str, float]:
    pool = BrowserPool()
    envs = [GuiEnv(templates=["mail.archive"], pool=pool) for _ in range(instances)]
    envs[0].reset(seed=0)
    one = memory(os.getpid())
    for i, e in enumerate(envs[1:], 1):
        e.reset(seed=i)
    many = memory(os.getpid())
    times = []
    for i in range(resets):
        t = time.perf_counter()
        envs[0].reset(seed=100 + i)
        times.append(time.perf_counter() - t)
    for e in envs:
        e.close()
    pool.close()
    return {
        "browser_pss_per_instance": many[0] / instances,
        "tree_pss_per_instance": many[1] / instances,
        "marginal_pss": (many[0] - one[0]) / max(1, instances - 1),
        "reset_s": sum(times) / len(times),
    }


def browsergym_python(given: str | None) -> str:
    if given:
        return given
    py = BG_VENV / "bin" / "python"
    if not py.exists():
        print(f"creating {BG_VENV} with browsergym-core (its own Playwright) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(BG_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "browsergym-core"], check=True)
    return str(py)


def browsergym(python: str, instances: int, resets: int) -> dict[str, float]:
    url = (APP_ROOT / "mail" / "index.html").as_uri()
    proc = subprocess.Popen(
        [python, "-c", WORKER, find_chromium(), str(instances), url, str(resets)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the BrowserGym worker exited with {proc.wait()} (see its stderr above)")
        times = json.loads(line)["reset_s"]
        browser, whole = memory(proc.pid)
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return {
        "browser_pss_per_instance": browser / instances,
        "tree_pss_per_instance": whole / instances,
        "reset_s": sum(times) / len(times),
    }


async def steps_per_second(concurrency: int, seconds: float, pool: BrowserPool) -> float:
    envs = [GuiEnv(pool=pool, max_steps=12) for _ in range(concurrency)]
    tasks = envs[0].task_set(200, seed=concurrency)
    deadline = time.perf_counter() + seconds
    steps = 0

    async def worker(k: int) -> None:
        nonlocal steps
        i = k
        while time.perf_counter() < deadline:
            traj = await rollout(envs[k], RandomClicker(seed=i), tasks[i % len(tasks)], seed=i)
            steps += len(traj.steps)
            i += concurrency

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(concurrency)))
    rate = steps / (time.perf_counter() - t0)
    for e in envs:
        e.close()
    return rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=8, help="live instances of each side")
    ap.add_argument(
        "--our-instances",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[32],
        help="more live-instance counts for ours (one browser: the per-instance cost falls with more)",
    )
    ap.add_argument("--resets", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=8.0, help="time per concurrency level")
    ap.add_argument("--browsergym-python", default=None)
    ap.add_argument("--no-browsergym", action="store_true")
    args = ap.parse_args()

    runs = {n: ours(n, args.resets) for n in sorted({args.instances, *args.our_instances})}
    for n, a in runs.items():
        print(
            f"ours, {n} live instances: browser-side PSS {a['browser_pss_per_instance']:.0f} MB/instance (marginal "
            f"{a['marginal_pss']:.0f} MB), whole tree {a['tree_pss_per_instance']:.0f} MB/instance; reset "
            f"{a['reset_s'] * 1e3:.0f} ms",
            flush=True,
        )
    if not args.no_browsergym:
        b = browsergym(browsergym_python(args.browsergym_python), args.instances, args.resets)
        print(
            f"browsergym, {args.instances} live instances (a browser + a chat browser each, so per-instance cost "
            f"does not fall with more): browser-side PSS {b['browser_pss_per_instance']:.0f} MB/instance, whole "
            f"tree {b['tree_pss_per_instance']:.0f} MB/instance; reset {b['reset_s'] * 1e3:.0f} ms"
        )
        for n, a in runs.items():
            print(
                f"ratio at {n} instances: {b['browser_pss_per_instance'] / a['browser_pss_per_instance']:.1f}x less "
                f"browser memory per instance (marginal {b['browser_pss_per_instance'] / a['marginal_pss']:.1f}x; "
                f"target >= 8x), {b['reset_s'] / a['reset_s']:.1f}x faster reset (target >= 7x)"
            )
    pool = BrowserPool()
    for c in (1, 2, 4, 8, 16):
        rate = asyncio.run(steps_per_second(c, args.seconds, pool))
        print(f"{c:2d} concurrent episodes: {rate:.1f} agent steps/s", flush=True)
    pool.close()


if __name__ == "__main__":
    main()
