"""The viewer on a 10,000-episode run: time to the first page of the episode table and to one episode, and the
process's peak RSS, so reading stays lazy (the issue's bar: first page < 1 s on a 2-core machine).

    python bench/viewer.py [--episodes 10000] [--dir /tmp/rubricgym-viewer-bench]

The run is built from real toy trajectories (an oracle and a random agent, scored by ``rubricgym score``),
copied with fresh ids to the requested count. The first page and an episode are fetched through the FastAPI app
(Starlette's test client, no network); a filtered page (which summarises every line once) is timed too.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

from typer.testing import CliRunner


def build(root: Path, episodes: int) -> Path:
    from rubricgym.cli import app

    seed = root / "seed"
    if not (seed / "scores.jsonl").exists():
        lines = []
        for agent in ("oracle", "random"):
            out = root / f"seed-{agent}"
            r = CliRunner().invoke(
                app, ["run", "toy-calculator-v0", "--out", str(out), "--agent", agent, "--tasks", "20"]
            )
            assert r.exit_code == 0, r.output
            lines += (out / "trajectories.jsonl").read_text().splitlines()
        seed.mkdir(exist_ok=True)
        (seed / "trajectories.jsonl").write_text("\n".join(lines) + "\n")
        r = CliRunner().invoke(app, ["score", str(seed)])
        assert r.exit_code == 0, r.output
    run = root / f"run-{episodes}"
    if (run / "trajectories.jsonl").exists():
        return run
    run.mkdir()
    trajs = (seed / "trajectories.jsonl").read_text().splitlines()
    scores = {json.loads(s)["trajectory_id"]: json.loads(s) for s in (seed / "scores.jsonl").read_text().splitlines()}
    with (run / "trajectories.jsonl").open("w") as tf, (run / "scores.jsonl").open("w") as sf:
        for k in range(episodes):
            d = json.loads(trajs[k % len(trajs)])
            s = dict(scores[d["id"]])
            d["id"] = s["trajectory_id"] = f"bench-{k:06d}"
            tf.write(json.dumps(d) + "\n")
            sf.write(json.dumps(s) + "\n")
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=10_000)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/rubricgym-viewer-bench"))
    args = ap.parse_args()
    if args.episodes < 1:
        sys.exit("--episodes must be at least 1")
    args.dir.mkdir(parents=True, exist_ok=True)
    run = build(args.dir, args.episodes)
    size = (run / "trajectories.jsonl").stat().st_size + (run / "scores.jsonl").stat().st_size
    from fastapi.testclient import TestClient

    from rubricgym.viewer.app import create_app

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0, c0 = time.perf_counter(), time.process_time()
    client = TestClient(create_app(run))
    t_app = time.perf_counter() - t0
    first = client.get("/r/run/episodes")
    t_first, c_first = time.perf_counter() - t0, time.process_time() - c0
    assert first.status_code == 200 and f"{args.episodes} episode(s)" in first.text, first.text[:300]
    t0 = time.perf_counter()
    assert client.get("/r/run/episodes?page=2").status_code == 200
    t_second = time.perf_counter() - t0
    t0 = time.perf_counter()
    ep = client.get(f"/r/run/ep/0/{args.episodes - 1}")
    t_episode = time.perf_counter() - t0
    assert ep.status_code == 200
    rss_lazy = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    filtered = client.get("/r/run/episodes?outcome=unsolved&sort=total")
    t_filter = time.perf_counter() - t0
    assert filtered.status_code == 200
    rss_all = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} cores, load average {load:.1f} (wall times grow with load; CPU times less)")
    print(f"run: {args.episodes} episodes, {size / 2**20:.0f} MiB of JSONL ({run})")
    print(f"app start (find the run):                        {t_app * 1000:.0f} ms")
    print(f"first page (app start + line offsets + 50 rows): {t_first * 1000:.0f} ms ({c_first * 1000:.0f} ms CPU)")
    print(f"next page (templates compiled, offsets known):   {t_second * 1000:.0f} ms")
    print(f"one episode page (the last line):                {t_episode * 1000:.0f} ms")
    print(f"filtered + sorted page (summarises every line):  {t_filter * 1000:.0f} ms")
    print(
        f"peak RSS: {rss0:.0f} MiB after imports, {rss_lazy:.0f} MiB after first page + episode, "
        f"{rss_all:.0f} MiB after the filter"
    )


if __name__ == "__main__":
    main()
