"""Sandbox fixtures: the bwrap backend (skipped where bubblewrap is missing) and a real podman service.

``podman_url`` installs podman and runc with apt when missing (root only), writes a containers.conf with the
settings this kind of machine needs (runc, explicit ulimits, exit_command_delay), starts
``podman system service`` on a temporary socket, waits for ``/_ping`` and stops the service by its PID.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from rubricgym.envs.swe.sandbox import BwrapBackend, DockerBackend
from tests.conftest import missing_dependency

CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=16384:16384", "nproc=16384:16384"]

[engine]
runtime = "runc"
exit_command_delay = 5
cgroup_manager = "cgroupfs"
events_logger = "file"
"""


@pytest.fixture(scope="session")
def bwrap() -> BwrapBackend:
    reason = BwrapBackend.unavailable_reason()
    if reason:
        missing_dependency(f"bwrap backend unavailable: {reason}")
    return BwrapBackend()


def _ping(sock: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(2)
            s.connect(str(sock))
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: d\r\n\r\n")
            return b"OK" in s.recv(4096)
    except OSError:
        return False


def _ensure_podman() -> str | None:
    if shutil.which("podman") and shutil.which("runc"):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "podman/runc are not installed and we cannot apt-get install them (not root)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    wait = ["-o", "DPkg::Lock::Timeout=600"]  # another apt/dpkg holding the lock is waited for, not a failure
    subprocess.run(["apt-get", *wait, "update", "-qq"], capture_output=True, env=env, timeout=900)
    res = subprocess.run(
        ["apt-get", *wait, "install", "-y", "-qq", "podman", "runc"], capture_output=True, env=env, timeout=1200
    )
    if res.returncode != 0:
        return f"apt-get install podman runc failed: {res.stderr.decode(errors='replace')[-300:]}"
    return None


@pytest.fixture(scope="session")
def podman_url(tmp_path_factory: pytest.TempPathFactory):
    reason = _ensure_podman()
    if reason:
        missing_dependency(reason)
    if os.geteuid() != 0:
        missing_dependency("the podman service is tested as root (rootless podman needs subuid set-up)")
    d = tmp_path_factory.mktemp("podman")
    conf = d / "containers.conf"
    conf.write_text(CONTAINERS_CONF)
    sock = d / "podman.sock"
    log = open(d / "service.log", "wb")  # noqa: SIM115  (kept open for the service's whole life)
    # cwd: conmon writes an `oom` marker file into the service's working directory; keep it out of the repository
    proc = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{sock}"],
        stdout=log,
        cwd=d,
        stderr=subprocess.STDOUT,
        env={**os.environ, "CONTAINERS_CONF": str(conf)},
    )
    try:
        deadline = time.monotonic() + 60
        while not _ping(sock):
            if proc.poll() is not None or time.monotonic() > deadline:
                missing_dependency(f"podman service did not start: {(d / 'service.log').read_text()[-500:]}")
            time.sleep(0.2)
        yield f"unix://{sock}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture
def docker(podman_url: str) -> DockerBackend:
    return DockerBackend(base_url=podman_url)


@pytest.fixture(params=["bwrap", "docker"])
def backend(request: pytest.FixtureRequest):
    return request.getfixturevalue(request.param)
