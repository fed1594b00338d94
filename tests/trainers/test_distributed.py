"""Data-parallel training with 2 gloo processes gives the single-process gradient."""

import sys
from pathlib import Path

import pytest
import torch

from rubricgym.trainers.engine.distributed import shard
from tests.trainers.conftest import torchrun

HERE = Path(__file__).parent


def test_shard_deals_items_round_robin():
    assert shard(list(range(5)), 0, 2) == [0, 2, 4]
    assert shard(list(range(5)), 1, 2) == [1, 3]
    assert shard([1, 2], 0, 1) == [1, 2]


AGGREGATIONS = ["token-mean", "seq-mean"]


@pytest.fixture(scope="module")
def two_rank_gradients(tiny_model_dir, tmp_path_factory) -> dict:
    """Each aggregation's gradient from 2 gloo ranks, all from one torchrun launch (a launch costs ~10 s here)."""
    out = tmp_path_factory.mktemp("ddp") / "grads.pt"
    proc = torchrun([str(HERE / "ddp_worker.py"), str(tiny_model_dir), ",".join(AGGREGATIONS), str(out)])
    assert proc.returncode == 0, proc.stderr[-4000:]
    return torch.load(out)


@pytest.mark.slow
@pytest.mark.parametrize("aggregation", AGGREGATIONS)
def test_two_gloo_ranks_match_one_process(two_rank_gradients, tiny_model_dir, aggregation):
    sys.path.insert(0, str(HERE))
    from ddp_worker import gradients

    assert two_rank_gradients["world"] == 2
    got = two_rank_gradients["grads"][aggregation]
    single = gradients(str(tiny_model_dir), aggregation, distributed=False)
    assert set(single) == set(got)
    for name, g in single.items():
        torch.testing.assert_close(got[name], g, rtol=1e-4, atol=1e-6)  # float summation order
    assert any(g.abs().sum() > 0 for g in single.values())


@pytest.mark.slow
def test_torchrun_rubricgym_train_runs_data_parallel_and_ranks_stop_together(tiny_config, tmp_path):
    """The documented launch (``torchrun -m rubricgym train``) joins one process group (without it the gradient
    all_reduce is skipped and both ranks would silently train alone); both ranks run every step in lockstep, rank 0
    writes the checkpoints, rank 1 its own metrics."""
    import json

    from rubricgym.trainers.config import dump_config

    cfg = tiny_config(tmp_path / "run", steps=3, tasks_per_step=2, time_budget_s=1e7)
    dump_config(cfg, tmp_path / "train.yaml")
    proc = torchrun(["-m", "rubricgym", "train", "--config", str(tmp_path / "train.yaml"), "--no-live"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    main = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    other = [json.loads(line) for line in (tmp_path / "run" / "rank1" / "metrics.jsonl").read_text().splitlines()]
    train0 = [r for r in main if r["kind"] == "train"]
    train1 = [r for r in other if r["kind"] == "train"]
    assert [r["step"] for r in train0] == [r["step"] for r in train1] == [1, 2, 3]
    assert all(r["cursor"] == 2 * r["step"] for r in train0 + train1)  # both ranks walk the same data stream
    assert (tmp_path / "run" / "checkpoints").is_dir() and not (tmp_path / "run" / "rank1" / "checkpoints").exists()
