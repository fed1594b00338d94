"""``bench/gpu_check.sh``: its dry run plays the family demos' episodes, takes one FSDP2 bf16 GRPO step and prints
the table on the CPU; without a GPU the real run stops at once saying why. ``bench/rollouts.py``'s smoke mode
prints its throughput and log-prob agreement tables."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE", "PYTHONWARNINGS": "ignore"}


def run(cmd: list[str], timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a GPU driver")
def test_gpu_check_without_a_gpu_fails_fast_saying_what_is_missing():
    out = run(["bash", "bench/gpu_check.sh"], timeout=60)
    assert out.returncode == 2
    assert "no nvidia-smi" in out.stderr and "--dry-run" in out.stderr


@pytest.mark.slow
def test_gpu_check_dry_run_prints_the_table(tiny_model_dir):
    out = run(["bash", "bench/gpu_check.sh", "--dry-run", "--model", str(tiny_model_dir)])
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    table = out.stdout
    gen = re.search(r"generation, local sampler \(dry run\) \| ([\d.]+) tokens/s \((\d+) episodes", table)
    assert gen and float(gen.group(1)) > 0 and int(gen.group(2)) == 4  # 2 families x 1 task x 2 episodes
    step = re.search(r"GRPO step, FSDP2 bf16, gloo +\| ([\d.]+) tokens/s", table)
    assert step and float(step.group(1)) > 0
    assert "GRPO step MFU" in table and "weight push to vLLM" in table and "peak memory" in table


@pytest.mark.slow
def test_rollouts_bench_smoke_mode_prints_throughput_and_agreement(tiny_model_dir):
    out = run(
        [
            sys.executable,
            "bench/rollouts.py",
            "--tiny-model",
            str(tiny_model_dir),
            "--engines",
            "bf16",
            "--families",
            "clinical-v0",
        ]
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    rows = {m.group(1): m for m in re.finditer(r"clinical-v0 +(\S+) \|.*\| +([\d.]+)x \| +(met|-) \|", out.stdout)}
    assert set(rows) == {"fp32", "bf16"}  # fp32, today's sampler, is always measured: the ratios' peer
    assert float(rows["fp32"].group(2)) == 1.0
    agree = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^ *(\S+) \| +\d+ \|.*\| +(agrees|TIS-corrected|REFUSED) \|", out.stdout, re.M)
    }
    assert agree == {"fp32": "agrees", "bf16": "agrees"}
