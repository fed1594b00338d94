"""``DockerProvider``: run ``rubricgym serve`` in a container through the Docker Engine API (``docker`` SDK).

Works against Docker or podman's Docker-compatible service (``DOCKER_HOST`` or ``base_url``). The container runs
the image's ``rubricgym`` entry point (the repo's ``Dockerfile`` builds one) with ``serve ENV_ID``; the provider
publishes the server's port on the host's loopback (or shares the host network), waits for ``GET /health``, and
removes the container when the provider stops, when the program exits, or as soon as the server in it dies.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import time
import uuid
from collections.abc import Sequence
from typing import Any

import httpx

from rubricgym.server.app import ServerConfig

CONTAINER_PORT = 8000


class ProviderError(RuntimeError):
    """The container could not be started or its server never became healthy; the message has its log tail."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DockerProvider:
    """Serve an env from ``image``: ``with DockerProvider(image).run(config) as url: rubricgym.make(url)``.

    ``network="bridge"`` publishes the container's port on ``127.0.0.1``; ``"host"`` shares the host network (the
    server then listens on loopback itself). ``entrypoint``, ``volumes`` and ``environment`` pass through to the
    container (tests use them to run the host's interpreter in a minimal image).
    """

    def __init__(
        self,
        image: str,
        *,
        base_url: str | None = None,
        network: str = "bridge",
        entrypoint: Sequence[str] | None = None,
        volumes: dict[str, dict[str, str]] | None = None,
        environment: dict[str, str] | None = None,
        startup_timeout_s: float = 120.0,
    ):
        if network not in ("bridge", "host"):
            raise ValueError(f"network must be 'bridge' or 'host', got {network!r}")
        self.image, self.network = image, network
        self.base_url = base_url or os.environ.get("DOCKER_HOST")
        self.entrypoint = list(entrypoint) if entrypoint else None
        self.volumes, self.environment = volumes or {}, environment or {}
        self.startup_timeout_s = startup_timeout_s
        self.container: Any = None
        self.url: str | None = None

    def _client(self) -> Any:
        try:
            import docker
        except ImportError as e:
            raise ProviderError("the docker SDK is missing: pip install 'rubricgym[swe]' (or docker>=7)") from e
        try:
            return docker.DockerClient(base_url=self.base_url) if self.base_url else docker.from_env()
        except docker.errors.DockerException as e:
            raise ProviderError(f"no Docker Engine API ({self.base_url or 'from the environment'}): {e}") from e

    def start(self, config: ServerConfig) -> str:
        """Start the container serving ``config.env_id`` and return its ``ws://`` URL once ``/health`` answers."""
        import docker.errors

        client = self._client()
        host_port = _free_port() if self.network == "host" else None
        port = host_port or CONTAINER_PORT
        command = [
            "serve",
            config.env_id,
            "--host",
            "127.0.0.1" if host_port else "0.0.0.0",
            "--port",
            str(port),
            "--max-sessions",
            str(config.max_sessions),
            "--idle-timeout",
            str(config.idle_timeout_s),
            "--max-message-bytes",
            str(config.max_message_bytes),
            "--max-tasks",
            str(config.max_tasks),
            "--issued-tasks",
            str(config.issued_tasks),
            "--issued-per-client",
            str(config.issued_per_client),
            *(["--accept-client-tasks"] if config.accept_client_tasks else []),
            *(["--trusted"] if config.trusted else []),
            "--isolation",
            config.isolation,
            *(["--workers", str(config.workers)] if config.workers != 1 else []),
            *([] if config.inline_steps else ["--no-inline-steps"]),
        ]
        if "max_steps" in config.env_kwargs:
            command += ["--max-steps", str(config.env_kwargs["max_steps"])]
        environment = dict(self.environment)
        if config.token:
            environment["RUBRICGYM_TOKEN"] = config.token
        run: dict[str, Any] = {"network_mode": "host"} if host_port else {"ports": {f"{port}/tcp": ("127.0.0.1", None)}}
        try:
            self.container = client.containers.run(
                self.image,
                command=command,
                entrypoint=self.entrypoint,
                detach=True,
                environment=environment,
                volumes=self.volumes,
                name=f"rubricgym-serve-{uuid.uuid4().hex[:10]}",
                labels={"rubricgym.server": config.env_id},
                **run,
            )
        except docker.errors.DockerException as e:
            raise ProviderError(f"cannot start a container of {self.image!r}: {e}") from e
        atexit.register(self.stop)
        try:
            self.url = self._wait(host_port)
        except BaseException:
            self.stop()
            raise
        return self.url

    def _wait(self, host_port: int | None) -> str:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            self.container.reload()
            if self.container.status in ("exited", "dead"):
                raise ProviderError(f"the server container exited before it was healthy:\n{self.logs()}")
            port = host_port or self._published_port()
            if port:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2, trust_env=False).status_code == 200:
                        return f"ws://127.0.0.1:{port}"
            time.sleep(0.3)
        raise ProviderError(f"the server was not healthy within {self.startup_timeout_s:.0f}s:\n{self.logs()}")

    def _published_port(self) -> int | None:
        bindings = (self.container.ports or {}).get(f"{CONTAINER_PORT}/tcp") or []
        return int(bindings[0]["HostPort"]) if bindings else None

    def logs(self, lines: int = 30) -> str:
        try:
            return self.container.logs(tail=lines).decode(errors="replace")
        except Exception as e:  # the container may be gone already
            return f"(no logs: {e})"

    @property
    def running(self) -> bool:
        if self.container is None:
            return False
        try:
            self.container.reload()
        except Exception:
            return False
        return self.container.status == "running"

    def stop(self) -> None:
        """Stop and remove the container (idempotent; registered with ``atexit``)."""
        container, self.container = self.container, None
        atexit.unregister(self.stop)
        if container is None:
            return
        with contextlib.suppress(Exception):
            container.stop(timeout=10)  # SIGTERM: the server closes every session's env
        with contextlib.suppress(Exception):
            container.remove(force=True)

    @contextlib.contextmanager
    def run(self, config: ServerConfig) -> Any:
        try:
            yield self.start(config)
        finally:
            self.stop()

    def serve_forever(self, config: ServerConfig) -> None:
        """``rubricgym serve --docker IMAGE``: start, print the URL, keep it up until Ctrl-C or the server dies."""
        url = self.start(config)
        print(f"serving {config.env_id} from {self.image} at {url} (container {self.container.name})", flush=True)
        try:
            while self.running:
                time.sleep(1.0)
            raise ProviderError(f"the server container stopped:\n{self.logs()}")
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()
