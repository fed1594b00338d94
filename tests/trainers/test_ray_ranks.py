"""A learner of 2 torchrun ranks beside one Ray pool (``ray: true`` under torchrun, ``trainers/ray_ranks.py``):
rank 0's actors play both ranks' groups, and the run trains as the same 2 ranks do with in-process rollouts."""

import json
from pathlib import Path

import pytest

from tests.trainers.conftest import torchrun

pytest.importorskip("ray")
HERE = Path(__file__).parent
TIMINGS = ("elapsed_s", "weight_push_s", "ray_restarts", "episode_p50_s", "episode_p99_s", "episode_max_s")


def _records(run: Path) -> dict[str, list[dict]]:
    out = {}
    for rank, path in (("rank0", run / "metrics.jsonl"), ("rank1", run / "rank1" / "metrics.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        out[rank] = [{k: v for k, v in r.items() if not k.endswith("_s") and k not in TIMINGS} for r in rows]
    return out


@pytest.mark.slow
def test_two_learner_ranks_share_rank_zeros_ray_pool(tiny_config, tmp_path):
    from rubricgym.trainers.config import dump_config

    common = {"steps": 2, "tasks_per_step": 2, "group_size": 2, "time_budget_s": 1e9}
    local = tiny_config(tmp_path / "local", **common)
    pooled = tiny_config(tmp_path / "ray", ray=True, ray_workers=2, **common)
    dump_config(local, tmp_path / "local.yaml")
    dump_config(pooled, tmp_path / "ray.yaml")
    proc = torchrun(["-m", "rubricgym", "train", "--config", str(tmp_path / "local.yaml"), "--no-live"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = torchrun([str(HERE / "ray_ranks_worker.py"), str(tmp_path / "ray.yaml"), str(tmp_path)], timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]

    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [s["world"] for s in seen] == [2, 2] and {s["backend"] for s in seen} == {"RankedPool"}
    # a collection after rank 0's pool closed fails on both ranks (rank 1 is not left waiting for its groups)
    assert all("rollout pool is closed" in s["error"] for s in seen)

    want, got = _records(tmp_path / "local"), _records(tmp_path / "ray")
    for rank in ("rank0", "rank1"):
        train = [r for r in got[rank] if r["kind"] == "train"]
        assert [r["step"] for r in train] == [1, 2] and all(r["tokens"] > 0 for r in train)
        # the same rollouts (tokens, rewards), the same summed-gradient update (loss, grad norm) as in-process
        assert got[rank] == want[rank]
    assert (tmp_path / "ray" / "checkpoints").is_dir() and not (tmp_path / "ray" / "rank1" / "checkpoints").exists()
