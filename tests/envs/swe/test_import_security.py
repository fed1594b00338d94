"""``swe import`` never runs a repository's code on the host (issue 40, items 1, 5, 6).

Each attack is a real repository whose payload would create a canary file on the host (under ``tmp_path``):
git configuration of the clone (a smudge/clean filter, ``core.fsmonitor``, hooks), a dependency declared by path
(``name @ file://...``) and an sdist whose build code runs wherever it is built. After the import the canary
must not exist, and the record is either refused with a message saying why or built inside the sandbox. A bad
record (a link out of the repository, a clone outside ``--repos``) is reported alone; the rest are imported.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.envs.swe.sandbox import Limits
from rubricgym.envs.swe.swebench import import_swebench
from rubricgym.envs.swe.taskfile import load_instances

from .swebench_samples import git

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

BUGGY = "def double(x):\n    return x * 3\n"
TESTS = "from calc import double\n\n\ndef test_double():\n    assert double(4) == 8\n"
PYPROJECT = '[project]\nname = "calc"\nversion = "0.1"\ndependencies = [{deps}]\n'
CANARY = "touch {canary}"


def make_repo(root: Path, name: str, deps: str = "", extra: dict[str, str] | None = None) -> dict:
    """A clone at ``root/name`` (``calc.double`` is wrong at the base commit) and the record of its fix."""
    repo = root / name
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    files = {
        "pyproject.toml": PYPROJECT.format(deps=deps),
        "calc/__init__.py": BUGGY,
        "tests/__init__.py": "",
        "tests/test_calc.py": TESTS,
        **(extra or {}),
    }
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "calc/__init__.py").write_text(BUGGY.replace("x * 3", "x * 2"))
    patch = git(repo, "diff")
    git(repo, "checkout", "-q", "--", ".")
    return {
        "instance_id": name.replace("/", "__") + "-1",
        "repo": name,
        "base_commit": base,
        "problem_statement": "`double(4)` returns 12.",
        "patch": patch,
        "FAIL_TO_PASS": ["tests/test_calc.py::test_double"],
        "PASS_TO_PASS": [],
    }


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """pip offline and the cache in ``tmp_path``."""
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "empty"))
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_a_clones_git_config_filters_fsmonitor_and_hooks_never_run(offline):
    tmp = offline
    rec = make_repo(tmp / "clones", "acme/evilgit", extra={".gitattributes": "* filter=evil\n"})
    repo = tmp / "clones" / "acme" / "evilgit"
    canaries = {v: tmp / f"canary-{v}" for v in ("smudge", "clean", "process", "fsmonitor", "hook", "hookspath")}
    for key, value in {
        "filter.evil.smudge": f"sh -c '{CANARY.format(canary=canaries['smudge'])}; cat'",
        "filter.evil.clean": f"sh -c '{CANARY.format(canary=canaries['clean'])}; cat'",
        "filter.evil.process": f"sh -c '{CANARY.format(canary=canaries['process'])}'",
        "core.fsmonitor": f"sh -c '{CANARY.format(canary=canaries['fsmonitor'])}'",
        "core.hooksPath": str(tmp / "evilhooks"),
    }.items():
        git(repo, "config", key, value)
    (tmp / "evilhooks").mkdir()
    for folder, canary in ((repo / ".git" / "hooks", canaries["hook"]), (tmp / "evilhooks", canaries["hookspath"])):
        for hook in ("post-checkout", "pre-commit", "reference-transaction", "post-index-change", "pre-auto-gc"):
            (folder / hook).write_text(f"#!/bin/sh\n{CANARY.format(canary=canary)}\n")
            (folder / hook).chmod(0o755)
    (item,) = asyncio.run(import_swebench([rec], tmp / "clones"))
    assert [name for name, c in canaries.items() if c.exists()] == []  # today: the smudge filter ran on the host
    assert item.verdict.ok, item.verdict.line()  # the snapshot is the committed content, no filter applied
    assert item.instance is not None
    assert (Path(item.instance.snapshot) / "calc" / "__init__.py").read_text() == BUGGY


IN_TREE_BACKEND = """
import base64, hashlib, os, zipfile

def _touch():
    try:
        open({canary!r}, "w").write("ran")
    except OSError:
        pass

def get_requires_for_build_wheel(config_settings=None):
    _touch()
    return []

def prepare_metadata_for_build_wheel(directory, config_settings=None):
    _touch()
    info = os.path.join(directory, "{name}-0.1.dist-info")
    os.makedirs(info)
    open(os.path.join(info, "METADATA"), "w").write("Metadata-Version: 2.1\\nName: {name}\\nVersion: 0.1\\n")
    return "{name}-0.1.dist-info"

def build_wheel(directory, config_settings=None, metadata_directory=None):
    _touch()
    files = {{
        "{name}.py": "BUILT_BY_UID = %d\\n" % os.getuid(),
        "{name}-0.1.dist-info/METADATA": "Metadata-Version: 2.1\\nName: {name}\\nVersion: 0.1\\n",
        "{name}-0.1.dist-info/WHEEL": (
            "Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
        ),
    }}
    record = []
    for rel, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (rel, digest, len(text.encode())))
    files["{name}-0.1.dist-info/RECORD"] = "\\n".join(record + ["{name}-0.1.dist-info/RECORD,,"]) + "\\n"
    wheel = "{name}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, wheel), "w") as zf:
        for rel, text in files.items():
            zf.writestr(rel, text)
    return wheel
"""


def project_files(name: str, canary: Path) -> dict[str, str]:
    """A project whose in-tree build backend (no build requirements to download) touches ``canary`` whenever
    pip asks it anything, and builds a one-module wheel recording the uid that built it."""
    return {
        "pyproject.toml": f'[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n\n'
        f'[project]\nname = "{name}"\nversion = "0.1"\n',
        "backend.py": IN_TREE_BACKEND.format(canary=str(canary), name=name),
    }


def test_a_dependency_declared_by_path_is_refused_and_never_built(offline):
    tmp = offline
    canary = tmp / "canary-path-dependency"
    evil = tmp / "evilpkg"
    evil.mkdir()
    for rel, text in project_files("evilpkg", canary).items():
        (evil / rel).write_text(text)
    rec = make_repo(tmp / "clones", "acme/pathdep", deps=f'"evilpkg @ file://{evil}"')
    (item,) = asyncio.run(import_swebench([rec], tmp / "clones"))
    assert not canary.exists()  # today: pip ran the backend on the host while installing the record's deps
    assert item.instance is None and not item.verdict.ok
    why = item.verdict.problems[0]
    assert f"evilpkg @ file://{evil}" in why and "names a URL or path" in why and "--with NAME" in why, why


def test_an_sdist_a_repository_needs_is_built_inside_the_sandbox(offline):
    tmp = offline
    canary = tmp / "canary-sdist-build"
    house = tmp / "wheels"
    house.mkdir()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for rel, text in {**project_files("sbx", canary), "PKG-INFO": "Metadata-Version: 2.1\nName: sbx\n"}.items():
            data = text.encode()
            ti = tarfile.TarInfo(f"sbx-0.1/{rel}")
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    (house / "sbx-0.1.tar.gz").write_bytes(buf.getvalue())
    rec = make_repo(tmp / "clones", "acme/needsbx", deps='"sbx"', extra={"tests/test_calc.py": "import sbx\n" + TESTS})
    (item,) = asyncio.run(import_swebench([rec], tmp / "clones", wheelhouse=house))
    assert not canary.exists()  # today: pip built the sdist on the host
    assert item.verdict.ok and item.instance is not None and item.instance.deps, item.verdict.line()
    built = (Path(item.instance.deps) / "sbx.py").read_text()
    assert built == "BUILT_BY_UID = 65534\n" if os.geteuid() == 0 else built.startswith("BUILT_BY_UID")


def test_one_bad_record_is_reported_and_the_others_are_imported(offline):
    """A repository holding an absolute link stopped the whole batch; now it is refused alone, and the command
    writes the rest, lists what it left out and exits 1."""
    tmp = offline
    bad = make_repo(tmp / "clones", "acme/abslink")
    repo = tmp / "clones" / "acme" / "abslink"
    (repo / "passwd").symlink_to("/etc/passwd")
    git(repo, "add", "passwd")
    git(repo, "commit", "-qm", "link")
    bad["base_commit"] = git(repo, "rev-parse", "HEAD").strip()
    good = make_repo(tmp / "clones", "acme/fine")
    records = tmp / "records.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in (bad, good)))
    out = tmp / "out" / "tasks.jsonl"
    r = CliRunner().invoke(app, ["swe", "import", str(records), "--repos", str(tmp / "clones"), "--out", str(out)])
    flat = " ".join(r.output.split())
    assert r.exit_code == 1, r.output
    assert "acme__fine-1: verified" in flat and "wrote 1 task(s)" in flat
    assert "1 of 2 record(s) not imported (the others were written): acme__abslink-1: rejected:" in flat
    assert "passwd -> /etc/passwd" in flat and "leads outside the repository" in flat
    assert [i.instance_id for i in load_instances(out)] == ["acme__fine-1"]


def test_a_record_cannot_reach_a_clone_outside_the_repos_folder(offline):
    tmp = offline
    outside = make_repo(tmp / "outside", "x")
    linked = dict(outside, instance_id="linked-1", repo="acme/linked")
    dotdot = dict(outside, instance_id="dotdot-1", repo="../outside/x")
    absolute = dict(outside, instance_id="absolute-1", repo=str(tmp / "outside" / "x"))
    (tmp / "clones" / "acme").mkdir(parents=True)
    (tmp / "clones" / "acme" / "linked").symlink_to(tmp / "outside" / "x")
    # a clone inside whose objects live outside (git's alternates): its content would be the outside repo's
    borrowed = tmp / "clones" / "acme" / "borrowed"
    borrowed.mkdir()
    git(borrowed, "init", "-q")
    (borrowed / ".git" / "objects" / "info" / "alternates").write_text(
        f"{tmp / 'outside' / 'x' / '.git' / 'objects'}\n"
    )
    alternates = dict(outside, instance_id="borrowed-1", repo="acme/borrowed")
    results = asyncio.run(import_swebench([dotdot, absolute, linked, alternates], tmp / "clones"))
    for item in results:
        assert item.instance is None and not item.verdict.ok, item.verdict.line()  # today: dotdot verified
    why = {item.verdict.instance_id: item.verdict.problems[0] for item in results}
    assert "is not a repository name" in why["dotdot-1"] and "outside the clones folder" in why["dotdot-1"]
    assert "is not a repository name" in why["absolute-1"]
    assert f"resolves to {tmp / 'outside' / 'x'}, outside {tmp / 'clones'}: refused" in why["linked-1"]
    assert "keeps its objects in" in why["borrowed-1"] and "outside" in why["borrowed-1"]
    assert not (tmp / "cache" / "swebench").exists() or not any((tmp / "cache" / "swebench").iterdir())


def test_export_copies_only_what_stays_inside(backend, tmp_path):
    """What sandboxed code wrote (an installed dependency folder) comes out without links out, devices or FIFOs."""
    (tmp_path / "repo").mkdir()
    script = (
        "mkdir -p site/pkg && echo 'X = 1' > site/pkg/mod.py && chmod 4755 site/pkg/mod.py && "
        "ln -s pkg/mod.py site/inside && ln -s /etc/passwd site/absolute && ln -s ../../etc site/up && "
        "ln -s . site/self && ln -s self/.. site/through && mkfifo site/fifo"
    )

    async def go() -> None:
        async with await backend.create(tmp_path / "repo", Limits(timeout_s=30)) as sb:
            res = await sb.exec(script)
            assert res.ok, res.describe()
            await sb.export("site", tmp_path / "out")

    asyncio.run(go())
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["inside", "pkg", "self"]
    assert (out / "inside").read_text() == "X = 1\n" and os.readlink(out / "inside") == "pkg/mod.py"
    assert (out / "pkg" / "mod.py").stat().st_mode & 0o7777 == 0o755  # no setuid bit comes out
