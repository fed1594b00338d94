"""DockerProvider against podman's Docker-API service: the server runs in a container, answers like a local one,
and the container is removed on stop and noticed when it dies. The image is built offline: a skeleton whose
interpreter, venv and code are the host's, mounted read-only."""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path

import pytest

import rubricgym
from rubricgym.envs.toy.agents import tool_call
from rubricgym.server import ServerConfig
from rubricgym.server.docker import DockerProvider, ProviderError
from rubricgym.server.remote import RemoteEnv
from tests.envs.swe.conftest import podman_url  # noqa: F401  (the podman service fixture)

ROOT = Path(__file__).resolve().parents[2]
TAG = "localhost/rubricgym-serve-test:1"


def _skeleton() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"), ("sbin", "usr/sbin")):
            ti = tarfile.TarInfo(name)
            ti.type, ti.linkname = tarfile.SYMTYPE, target
            tf.addfile(ti)
        for name in ("usr", "etc", "tmp", "root", "work", "proc", "dev", "sys"):
            ti = tarfile.TarInfo(name)
            ti.type, ti.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
            tf.addfile(ti)
        data = b"root:x:0:0:root:/tmp:/bin/sh\n"
        ti = tarfile.TarInfo("etc/passwd")
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture(scope="module")
def provider_kwargs(podman_url):  # noqa: F811
    import docker

    client = docker.DockerClient(base_url=podman_url)
    try:
        client.images.get(TAG)
    except docker.errors.ImageNotFound:
        out = client.api.import_image_from_data(_skeleton())
        image_id = json.loads(out.strip().splitlines()[-1])["status"]
        client.images.get(image_id).tag(*TAG.rsplit(":", 1))
    venv = Path(sys.prefix)
    mounts = {p: {"bind": p, "mode": "ro"} for p in ("/usr", sys.base_prefix, str(venv), str(ROOT))}
    return {
        "base_url": podman_url,
        "network": "host",
        "entrypoint": [sys.executable, "-m", "rubricgym"],
        "volumes": mounts,
        "environment": {"PYTHONPATH": str(ROOT), "HOME": "/tmp"},
    }


def _ours(podman_url: str) -> list:  # noqa: F811
    import docker

    return docker.DockerClient(base_url=podman_url).containers.list(all=True, filters={"label": "rubricgym.server"})


@pytest.mark.slow
def test_a_containerised_server_serves_the_env_and_is_removed_on_stop(provider_kwargs, podman_url):  # noqa: F811
    provider = DockerProvider(TAG, **provider_kwargs)
    with provider.run(ServerConfig(env_id="toy-calculator-v0", token="tok")) as url:
        env = RemoteEnv.connect(url, token="tok")
        local = rubricgym.make("toy-calculator-v0")
        assert env.reset(seed=2)[0] == local.reset(seed=2)[0]
        assert env.step(tool_call("calculator", expression="3 * 4"))[0] == "12"
        env.close()
        assert len(_ours(podman_url)) == 1
    assert _ours(podman_url) == []


@pytest.mark.slow
def test_a_server_that_dies_is_noticed_and_its_container_removed(provider_kwargs, podman_url):  # noqa: F811
    provider = DockerProvider(TAG, **provider_kwargs)
    provider.start(ServerConfig(env_id="toy-calculator-v0"))
    provider.container.kill()
    assert not provider.running
    provider.stop()
    assert _ours(podman_url) == []
    broken = DockerProvider(
        TAG,
        **{
            **provider_kwargs,
            "environment": {"PYTHONPATH": "/nowhere"},
            "entrypoint": [sys.executable, "-m", "no_such_module"],
        },
        startup_timeout_s=60,
    )
    with pytest.raises(ProviderError, match="exited before it was healthy"):
        broken.start(ServerConfig(env_id="toy-calculator-v0"))
    assert _ours(podman_url) == []
