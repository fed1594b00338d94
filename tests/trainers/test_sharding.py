"""FSDP2 (``model.parallel.strategy: fsdp2``) on 2 gloo ranks gives what one unsharded process gives: gradients
(summed, not averaged), LoRA gradients, sampled tokens, and checkpoints that resume across world sizes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rubricgym.trainers.config import ConfigError, ParallelConfig, TrainConfig
from tests.trainers.conftest import torchrun

HERE = Path(__file__).parent


def test_fsdp_settings_are_refused_under_ddp_and_with_backends_that_need_whole_weights():
    with pytest.raises(ValueError, match="cpu_offload: set for strategy 'fsdp2' only"):
        ParallelConfig(cpu_offload=True)
    assert ParallelConfig(strategy="fsdp2", cpu_offload=True, mixed_precision="bf16").cpu_offload
    fsdp = {"model": {"parallel": {"strategy": "fsdp2"}}}
    with pytest.raises((ValueError, ConfigError), match="transformers backend only"):
        TrainConfig.model_validate(fsdp | {"generation": {"backend": "vllm"}})
    with pytest.raises((ValueError, ConfigError), match="transformers backend only"):
        TrainConfig.model_validate(fsdp | {"ray": True})


@pytest.fixture(scope="module")
def worker(tiny_model_dir, tmp_path_factory):
    """One 2-rank launch of fsdp_worker.py (every check's data), resuming a checkpoint one process wrote."""
    sys.path.insert(0, str(HERE))
    import fsdp_worker

    tmp = tmp_path_factory.mktemp("fsdp")
    fsdp_worker.updated(str(tiny_model_dir), range(0, 1), sharded=False, save_to=tmp / "one-process")
    proc = torchrun([str(HERE / "fsdp_worker.py"), str(tiny_model_dir), str(tmp / "one-process"), str(tmp)])
    assert proc.returncode == 0, proc.stderr[-4000:]
    return fsdp_worker, torch.load(tmp / "result.pt", weights_only=False), tmp


def _assert_grads_equal(sharded: dict, single: dict) -> None:
    assert set(sharded["grads"]) == set(single["grads"]) and single["grads"]
    for name, g in single["grads"].items():
        assert g.abs().sum() > 0, name
        torch.testing.assert_close(sharded["grads"][name], g, rtol=1e-5, atol=1e-7)
    # summed across ranks, not averaged: an average would give half the norm
    assert sharded["norm"] == pytest.approx(single["norm"], rel=1e-5)


@pytest.mark.slow
def test_fsdp2_gradients_equal_one_process_with_unequal_micro_batches(worker, tiny_model_dir):
    fsdp_worker, got, _ = worker
    assert got["world"] == 2
    _assert_grads_equal(got["grads"], fsdp_worker.gradients(str(tiny_model_dir), sharded=False))


@pytest.mark.slow
def test_fsdp2_lora_gradients_equal_one_process(worker, tiny_model_dir):
    fsdp_worker, got, _ = worker
    assert all("lora_" in k for k in got["lora_grads"]["grads"])  # the frozen base has no gradient
    _assert_grads_equal(got["lora_grads"], fsdp_worker.gradients(str(tiny_model_dir), sharded=False, lora=True))


@pytest.mark.slow
def test_fsdp2_bf16_mixed_precision_gradients_are_fp32_ones_to_bf16_precision(worker, tiny_model_dir):
    """``mixed_precision: bf16`` gathers and computes in bf16, reduces in fp32: the gradient is the fp32 one up to
    bf16 rounding, and still summed across ranks (the norm is not halved)."""
    fsdp_worker, got, _ = worker
    single = fsdp_worker.gradients(str(tiny_model_dir), sharded=False)
    mixed = got["bf16_grads"]
    diff = sum(float((mixed["grads"][k] - g).pow(2).sum()) for k, g in single["grads"].items())
    norm = sum(float(g.pow(2).sum()) for g in single["grads"].values())
    assert 0 < (diff / norm) ** 0.5 < 2e-2  # bf16 rounding shows, and stays at bf16's size
    assert mixed["norm"] == pytest.approx(single["norm"], rel=1e-2)


def test_cpu_offload_is_refused_for_a_model_on_the_cpu():
    with pytest.raises((ValueError, ConfigError), match="cpu_offload keeps GPU shards in CPU memory"):
        TrainConfig.model_validate({"model": {"parallel": {"strategy": "fsdp2", "cpu_offload": True}}})


@pytest.mark.slow
def test_sharded_policy_samples_the_tokens_of_one_process(worker, tiny_model_dir):
    fsdp_worker, got, _ = worker
    single = fsdp_worker.generate(str(tiny_model_dir), fsdp_worker.PROMPTS, sharded=False)
    assert got["tokens"] == single and all(len(t) == 8 for t in single)


@pytest.mark.slow
def test_dcp_checkpoints_resume_from_one_process_on_two_and_from_two_on_one(worker, tiny_model_dir):
    fsdp_worker, got, tmp = worker
    model_dir = str(tiny_model_dir)
    # 1 -> 2: one process took step 0 and saved; 2 ranks resumed and took step 1 = one process taking both
    straight, straight_opt = fsdp_worker.updated(model_dir, range(0, 2), sharded=False)
    for name, value in straight.state_dict().items():
        torch.testing.assert_close(got["after2"][name], value, rtol=1e-5, atol=1e-7)
    # 2 -> 1: the 2 ranks' shards load into one unsharded process, optimizer state included, and go on alike
    assert len(list((tmp / "dcp").glob("*.distcp"))) == 2
    resumed, resumed_opt = fsdp_worker.updated(model_dir, range(2, 3), sharded=False, resume_from=tmp / "dcp")
    fsdp_worker.policy_update(
        straight, straight_opt, fsdp_worker.samples_for(straight, 2, False), fsdp_worker.SETTINGS, pad_id=0
    )
    for name, value in straight.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[name], value, rtol=1e-5, atol=1e-7)
    steps = {s["step"].item() for s in resumed_opt.state.values()}
    assert steps == {3.0}  # AdamW's step counts came back: 2 restored + 1


@pytest.mark.slow
def test_torchrun_trains_lora_on_fsdp2_resumes_on_one_process_and_exports_a_merged_model(tiny_config, tmp_path):
    """The documented launch with ``model.parallel.strategy: fsdp2`` and LoRA (KL reference = adapters off): both
    ranks write their shards of the adapters into one checkpoint, one process resumes it (replicated), and
    ``rubricgym export --merge`` writes a model ``from_pretrained`` loads."""
    import json

    from transformers import AutoModelForCausalLM

    from rubricgym.trainers.config import dump_config

    run = tmp_path / "run"
    lora = {"r": 4, "alpha": 8}
    cfg = tiny_config(run, steps=2, tasks_per_step=3, loss={"beta": 0.04}, model={"lora": lora})
    dump_config(cfg.with_overrides(**{"model.parallel.strategy": "fsdp2"}), tmp_path / "fsdp.yaml")
    proc = torchrun(["-m", "rubricgym", "train", "--config", str(tmp_path / "fsdp.yaml"), "--no-live"])
    assert proc.returncode == 0, proc.stderr[-4000:]
    ckpt = run / "checkpoints" / "step-000002"
    assert len(list((ckpt / "dcp").glob("*.distcp"))) == 2 and (ckpt / "adapter_config.json").exists()
    assert not (ckpt / "model.safetensors").exists()  # the frozen base is not in the checkpoint

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cli = [sys.executable, "-m", "rubricgym"]

    def run_cli(*args: str) -> None:
        proc = subprocess.run([*cli, *args], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-4000:]

    run_cli("export", str(run), str(tmp_path / "merged"), "--merge")  # the 2 ranks' DCP checkpoint
    lm = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    assert not any("lora_" in k for k in lm.state_dict())
    from torch.distributed.checkpoint import FileSystemReader

    held = FileSystemReader(str(ckpt / "dcp")).read_metadata().state_dict_metadata
    weights = [k for k in held if k.startswith("model.")]
    assert weights and all("lora_A" in k or "lora_B" in k for k in weights)  # the adapters only, not the base
    assert any(k.startswith("optim.state.") and "lora_B" in k for k in held)  # and their AdamW state

    one = tiny_config(run, steps=3, tasks_per_step=3, loss={"beta": 0.04}, model={"lora": lora})
    dump_config(one, tmp_path / "one.yaml")
    run_cli("train", "--config", str(tmp_path / "one.yaml"), "--resume", "--no-live")
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines() if '"train"' in x]
    assert steps == [1, 2, 3]  # resumed after step 2, not from scratch


def test_readme_sharded_model_section_validates():
    import re

    import yaml

    readme = (HERE.parents[1] / "docs" / "tutorials" / "scale-out.md").read_text()
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "parallel:" in b]
    assert blocks, "docs/tutorials/scale-out.md shows model.parallel"
    for block in blocks:
        cfg = TrainConfig.model_validate(yaml.safe_load(block))
        assert cfg.model.parallel.strategy == "fsdp2"
