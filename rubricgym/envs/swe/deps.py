"""A repository's declared test dependencies, installed into a read-only folder every sandbox of its tasks mounts.

The sandbox runs the host's system Python (``/usr/bin/python3``) with its standard library, the Debian packages
installed under ``/usr``, and the pytest runtime; nothing a repository declares is there. A test that needs
another package then skips or errors in the sandbox while it passed where the task was made, so FAIL_TO_PASS /
PASS_TO_PASS lists computed in a normal virtualenv do not hold. ``declared_requirements`` reads what a project
says its tests need (runtime dependencies plus test extras, test dependency groups, test requirements files,
literal ``setup.py`` arguments); ``install_deps`` installs them with ``pip install --target`` inside a sandbox
(nothing a repository names runs on the host) from a wheelhouse folder or wheels downloaded from the package
index the user configures (pip's own ``PIP_*`` settings apply too), once per distinct set, into a folder named by
a hash of the requirements and their sources. The sandbox mounts it read-only at
``DEPS_DIR`` (the agent cannot edit a dependency to make tests pass, and it never shows in a diff).
"""

from __future__ import annotations

import ast
import asyncio
import configparser
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from rubricgym.core.pyast import parse_module
from rubricgym.envs.swe.builtin import cache_root
from rubricgym.envs.swe.sandbox import WORKDIR, Limits, SandboxBackend, SandboxPathError, get_backend
from rubricgym.envs.swe.sandbox.runtime import RUNTIME_DISTRIBUTIONS, SANDBOX_PYTHON

TEST_EXTRAS = ("test", "tests", "testing")
"""Extras and dependency groups that hold test dependencies (``dev`` is left out: it is mostly linters)."""
REQUIREMENT_FILES = (
    "requirements-test.txt",
    "requirements_test.txt",
    "requirements-tests.txt",
    "test-requirements.txt",
    "test_requirements.txt",
    "requirements/test.txt",
    "requirements/tests.txt",
    "requirements/testing.txt",
    "tests/requirements.txt",
)
MANIFEST = "rubricgym-deps.json"


def _requirement_lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-")):  # options (-r, -e, --index-url) are the user's to give
            out.append(line)
    return out


def _from_setup_py(text: str) -> tuple[list[str], str]:
    """Literal ``install_requires``, ``tests_require`` and test ``extras_require`` of a ``setup(...)`` call."""
    try:
        tree = parse_module(text)
    except SyntaxError:
        return [], ""
    reqs: list[str] = []
    name = ""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for kw in node.keywords:
            try:
                value = ast.literal_eval(kw.value)
            except ValueError:
                continue
            if kw.arg in ("install_requires", "tests_require") and isinstance(value, list | tuple):
                reqs += [str(v) for v in value]
            elif kw.arg == "extras_require" and isinstance(value, dict):
                for extra in TEST_EXTRAS:
                    reqs += [str(v) for v in value.get(extra, [])]
            elif kw.arg == "name" and isinstance(value, str):
                name = value
    return reqs, name


def _group(groups: dict, name: str, seen: set[str]) -> list[str]:
    """A PEP 735 dependency group, its ``{include-group = ...}`` entries expanded."""
    if name in seen:
        return []
    seen.add(name)
    out = []
    for entry in groups.get(name, []):
        if isinstance(entry, str):
            out.append(entry)
        elif isinstance(entry, dict) and isinstance(entry.get("include-group"), str):
            out += _group(groups, entry["include-group"], seen)
    return out


def declared_requirements(root: Path) -> list[str]:
    """What the project at ``root`` declares its tests need, as pip requirements (sorted, each once).

    The project itself and what the sandbox's pytest runtime already provides (``pytest``, ``pluggy``...) are
    left out, as are requirements whose environment markers exclude this Python."""
    reqs: list[str] = []
    names: set[str] = set()
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(errors="replace"))
        except tomllib.TOMLDecodeError:
            data = {}
        project = data.get("project", {})
        names.add(str(project.get("name", "")))
        reqs += [str(r) for r in project.get("dependencies", [])]
        extras = project.get("optional-dependencies", {})
        groups = data.get("dependency-groups", {})
        for key in TEST_EXTRAS:
            reqs += [str(r) for r in extras.get(key, [])]
            reqs += _group(groups, key, set())
    setup_cfg = root / "setup.cfg"
    if setup_cfg.is_file():
        cfg = configparser.ConfigParser(interpolation=None)
        try:
            cfg.read_string(setup_cfg.read_text(errors="replace"))
        except configparser.Error:
            cfg = configparser.ConfigParser()
        names.add(cfg.get("metadata", "name", fallback=""))
        reqs += _requirement_lines(cfg.get("options", "install_requires", fallback=""))
        for key in TEST_EXTRAS:
            reqs += _requirement_lines(cfg.get("options.extras_require", key, fallback=""))
    setup_py = root / "setup.py"
    if setup_py.is_file():
        found, name = _from_setup_py(setup_py.read_text(errors="replace"))
        reqs += found
        names.add(name)
    for rel in REQUIREMENT_FILES:
        if (root / rel).is_file():
            reqs += _requirement_lines((root / rel).read_text(errors="replace"))
    skip = {canonicalize_name(n) for n in [*names, *RUNTIME_DISTRIBUTIONS] if n}
    out: dict[str, None] = {}
    for text in reqs:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) in skip or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        out[str(req)] = None
    return sorted(out)


@dataclass
class DepsInstall:
    """What ``install_deps`` made: the folder (``None`` when nothing was asked), what is in it, what failed."""

    path: Path | None
    installed: list[str] = field(default_factory=list)
    """``name==version`` of every distribution in the folder (the requirements and what they need)."""
    failed: dict[str, str] = field(default_factory=dict)
    """Requirement -> the end of pip's error, for each requirement that could not be installed."""


def direct_reference(requirement: str) -> str | None:
    """Why ``requirement`` is refused (it names a URL or a path, ``name @ file://...``: installing it would run
    whatever build code lies there, on a path a record chose), or ``None`` for a plain ``name[extras] specifier``."""
    try:
        req = Requirement(requirement)
    except InvalidRequirement as e:
        return f"not a requirement ({e})"
    if req.url:
        return (
            f"{requirement!r} names a URL or path ({req.url}) instead of a version: such a dependency is never "
            "installed (its build code would run on a path the record chose)"
        )
    return None


def _index_args(index_url: str | None) -> list[str]:
    return ["--index-url", index_url] if index_url else []


def _sandbox_python_version() -> str:
    try:
        res = subprocess.run(
            [SANDBOX_PYTHON, "-c", "import sys; print('{}.{}'.format(*sys.version_info[:2]))"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return res.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def _download(requirements: list[str], dest: Path, index_url: str | None, py: str, timeout: float) -> tuple[bool, str]:
    """Wheels only (``--only-binary :all:``): pip reads their metadata and runs nothing of theirs on the host."""
    args = ["--only-binary", ":all:", "--dest", str(dest), *_index_args(index_url)]
    if py != "unknown":
        args += ["--python-version", py]
    try:
        res = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-input", "--disable-pip-version-check", "-q", *args]
            + requirements,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return False, f"pip download timed out after {timeout:g} s"
    return res.returncode == 0, (res.stderr or res.stdout).strip()[-800:]


def _dists(folder: Path) -> list[str]:
    out = []
    for info in sorted(folder.glob("*.dist-info")):
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        out.append(f"{canonicalize_name(name)}=={version}")
    return out


SANDBOX_PIP = [
    SANDBOX_PYTHON,
    "-m",
    "pip",
    "install",
    "--no-input",
    "--disable-pip-version-check",
    "-q",
    "--no-index",
    "--find-links",
    f"{WORKDIR}/wheels",
    "--no-build-isolation",
    "--no-compile",
    "--target",
    f"{WORKDIR}/site",
]
"""pip inside the sandbox: only the staged files, no network, builds (of sdists) with the sandbox's setuptools."""


async def _install_in_sandbox(
    stage: Path, requirements: list[str], backend: SandboxBackend, limits: Limits, out: Path
) -> dict[str, str]:
    """Install ``requirements`` from ``stage/wheels`` into ``/work/site`` in one sandbox, all at once or else
    each alone; copy ``site`` out to ``out``. Returns requirement -> the end of pip's error for each that failed."""
    failed: dict[str, str] = {}
    async with await backend.create(stage, limits) as sb:
        res = await sb.exec([*SANDBOX_PIP, *requirements])
        if not res.ok:
            await sb.exec(["/bin/rm", "-rf", f"{WORKDIR}/site"])
            for req in requirements:
                res = await sb.exec([*SANDBOX_PIP, "--upgrade", req])
                if not res.ok:
                    failed[req] = (res.describe() if res.limit else (res.stderr or res.stdout)).strip()[-800:]
        with contextlib.suppress(SandboxPathError):  # nothing installed: no folder
            await sb.export("site", out)
    return failed


async def install_deps_async(
    requirements: list[str],
    *,
    backend: SandboxBackend | None = None,
    wheelhouse: str | Path | None = None,
    index_url: str | None = None,
    root: Path | None = None,
    timeout: float = 600.0,
    limits: Limits | None = None,
) -> DepsInstall:
    """``requirements`` installed into ``<root>/<hash>`` (default root: ``<cache>/deps``), once, with nothing of
    theirs run on the host.

    ``wheelhouse`` is a folder of wheels/sdists used instead of any index; else wheels only are downloaded on the
    host (``pip download --only-binary :all:``) from ``index_url`` or pip's own configuration. pip then installs
    the staged files inside a sandbox of ``backend`` (default bwrap; no network), where an sdist's build code
    runs, and the result is copied out (``Sandbox.export``). A requirement naming a URL or path is refused
    (``direct_reference``). When installing everything at once fails, each requirement is tried alone, so one
    unavailable package costs only itself."""
    if not requirements:
        return DepsInstall(None)
    house = Path(wheelhouse).expanduser().resolve() if wheelhouse is not None else None
    if house is not None and not house.is_dir():
        raise FileNotFoundError(f"wheelhouse {house} is not a folder: give a folder of wheels (pip download -d DIR)")
    py = _sandbox_python_version()
    listing = sorted((p.name, p.stat().st_size) for p in house.iterdir()) if house is not None else []
    key = hashlib.sha256(
        json.dumps(["sandboxed", sorted(requirements), str(house), listing, index_url, py]).encode()
    ).hexdigest()[:16]
    base = root or cache_root() / "deps"
    target, manifest = base / key, base / f"{key}.json"
    if target.is_dir() and manifest.is_file():  # only complete installs are recorded
        data = json.loads(manifest.read_text())
        return DepsInstall(target, list(data["installed"]), dict(data["failed"]))
    base.mkdir(parents=True, exist_ok=True)
    failed = {r: why for r in requirements if (why := direct_reference(r))}
    wanted = [r for r in requirements if r not in failed]
    with tempfile.TemporaryDirectory(dir=base, prefix=".deps-") as tmp:
        stage, folder = Path(tmp) / "stage", Path(tmp) / "site"
        wheels = stage / "wheels"
        wheels.mkdir(parents=True)
        os.chmod(stage, 0o755)
        if house is not None:
            for f in house.iterdir():
                if f.is_file() and not f.is_symlink():
                    shutil.copyfile(f, wheels / f.name)
        elif wanted:
            ok, err = await asyncio.to_thread(_download, wanted, wheels, index_url, py, timeout)
            if not ok:
                for req in list(wanted):
                    ok, err = await asyncio.to_thread(_download, [req], wheels, index_url, py, timeout)
                    if not ok:
                        failed[req] = f"{err} (only wheels come from an index: an sdist's build code would run on "
                        failed[req] += "the host; put the sdist in --wheelhouse to have it built in the sandbox)"
                        wanted.remove(req)
        if wanted:
            own = backend is None
            backend = backend or get_backend("bwrap")
            lim = limits or Limits(
                timeout_s=timeout, lifetime_s=timeout * (len(wanted) + 2), memory_mb=6144, disk_mb=4096
            )
            try:
                failed.update(await _install_in_sandbox(stage, wanted, backend, lim, folder))
            finally:
                if own:
                    await backend.aclose()
        installed = _dists(folder) if folder.is_dir() else []
        if not installed:
            return DepsInstall(None, [], failed)
        shutil.rmtree(target, ignore_errors=True)
        folder.rename(target)
    if not failed:  # a failure may be passing (an index down): try again next time
        manifest.write_text(json.dumps({"requirements": requirements, "installed": installed, "failed": failed}))
    return DepsInstall(target, installed, failed)


def install_deps(
    requirements: list[str],
    *,
    backend: SandboxBackend | None = None,
    wheelhouse: str | Path | None = None,
    index_url: str | None = None,
    root: Path | None = None,
    timeout: float = 600.0,
) -> DepsInstall:
    """``install_deps_async`` for synchronous callers; from inside a running event loop it runs in a thread of
    its own (blocking the caller, as a synchronous call does)."""
    if not requirements:
        return DepsInstall(None)

    def run() -> DepsInstall:
        return asyncio.run(
            install_deps_async(
                requirements, backend=backend, wheelhouse=wheelhouse, index_url=index_url, root=root, timeout=timeout
            )
        )

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run()
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result()
