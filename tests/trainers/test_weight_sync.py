"""Weight sync by collective (``trainers/engine/weight_sync.py``): a rollout worker process with its own copy of the
policy receives the learner's weights over gloo and then samples exactly the learner's tokens; a model that does
not fit is refused on both sides before anything is written; a peer that never joins, dies or never sends raises
``WeightSyncTimeout`` instead of hanging."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rubricgym.trainers.config import LoraConfig
from rubricgym.trainers.engine.lora import add_adapters
from rubricgym.trainers.engine.policy import TrainingPolicy
from rubricgym.trainers.engine.weight_sync import (
    TensorMeta,
    WeightSync,
    WeightSyncMismatch,
    WeightSyncTimeout,
    plan_buckets,
    sync_tensors,
)
from tests.trainers.conftest import torchrun

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from sync_worker import LORA, PROMPT  # noqa: E402


def _address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def start_worker(scenario: str, address: str, model_dir: Path, out: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(HERE.parents[1])}
    cmd = [sys.executable, str(HERE / "sync_worker.py"), scenario, address, str(model_dir), str(out)]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(worker: subprocess.Popen, out: Path) -> dict:
    log, _ = worker.communicate(timeout=120)
    assert worker.returncode == 0, log[-4000:]
    return json.loads(out.read_text())


def sample(policy: TrainingPolicy) -> list[int]:
    return asyncio.run(policy.episode(None, seed=11).generate(PROMPT)).completion_ids  # type: ignore[union-attr]


def optimizer_step(lm: torch.nn.Module, seed: int) -> None:
    """One AdamW step on a next-token loss over random tokens (what an update does to the trainable weights)."""
    params = [p for p in lm.parameters() if p.requires_grad]
    ids = torch.randint(0, 1000, (2, 12), generator=torch.Generator().manual_seed(seed))
    lm.train()
    lm(input_ids=ids, labels=ids).loss.backward()
    torch.optim.AdamW(params, lr=0.05).step()
    lm.zero_grad(set_to_none=True)
    lm.eval()


def test_buckets_hold_one_dtype_each_and_are_sent_as_soon_as_full():
    f32, bf16 = "float32", "bfloat16"
    metas = [  # bytes: 40, 40, 20, 80, 20, 40
        TensorMeta(name="a", shape=(10,), dtype=f32),
        TensorMeta(name="b", shape=(10,), dtype=f32),
        TensorMeta(name="c", shape=(10,), dtype=bf16),
        TensorMeta(name="d", shape=(4, 5), dtype=f32),
        TensorMeta(name="e", shape=(10,), dtype=bf16),
        TensorMeta(name="f", shape=(10,), dtype=f32),
    ]
    # 100-byte buckets: a+b (80) cannot take d (80) -> [a, b] emitted at d; d+f = 120 > 100 -> [d] at f;
    # what is left open follows in order of its first tensor: bf16 [c, e] (from index 2), then f32 [f]
    assert plan_buckets(metas, 100) == [[0, 1], [3], [2, 4], [5]]
    assert plan_buckets(metas, 1) == [[0], [1], [2], [3], [4], [5]]  # each alone (larger than a bucket), in order
    assert plan_buckets(metas, 10**6) == [[0, 1, 3, 5], [2, 4]]


def test_sync_tensors_are_the_trainable_ones_or_all_with_tied_weights_once(tiny_model_dir):
    lm = TrainingPolicy(str(tiny_model_dir)).load().lm
    names = [n for n, _ in sync_tensors(lm, trainable_only=False)]
    assert "model.embed_tokens.weight" in names and "lm_head.weight" not in names  # tied: sent once
    assert len(names) == len(set(names)) == len(list(lm.parameters()))
    add_adapters(lm, LoraConfig(**LORA), seed=0)
    trainable = [n for n, _ in sync_tensors(lm, trainable_only=True)]
    assert trainable and all(".lora_" in n for n in trainable)
    assert len(trainable) == 2 * 2 * len(LoraConfig().target_modules)  # A and B, per target, per layer (2)


@pytest.fixture(scope="module")
def exchange(tiny_model_dir, tmp_path_factory):
    """One learner (this process) and one rollout worker process (sync_worker.py ``rollout``): two updates of the
    whole model, each synced in 10 KiB buckets (several per sync); then LoRA adapters, whose first sync the
    worker refuses (it has none yet) and whose second it takes. The worker had sampled before the first sync, so
    its packed sampling weights were built from the old weights."""
    address, out = _address(), tmp_path_factory.mktemp("sync") / "worker.json"
    worker = start_worker("rollout", address, tiny_model_dir, out)
    policy = TrainingPolicy(str(tiny_model_dir), temperature=1.0, max_new_tokens=8).load()
    learner: dict = {"before": sample(policy), "tokens": [], "reports": []}
    sync = WeightSync.connect(address, 0, 2, timeout_s=60)
    for version in (1, 2):
        optimizer_step(policy.lm, seed=version)
        policy.release_packed()
        learner["tokens"].append(sample(policy))
        learner["reports"].append(sync.send(policy.lm, version, bucket_mb=0.01))
    learner["full_bytes"] = sum(p.numel() * 4 for p in policy.lm.parameters())
    learner["full_tensors"] = len(list(policy.lm.parameters()))
    add_adapters(policy.lm, LoraConfig(**LORA), seed=0)
    optimizer_step(policy.lm, seed=3)  # lora_B leaves zero: the adapted policy differs from the base
    policy.release_packed()
    learner["tokens"].append(sample(policy))
    with pytest.raises(WeightSyncMismatch) as refused:
        sync.send(policy.lm, 3, trainable_only=True)
    learner["refused"] = str(refused.value)
    learner["reports"].append(sync.send(policy.lm, 3, trainable_only=True))  # the group is still usable
    learner["lora"] = [(n, p.numel() * 4) for n, p in policy.lm.named_parameters() if p.requires_grad]
    sync.close()
    return learner, finish(worker, out)


def test_worker_process_samples_the_learners_tokens_after_each_sync(exchange):
    learner, worker = exchange
    assert worker["before"] == learner["before"]
    tokens = learner["tokens"]
    assert tokens[0] != learner["before"] and tokens[1] != tokens[0]  # each update changed what is sampled
    assert worker["tokens"][:2] == tokens[:2]
    assert [r["version"] for r in worker["reports"][:2]] == [1, 2]
    sent, got = learner["reports"][0], worker["reports"][0]
    assert sent.tensors == got["tensors"] == learner["full_tensors"]
    # 10 KiB buckets: the 6 MiB embedding alone, the layers' weights in several
    assert 5 < sent.buckets == got["buckets"] < learner["full_tensors"]
    assert sent.nbytes == got["nbytes"] == learner["full_bytes"]


def test_lora_adapters_only_and_a_worker_without_them_is_refused_on_both_sides(exchange):
    learner, worker = exchange
    first = "model.layers.0.self_attn.q_proj.lora_A.default.weight"
    assert f"first difference at '{first}'" in learner["refused"] and "(learner)" in learner["refused"]
    assert f"no tensor '{first}'" in worker["refused"] and "LoRA adapters on one side only" in worker["refused"]
    assert worker["tokens"][2] == learner["tokens"][2] != worker["tokens"][1]
    sent, got = learner["reports"][2], worker["reports"][2]
    assert got["version"] == 3 and sent.tensors == got["tensors"] == len(learner["lora"])
    assert sent.nbytes == got["nbytes"] == sum(b for _, b in learner["lora"])


@pytest.mark.slow
def test_a_sharded_fsdp2_learner_sends_whole_weights(tiny_model_dir, tmp_path):
    """2 FSDP2 ranks (torchrun, gloo): rank 0 sends, gathering each shard whole in step with rank 1."""
    address = _address()
    worker = start_worker("plain", address, tiny_model_dir, tmp_path / "worker.pt")
    learner = torchrun(
        [str(HERE / "sync_worker.py"), "fsdp", address, str(tiny_model_dir), str(tmp_path / "learner.pt")]
    )
    assert learner.returncode == 0, learner.stderr[-4000:]
    log, _ = worker.communicate(timeout=60)
    assert worker.returncode == 0, log[-4000:]
    sent, got = torch.load(tmp_path / "learner.pt"), torch.load(tmp_path / "worker.pt")
    assert sent.keys() == got.keys()
    for name, t in sent.items():
        assert torch.equal(got[name], t), name


def test_a_worker_that_never_joins_times_out_the_learner():
    start = time.monotonic()
    with pytest.raises(WeightSyncTimeout, match=r"\(learner\): waited 2 s for 1 rollout worker\(s\) to join"):
        WeightSync.connect(_address(), 0, 2, timeout_s=2)
    assert time.monotonic() - start < 30  # not the default 300 s


@pytest.mark.slow
def test_a_silent_learner_times_out_the_worker_and_a_dead_worker_the_learner(tmp_path):
    address, out = _address(), tmp_path / "worker.json"
    worker = start_worker("wait", address, tmp_path, out)
    sync = WeightSync.connect(address, 0, 2, timeout_s=60)  # the worker's start-up (imports) is slow on a busy CPU
    got = finish(worker, out)  # it waited 3 s for a send that never came, then exited: its socket is closed
    assert "(rollout worker 1): waiting for the learner's next send() did not complete within 3 s" in got["timeout"]
    with pytest.raises(WeightSyncTimeout, match=r"\(learner\): the manifest.* A rollout worker died"):
        sync.send(torch.nn.Linear(2, 2), 1)
    with pytest.raises(RuntimeError, match="failed earlier"):
        sync.send(torch.nn.Linear(2, 2), 2)


class Mixed(torch.nn.Module):
    """fp32 and bf16 parameters, a persistent buffer and a tied pair."""

    def __init__(self, seed: int):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.a = torch.nn.Parameter(torch.randn(300, generator=g))
        self.b = torch.nn.Parameter(torch.randn(50, 40, generator=g).to(torch.bfloat16))
        self.c = torch.nn.Parameter(torch.randn(7, generator=g))
        self.tied = self.c
        self.register_buffer("steps", torch.tensor([seed]))


def test_mixed_dtypes_buffers_and_a_bf16_wire_over_a_file_store(tmp_path):
    """Learner and worker as two threads of this process (each its own rank), joined through a file store."""
    from concurrent.futures import ThreadPoolExecutor

    address = f"file://{tmp_path / 'store'}"
    learner, worker = Mixed(seed=1), Mixed(seed=2)
    with ThreadPoolExecutor(2) as pool:
        joining = pool.submit(WeightSync.connect, address, 1, 2, timeout_s=30)
        sending = WeightSync.connect(address, 0, 2, timeout_s=30)
        receiving = joining.result()
        got = pool.submit(receiving.receive, worker)
        sent = sending.send(learner, 7, bucket_mb=0.001)  # 1 KiB: a and b alone, c and steps share
        assert got.result() == sent and sent.version == 7 and sent.tensors == 4  # a, b, c (tied once), steps
        for name, t in learner.state_dict().items():
            assert torch.equal(worker.state_dict()[name], t), name
        # bf16 on the wire (as the disk path writes): the worker's fp32 parameters get the rounded values
        learner.a.data.add_(1.0)
        got = pool.submit(receiving.receive, worker)
        sending.send([("a", learner.a.detach().to(torch.bfloat16))], 8, trainable_only=True)
        assert got.result().version == 8 and worker.a.dtype == torch.float32
        assert torch.equal(worker.a, learner.a.detach().to(torch.bfloat16).float())
        assert not torch.equal(worker.a, learner.a)
        sending.close()
        receiving.close()
