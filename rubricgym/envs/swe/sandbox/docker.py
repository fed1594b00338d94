"""The ``docker`` backend: containers through the Docker Engine API (``DOCKER_HOST``), e.g. podman's service.

Each task gets its own image (a tiny base skeleton plus the repository at ``/task``), built locally without a
registry. A sandbox is a container with no network, a read-only root, every capability dropped,
``no-new-privileges``, memory/pids/cpu limits, the host's ``/usr`` mounted read-only (the system Python and
tools) and a tmpfs of ``Limits.disk_mb`` at ``/work`` that starts as a copy of ``/task``. Its PID 1 is a shell whose
``SIGUSR1`` trap runs ``kill -9 -1``: a timeout or an output overflow kills every other process in the
container without forking (so it works even under a fork bomb) while ``/work`` survives. Every command also
ends with ``kill -9 -1``, so, as with bwrap, no process outlives the command that started it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import os
import tarfile
import tempfile
import time
import uuid
from contextlib import suppress
from pathlib import Path, PurePosixPath
from typing import Any

from rubricgym.envs.swe.sandbox import treediff
from rubricgym.envs.swe.sandbox.base import (
    DEPS_DIR,
    RUNTIME_DIR,
    WORKDIR,
    ExecResult,
    Limits,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxPathError,
    cap_bytes,
    clean_relpath,
    extract_out,
    to_bytes,
)
from rubricgym.envs.swe.sandbox.bwrap import BASE_ENV, SANDBOX_UID
from rubricgym.envs.swe.sandbox.runtime import runtime_dir, shared_copy

SKELETON_VERSION = "3"
INIT = 'trap "kill -9 -1" USR1; while :; do sleep 3600 & wait; done'
_TREEDIFF_SOURCE = Path(treediff.__file__).read_text()
_READER = (
    'p=$(realpath -e -- "$1" 2>/dev/null) || { echo "does not exist" >&2; exit 2; }; '
    'case "$p" in /work|/work/*) ;; *) echo "resolves outside the repository" >&2; exit 3;; esac; '
    '[ -d "$p" ] && { echo "is a directory, not a file" >&2; exit 4; }; '
    '[ -f "$p" ] || { echo "is not a regular file" >&2; exit 5; }; exec cat -- "$p"'
)
_WRITER = """
import base64, os, sys
path, mode, chunk = sys.argv[1:4]
parent = os.path.dirname(os.path.abspath(path))
real = os.path.realpath(parent)
if real != "/work" and not real.startswith("/work/"):
    sys.exit("resolves outside the repository")
os.makedirs(parent, exist_ok=True)
if os.path.isdir(path):
    sys.exit("is a directory")
flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_TRUNC if mode == "w" else os.O_APPEND)
with os.fdopen(os.open(path, flags, 0o644), "wb") as f:
    f.write(base64.b64decode(chunk))
"""
_CHUNK = 64 * 1024  # base64 of it stays well under the kernel's 128 KB per argument


def _skeleton_tar(uid: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"), ("sbin", "usr/sbin")):
            ti = tarfile.TarInfo(name)
            ti.type, ti.linkname = tarfile.SYMTYPE, target
            tf.addfile(ti)
        for name in (
            "usr",
            "etc",
            "tmp",
            "work",
            "task",
            "opt",
            "opt/rubricgym",
            "opt/rubricgym-deps",
            "proc",
            "dev",
            "sys",
        ):
            ti = tarfile.TarInfo(name)
            # a tmpfs mounted on /work takes this directory's mode (not its owner): world-writable and sticky
            ti.type, ti.mode = tarfile.DIRTYPE, 0o1777 if name in ("tmp", "work") else 0o755
            tf.addfile(ti)
        files = {
            "etc/passwd": f"root:x:0:0:root:/root:/bin/sh\nsandbox:x:{uid}:{uid}:sandbox:/tmp:/bin/sh\n",
            "etc/group": f"root:x:0:\nsandbox:x:{uid}:\n",
            "etc/hosts": "127.0.0.1 localhost\n",
        }
        for name, text in files.items():
            data = text.encode()
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), 0o644
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def _tree_tar(root: Path, prefix: str) -> tuple[bytes, str]:
    """A tar of ``root`` under ``prefix`` (root-owned, world-readable) and the hash of its content."""
    buf, digest = io.BytesIO(), hashlib.sha256()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            rel = os.path.relpath(dirpath, root)
            for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                full = os.path.join(dirpath, name)
                arc = os.path.normpath(os.path.join(prefix, rel, name))
                ti = tf.gettarinfo(full, arcname=arc)
                ti.uid = ti.gid = 0
                ti.uname = ti.gname = "root"
                ti.mode = (ti.mode & 0o755) | 0o444
                ti.mtime = 0
                digest.update(arc.encode() + b"\0")
                if ti.isreg():
                    with open(full, "rb") as f:
                        data = f.read()
                    digest.update(data)
                    tf.addfile(ti, io.BytesIO(data))
                else:
                    digest.update(ti.linkname.encode())
                    tf.addfile(ti)
    return buf.getvalue(), digest.hexdigest()[:24]


class DockerSandbox(Sandbox):
    backend = "docker"

    def __init__(self, snapshot: Path, limits: Limits, client: Any, container: Any, uid: int, deps: Path | None = None):
        super().__init__(snapshot, limits, deps)
        self.disk_quota_mb = limits.disk_mb
        self.client = client
        self.container = container
        self.uid = uid

    def _kill_all(self) -> None:
        with suppress(Exception):
            self.container.kill(signal="SIGUSR1")

    def _exec_sync(self, argv: list[str], env: dict[str, str], output_bytes: int, state: dict) -> None:
        api = self.client.api
        eid = api.exec_create(
            self.container.id, argv, user=f"{self.uid}:{self.uid}", workdir=WORKDIR, environment={**BASE_ENV, **env}
        )["Id"]
        state["eid"] = eid
        bufs = state["bufs"]
        for out, err in api.exec_start(eid, stream=True, demux=True):
            for name, chunk in (("stdout", out), ("stderr", err)):
                if not chunk or name in state["over"]:
                    continue
                buf = bufs[name]
                if len(buf) + len(chunk) > output_bytes:
                    buf += chunk[: output_bytes + 1 - len(buf)]
                    state["over"].append(name)
                    self._kill_all()
                else:
                    buf += chunk
        state["exit"] = api.exec_inspect(eid).get("ExitCode")

    async def _exec(self, argv: list[str], timeout: float, env: dict[str, str], output_bytes: int) -> ExecResult:
        t0 = time.monotonic()
        state: dict[str, Any] = {"bufs": {"stdout": bytearray(), "stderr": bytearray()}, "over": []}
        # like bwrap's pid namespace: nothing the command started outlives it (``kill`` is a shell builtin, so
        # this works under a fork bomb; PID 1 ignores signals from inside its namespace)
        wrapped = [
            "/bin/sh",
            "-c",
            '"$@"; rc=$?; kill -9 -1 2>/dev/null; exit $rc',
            "rg-exec",
            "/usr/bin/timeout",
            "-s",
            "KILL",
            f"{timeout:g}",
            *argv,
        ]
        fut = asyncio.ensure_future(asyncio.to_thread(self._exec_sync, wrapped, env, output_bytes, state))
        limit = None
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout + 2)
        except TimeoutError:
            limit = "timeout"
            await asyncio.to_thread(self._kill_all)
            with suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(fut), 15)
        if fut.done() and fut.exception() is not None:
            raise SandboxError(f"docker exec failed: {fut.exception()}")
        code = state.get("exit")
        duration = time.monotonic() - t0
        if code is None:
            code = 137
        if limit is None and code in (124, 137) and duration >= timeout * 0.98:
            limit = "timeout"
        if state["over"]:  # the output cap fired first; a timeout after it is the kill still settling
            limit = "output"
        out, out_cut = cap_bytes(bytes(state["bufs"]["stdout"]), output_bytes)
        err, err_cut = cap_bytes(bytes(state["bufs"]["stderr"]), output_bytes)
        if limit:
            await asyncio.to_thread(self._kill_all)
        return ExecResult(
            exit_code=code,
            stdout=out,
            stderr=err,
            duration_s=duration,
            limit=limit,
            stdout_truncated=out_cut,
            stderr_truncated=err_cut,
        )

    async def read_file(self, path: str) -> bytes:
        rel = clean_relpath(path)
        res = await self.exec(
            ["/bin/sh", "-c", _READER, "read", f"{WORKDIR}/{rel}".rstrip("/")], output_bytes=8 * 1024 * 1024
        )
        if res.exit_code != 0:
            raise SandboxPathError(f"{path!r} {res.stderr.strip() or 'cannot be read'}")
        return res.stdout.encode()

    async def write_file(self, path: str, data: bytes | str) -> None:
        rel = clean_relpath(path)
        if not rel:
            raise SandboxPathError("give a file path, not the repository root")
        raw = to_bytes(data)
        chunks = [raw[i : i + _CHUNK] for i in range(0, len(raw), _CHUNK)] or [b""]
        for i, chunk in enumerate(chunks):
            res = await self.exec(
                [
                    "/usr/bin/python3",
                    "-c",
                    _WRITER,
                    f"{WORKDIR}/{rel}",
                    "w" if i == 0 else "a",
                    base64.b64encode(chunk).decode(),
                ]
            )
            if res.exit_code != 0:
                raise SandboxPathError(f"{path!r}: {res.stderr.strip().splitlines()[-1:] or 'cannot be written'}")

    async def export(self, path: str, dest: Path) -> None:
        rel = clean_relpath(path)
        src = f"{WORKDIR}/{rel}".rstrip("/")

        def fetch() -> None:
            try:
                stream, _ = self.container.get_archive(src)
            except Exception as e:  # the SDK's NotFound / APIError
                raise SandboxPathError(f"{path!r} cannot be copied out of the sandbox: {e}") from None
            with tempfile.TemporaryFile() as buf:
                for chunk in stream:
                    buf.write(chunk)
                buf.seek(0)
                with tarfile.open(fileobj=buf, mode="r|") as tf:
                    extract_out(tf, PurePosixPath(src).name, Path(dest))

        await asyncio.to_thread(fetch)

    async def fingerprint(self) -> dict[str, tuple[int, int]]:
        res = await self.exec(
            ["/usr/bin/python3", "-c", _TREEDIFF_SOURCE, "fingerprint", WORKDIR], output_bytes=64 * 1024 * 1024
        )
        if res.exit_code != 0:
            raise SandboxError(f"fingerprint failed: {res.stderr[-500:]}")
        return {k: (v[0], v[1]) for k, v in json.loads(res.stdout).items()}

    async def diff(self) -> str:
        res = await self.exec(
            ["/usr/bin/python3", "-c", _TREEDIFF_SOURCE, "diff", "/task", WORKDIR], output_bytes=64 * 1024 * 1024
        )
        if res.exit_code != 0:
            raise SandboxError(f"diff failed: {res.stderr[-500:]}")
        return res.stdout

    async def destroy(self) -> None:
        if self.destroyed:
            return
        self.destroyed = True
        with suppress(Exception):
            await asyncio.to_thread(self.container.remove, force=True)


class DockerBackend(SandboxBackend):
    """Sandboxes as containers of a per-task image, through the Docker Engine API at ``base_url``."""

    name = "docker"

    def __init__(self, base_url: str | None = None, uid: int = SANDBOX_UID, image_prefix: str = "rubricgym-swe"):
        self.base_url = base_url or os.environ.get("DOCKER_HOST")
        self.uid = uid
        self.image_prefix = image_prefix
        self._client: Any = None
        self._images: dict[str, str] = {}

    @classmethod
    def unavailable_reason(cls) -> str | None:
        try:
            import docker  # noqa: F401
        except ImportError:
            return "the `docker` Python package is missing (pip install docker)"
        if not os.environ.get("DOCKER_HOST") and not os.path.exists("/var/run/docker.sock"):
            return "no Docker Engine API: set DOCKER_HOST (e.g. unix:///path/podman.sock)"
        return None

    def client(self) -> Any:
        if self._client is None:
            import docker

            if not self.base_url:
                raise SandboxError("no Docker Engine API: pass base_url or set DOCKER_HOST")
            self._client = docker.DockerClient(base_url=self.base_url, timeout=120)
        return self._client

    def _base_tag(self) -> str:
        return f"{self.image_prefix}-base:{SKELETON_VERSION}-{self.uid}"

    def _base_image(self) -> str:
        import docker.errors

        tag = self._base_tag()
        client = self.client()
        with suppress(docker.errors.ImageNotFound):
            client.images.get(tag)
            return tag
        out = client.api.import_image_from_data(_skeleton_tar(self.uid))
        image_id = json.loads(out.strip().splitlines()[-1])["status"] if isinstance(out, str) else None
        if not image_id:
            raise SandboxError(f"could not import the base image: {out!r}")
        repo, _, version = tag.partition(":")
        client.images.get(image_id).tag(repo, version)  # podman's import ignores the tag: tag it ourselves
        return tag

    def task_image(self, snapshot: Path) -> str:
        """The image holding ``snapshot`` at /task (built once per distinct content)."""
        import docker.errors

        data, content = _tree_tar(snapshot, "task")
        key = hashlib.sha256(f"{self._base_tag()}|{content}".encode()).hexdigest()[:24]
        tag = f"{self.image_prefix}-task:{key}"
        if self._images.get(key):
            return tag
        client = self.client()
        try:
            client.images.get(tag)
        except docker.errors.ImageNotFound:
            base = self._base_image()
            ct = client.containers.create(base, command=["/usr/bin/true"])
            try:
                ct.put_archive("/", data)
                ct.commit(repository=tag.partition(":")[0], tag=key)
            finally:
                ct.remove(force=True)
        self._images[key] = tag
        return tag

    def _create_sync(self, snapshot: Path, limits: Limits, deps: Path | None) -> DockerSandbox:
        from docker.types import Mount

        image = self.task_image(snapshot)
        runtime = runtime_dir()
        volumes = {"/usr": {"bind": "/usr", "mode": "ro"}, str(runtime): {"bind": RUNTIME_DIR, "mode": "ro"}}
        if deps is not None:
            volumes[str(shared_copy(deps))] = {"bind": DEPS_DIR, "mode": "ro"}
        client = self.client()
        container = client.containers.run(
            image,
            command=["/bin/sh", "-c", INIT],
            detach=True,
            name=f"rubricgym-{uuid.uuid4().hex[:12]}",
            user=f"{self.uid}:{self.uid}",
            network_mode="none",
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=f"{limits.memory_mb}m",
            memswap_limit=f"{limits.memory_mb}m",
            pids_limit=limits.pids,
            nano_cpus=int(limits.cpus * 1e9),
            mounts=[
                Mount(WORKDIR, None, type="tmpfs", tmpfs_size=limits.disk_mb * 1024 * 1024),
                Mount("/tmp", None, type="tmpfs", tmpfs_size=min(256, limits.disk_mb) * 1024 * 1024),
            ],
            volumes=volumes,
            working_dir=WORKDIR,
            environment=BASE_ENV,
            labels={"rubricgym.sandbox": "swe"},
        )
        return DockerSandbox(snapshot, limits, client, container, self.uid, deps)

    async def create(self, snapshot: Path, limits: Limits | None = None, deps: Path | None = None) -> DockerSandbox:
        reason = self.unavailable_reason()
        if reason and self.base_url and "DOCKER_HOST" in reason:
            reason = None  # an explicit base_url needs no environment
        if reason:
            raise SandboxError(f"the docker sandbox backend cannot run here: {reason}")
        limits = limits or Limits()
        if not Path(snapshot).is_dir():
            raise SandboxError(f"snapshot {snapshot} is not a directory")
        if deps is not None and not Path(deps).is_dir():
            raise SandboxError(f"dependency folder {deps} is not a directory")
        sb = await asyncio.to_thread(self._create_sync, Path(snapshot), limits, Path(deps) if deps else None)
        res = await sb.exec(["/bin/cp", "-R", "/task/.", f"{WORKDIR}/"])
        if res.exit_code != 0:
            await sb.destroy()
            raise SandboxError(f"could not copy the repository into the container: {res.stderr[-500:]}")
        return sb

    async def aclose(self) -> None:
        if self._client is not None:
            await asyncio.to_thread(self._client.close)
            self._client = None
