"""GUI env memory and reset speed vs BrowserGym, the two sides interleaved over rounds on this machine.

1. Memory per live instance: ``--instances`` live episodes of ``gui-v0`` (one shared Chromium, a page each) vs as
   many live ``browsergym.core`` envs (a browser per env, plus its chat browser) on the same page (our mail app).
   The judged figure is the physical memory of the browser side (the Playwright driver and every Chromium
   process): each page counted once however many of its processes map it (``/proc/PID/pagemap``; needs root). PSS
   is printed beside it; it moves with whatever else on the machine maps the same Chromium binary.
2. Reset latency at ``--instances`` and ``--our-instances`` live episodes, the reset of one live episode
   ``--resets`` times: paced (``--think`` seconds between resets, as an agent's first action takes) and back to
   back. BrowserGym relaunches its browser at every reset, so its reset does not depend on how many are live; it
   runs at ``--instances`` (32 of them would need ~11 GB).
3. Agent steps per second with 1, 2, 4, 8 and 16 concurrent episodes in one process (random clicks), ours only.

Each round runs ours and BrowserGym's alternately (the order flips every round); the figures are the median over
rounds of each round's median, with min and max, and ratios of medians. On a loaded machine (others' jobs share
the cores) latencies move together: read the ratios.

BrowserGym pins an old Playwright, so it runs in its own venv (``bench/.venv-browsergym``, created on first use
with ``pip install browsergym-core``; ``--browsergym-python`` points at another). Its Chromium is the same
Debian binary (``executable_path`` injected into its ``launch`` calls); ``slow_mo=0`` so it is not throttled. That
binary is the pool's choice (the headless shell when ``chromium-headless-shell`` is installed: the old headless
mode that BrowserGym's Playwright 1.44 runs with its own Chromium) or ``--chromium``. The last round's memory is
also printed by kind of process (driver, browser, renderer, zygote, GPU, utility), as PSS.

    .venv/bin/python bench/gui.py [--rounds 3] [--instances 8] [--our-instances 32] [--resets 8] [--think 0.5]
                                  [--seconds 4] [--chromium PATH] [--no-browsergym]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

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
    n, url, resets, think = int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    envs = [BrowserEnv(task_entrypoint=OpenEndedTask, task_kwargs={"start_url": url, "goal": "read mail"},
                       headless=True, slow_mo=0) for _ in range(n)]
    for e in envs:
        e.reset(seed=0)
    paced, back = [], []
    for i in range(resets):
        time.sleep(think)
        t = time.perf_counter(); envs[i % n].reset(seed=i); paced.append(time.perf_counter() - t)
    for i in range(resets):
        t = time.perf_counter(); envs[i % n].reset(seed=i); back.append(time.perf_counter() - t)
    print(json.dumps({"paced": paced, "back_to_back": back}), flush=True)
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


def unique_mb(pids: list[int]) -> float:
    """Physical memory mapped by any of ``pids``, each page counted once (resident pages' frame numbers from
    ``/proc/PID/pagemap``); NaN without the privilege to read frame numbers."""
    frames = []
    for pid in pids:
        try:
            smaps = Path(f"/proc/{pid}/smaps").read_text()
            pagemap = open(f"/proc/{pid}/pagemap", "rb")  # noqa: SIM115 - closed below
        except OSError:
            continue
        with pagemap:
            start = end = 0
            for line in smaps.splitlines():
                head = line.split(None, 1)[0]
                if "-" in head and not head.endswith(":"):
                    a, b = head.split("-")
                    start, end = int(a, 16), int(b, 16)
                elif head == "Rss:" and int(line.split()[1]) > 0:
                    pagemap.seek(start // 4096 * 8)
                    entries = np.frombuffer(pagemap.read((end - start) // 4096 * 8), dtype=np.uint64)
                    present = entries[(entries >> np.uint64(63)) == 1] & np.uint64((1 << 55) - 1)
                    frames.append(present)
    if not frames:
        return float("nan")
    pfns = np.concatenate(frames)
    if pfns.size and not pfns.any():  # frame numbers hidden (not root): every entry reads 0
        return float("nan")
    return len(np.unique(pfns)) * 4096 / 2**20


def kind(pid: int) -> str:
    """What a browser-side process is: Playwright's Node driver, Chromium's browser process, or Chromium's
    ``--type`` (a utility process by its service)."""
    try:  # Chromium rewrites its children's argv into one space-separated string
        args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").split()
    except OSError:
        return "gone"
    if not args:
        return "?"
    if Path(args[0]).name.startswith("node"):
        return "driver (node)"
    types = [a.split("=", 1)[1] for a in args if a.startswith(("--type=", "--utility-sub-type="))]
    return " ".join(t.rsplit(".", 1)[-1] for t in types) or "browser"


Split = dict[str, tuple[int, float]]


def split(root: int) -> Split:
    """The browser side of ``root`` by kind of process: how many, and their PSS in MB."""
    out: Split = {}
    for pid in tree(root):
        if pid != root:
            n, mb = out.get(kind(pid), (0, 0.0))
            out[kind(pid)] = (n + 1, mb + pss_mb([pid]))
    return out


def memory(root: int) -> dict[str, float]:
    """Browser-side memory in MB of the process ``root``: its descendants' unique pages and their PSS."""
    pids = [p for p in tree(root) if p != root]
    return {"unique": unique_mb(pids), "pss": pss_mb(pids)}


def reset_times(envs: list[GuiEnv], resets: int, think: float, seed: int) -> dict[str, list[float]]:
    paced, back = [], []
    for i in range(resets):
        time.sleep(think)
        t = time.perf_counter()
        envs[i % len(envs)].reset(seed=seed + i)
        paced.append(time.perf_counter() - t)
    for i in range(resets):
        t = time.perf_counter()
        envs[i % len(envs)].reset(seed=seed + resets + i)
        back.append(time.perf_counter() - t)
    return {"paced": paced, "back_to_back": back}


def ours(instances: int, resets: int, think: float, chromium: str) -> tuple[dict[str, float], Split]:
    pool = BrowserPool(chromium)
    envs = [GuiEnv(templates=["mail.archive"], pool=pool) for _ in range(instances)]
    envs[0].reset(seed=0)
    one = memory(os.getpid())
    for i, e in enumerate(envs[1:], 1):
        e.reset(seed=i)
    many = memory(os.getpid())
    parts = split(os.getpid())
    times = reset_times(envs, resets, think, 100)
    for e in envs:
        e.close()
    pool.close()
    return {
        "unique": many["unique"] / instances,
        "pss": many["pss"] / instances,
        "marginal": (many["unique"] - one["unique"]) / max(1, instances - 1),
        "paced": statistics.median(times["paced"]),
        "back_to_back": statistics.median(times["back_to_back"]),
    }, parts


def browsergym_python(given: str | None) -> str:
    if given:
        return given
    py = BG_VENV / "bin" / "python"
    if not py.exists():
        print(f"creating {BG_VENV} with browsergym-core (its own Playwright) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(BG_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "browsergym-core"], check=True)
    return str(py)


def browsergym(python: str, instances: int, resets: int, think: float, chromium: str) -> tuple[dict[str, float], Split]:
    url = (APP_ROOT / "mail" / "index.html").as_uri()
    proc = subprocess.Popen(
        [python, "-c", WORKER, chromium, str(instances), url, str(resets), str(think)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # it warns about slow_mo at every reset
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    try:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the BrowserGym worker exited with {proc.wait()} (run it by hand to see why)")
        times = json.loads(line)
        mem = memory(proc.pid)
        parts = split(proc.pid)
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return {
        "unique": mem["unique"] / instances,
        "pss": mem["pss"] / instances,
        "paced": statistics.median(times["paced"]),
        "back_to_back": statistics.median(times["back_to_back"]),
    }, parts


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


def spread(values: list[float], scale: float = 1.0, fmt: str = ".0f") -> str:
    """``median [min, max]`` of ``values`` (times ``scale``)."""
    v = [x * scale for x in values]
    return f"{statistics.median(v):{fmt}} [{min(v):{fmt}}, {max(v):{fmt}}]"


def ratios(mine: dict[int, list[dict[str, float]]], theirs: list[dict[str, float]], instances: int) -> None:
    """BrowserGym's medians over ours, and the targets."""

    def med(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median(x[key] for x in runs)

    print("\nratios of medians (browsergym / ours):")
    for n in mine:
        mem = med(theirs, "unique") / med(mine[n], "unique")
        paced = med(theirs, "paced") / med(mine[n], "paced")
        back = med(theirs, "back_to_back") / med(mine[n], "back_to_back")
        print(
            f"  {n} live: memory {mem:.1f}x (PSS {med(theirs, 'pss') / med(mine[n], 'pss'):.1f}x), reset paced "
            f"{paced:.1f}x, back to back {back:.1f}x"
        )
    print("targets:")
    mem8 = med(theirs, "unique") / med(mine[instances], "unique")
    print(f"  memory >= 8x at {instances} live: {mem8:.1f}x {'met' if mem8 >= 8 else 'NOT met'}")
    for n in mine:
        paced = med(theirs, "paced") / med(mine[n], "paced")
        print(f"  reset >= 7x at {n} live (paced): {paced:.1f}x {'met' if paced >= 7 else 'NOT met'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds, each running both sides")
    ap.add_argument("--instances", type=int, default=8, help="live instances of each side")
    ap.add_argument(
        "--our-instances",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[32],
        help="more live-instance counts for ours (one browser: the per-instance cost falls with more)",
    )
    ap.add_argument("--resets", type=int, default=8, help="resets timed per round and pace")
    ap.add_argument("--think", type=float, default=0.5, help="seconds between paced resets (an agent's first action)")
    ap.add_argument("--seconds", type=float, default=4.0, help="time per concurrency level (0: skip steps/s)")
    ap.add_argument(
        "--chromium",
        default=None,
        help="the Chromium binary both sides run (default: the pool's choice, the headless shell when installed)",
    )
    ap.add_argument("--browsergym-python", default=None)
    ap.add_argument("--no-browsergym", action="store_true")
    args = ap.parse_args()

    counts = sorted({args.instances, *args.our_instances})
    chromium = find_chromium(args.chromium)
    print(f"both sides run {chromium}", flush=True)
    parts: dict[str, Split] = {}
    python = None if args.no_browsergym else browsergym_python(args.browsergym_python)
    mine: dict[int, list[dict[str, float]]] = {n: [] for n in counts}
    theirs: list[dict[str, float]] = []
    for r in range(args.rounds):
        sides = ["ours", "browsergym"] if r % 2 == 0 else ["browsergym", "ours"]
        for side in sides:
            if side == "ours":
                for n in counts:
                    stats, parts[f"ours, {n} live"] = ours(n, args.resets, args.think, chromium)
                    mine[n].append(stats)
            elif python is not None:
                stats, parts[f"browsergym, {args.instances} live"] = browsergym(
                    python, args.instances, args.resets, args.think, chromium
                )
                theirs.append(stats)
        print(f"round {r + 1}/{args.rounds} done", flush=True)

    print(f"\n{args.rounds} rounds, median [min, max] over rounds; memory in MB per live instance, reset in ms")
    print(f"{'side':28s} {'memory (unique)':>18s} {'memory (PSS)':>16s} {'reset paced':>16s} {'back to back':>16s}")
    rows = [(f"ours, {n} live", mine[n]) for n in counts]
    if theirs:
        rows.append((f"browsergym, {args.instances} live", theirs))
    for name, runs in rows:
        print(
            f"{name:28s} {spread([x['unique'] for x in runs]):>18s} {spread([x['pss'] for x in runs]):>16s} "
            f"{spread([x['paced'] for x in runs], 1e3):>16s} {spread([x['back_to_back'] for x in runs], 1e3):>16s}"
        )
    for n in counts:
        print(f"ours, {n} live: marginal memory per extra instance {spread([x['marginal'] for x in mine[n]])} MB")
    print("\nby process, last round (PSS in MB, x how many processes):")
    for name, by_kind in parts.items():
        cells = sorted(by_kind.items(), key=lambda kv: -kv[1][1])
        print(f"  {name}: " + ", ".join(f"{k} {mb:.0f}" + (f" x{n}" if n > 1 else "") for k, (n, mb) in cells))
    if theirs:
        ratios(mine, theirs, args.instances)
    if args.seconds > 0:
        pool = BrowserPool(chromium)
        for c in (1, 2, 4, 8, 16):
            rate = asyncio.run(steps_per_second(c, args.seconds, pool))
            print(f"{c:2d} concurrent episodes: {rate:.1f} agent steps/s", flush=True)
        pool.close()


if __name__ == "__main__":
    main()
