"""A learner of 2 ranks beside one Ray pool: launched by torchrun with ``ray: true`` (``engine/ray_ranks.py``), or
placed by Ray itself (``ray_learners: 2``, ``trainers/ray_learners.py``). Rank 0's actors play both ranks' groups,
and the run trains as the same 2 ranks do with in-process rollouts."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainers.conftest import torchrun

pytest.importorskip("ray")
HERE = Path(__file__).parent
TIMINGS = ("elapsed_s", "weight_push_s", "ray_restarts", "episode_p50_s", "episode_p99_s", "episode_max_s")
COMMON = {"steps": 2, "tasks_per_step": 2, "group_size": 2, "time_budget_s": 1e7}


def _records(run: Path) -> dict[str, list[dict]]:
    out = {}
    for rank, path in (("rank0", run / "metrics.jsonl"), ("rank1", run / "rank1" / "metrics.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        out[rank] = [{k: v for k, v in r.items() if not k.endswith("_s") and k not in TIMINGS} for r in rows]
    return out


@pytest.fixture(scope="module")
def in_process(tiny_model_dir, tmp_path_factory) -> dict[str, list[dict]]:
    """The metrics of 2 torchrun ranks with in-process rollouts (what both Ray layouts must reproduce)."""
    from rubricgym.trainers.config import TrainConfig, dump_config

    tmp = tmp_path_factory.mktemp("in-process")
    cfg = TrainConfig.model_validate(_config(tiny_model_dir, tmp / "run"))
    dump_config(cfg, tmp / "train.yaml")
    proc = torchrun(["-m", "rubricgym", "train", "--config", str(tmp / "train.yaml"), "--no-live"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _records(tmp / "run")


def _config(model_dir: Path, run_dir: Path, **over) -> dict:
    return {
        "run_dir": str(run_dir),
        "save_every": 1,
        "live": False,
        "model": {"name": str(model_dir)},
        "generation": {"max_new_tokens": 6, "temperature": 1.0},
        "env": {"kwargs": {"min_ops": 1, "max_ops": 1, "max_steps": 2}, "train_tasks": 8, "eval_tasks": 2},
        "optim": {"lr": 1e-3},
        **COMMON,
        **over,
    }


def _check_same_run(got: dict[str, list[dict]], want: dict[str, list[dict]]) -> None:
    for rank in ("rank0", "rank1"):
        train = [r for r in got[rank] if r["kind"] == "train"]
        assert [r["step"] for r in train] == [1, 2] and all(r["tokens"] > 0 for r in train)
        # the same rollouts (tokens, rewards), the same summed-gradient update (loss, grad norm) as in-process
        assert got[rank] == want[rank]


@pytest.mark.slow
def test_two_torchrun_ranks_share_rank_zeros_ray_pool(tiny_model_dir, tmp_path, in_process):
    from rubricgym.trainers.config import TrainConfig, dump_config

    cfg = TrainConfig.model_validate(_config(tiny_model_dir, tmp_path / "ray", ray=True, ray_workers=2))
    dump_config(cfg, tmp_path / "ray.yaml")
    proc = torchrun([str(HERE / "ray_ranks_worker.py"), str(tmp_path / "ray.yaml"), str(tmp_path)], timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]

    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [s["world"] for s in seen] == [2, 2] and {s["backend"] for s in seen} == {"RankedPool"}
    # a collection after rank 0's pool closed fails on both ranks (rank 1 is not left waiting for its groups)
    assert all("rollout pool is closed" in s["error"] for s in seen)
    _check_same_run(_records(tmp_path / "ray"), in_process)
    assert (tmp_path / "ray" / "checkpoints").is_dir() and not (tmp_path / "ray" / "rank1" / "checkpoints").exists()


@pytest.mark.slow
def test_ray_places_two_learner_ranks_beside_the_rollout_pool(tiny_model_dir, tmp_path, in_process):
    """One command, no torchrun: ``rubricgym train`` with ``ray_learners: 2`` starts both ranks as Ray actors."""
    from rubricgym.trainers.config import TrainConfig, dump_config

    over = {"ray": True, "ray_workers": 2, "ray_learners": 2}
    cfg = TrainConfig.model_validate(_config(tiny_model_dir, tmp_path / "placed", **over))
    dump_config(cfg, tmp_path / "placed.yaml")
    cmd = [sys.executable, "-m", "rubricgym", "train", "--config", str(tmp_path / "placed.yaml"), "--no-live"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "gain:" in proc.stdout and "report:" in proc.stdout  # rank 0's summary, printed by the driver
    _check_same_run(_records(tmp_path / "placed"), in_process)
    assert (tmp_path / "placed" / "checkpoints").is_dir()


@pytest.mark.parametrize(
    ("over", "says"),
    [
        ({"ray_learners": 2}, "set ray: true"),
        ({"ray": True, "ray_learners": 2, "guidance": {}}, "guidance"),
        ({"ray": True, "ray_learners": 2, "async": {"enabled": True}}, "async"),
        ({"ray": True, "ray_learners": 0}, "ray_learners"),
    ],
)
def test_ray_learners_refuses_what_it_cannot_run_before_anything_loads(over, says):
    from rubricgym.trainers.config import ConfigError, validate_config

    with pytest.raises(ConfigError, match=says):
        validate_config(over)
