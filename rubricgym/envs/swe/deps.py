"""A repository's declared test dependencies, installed into a read-only folder every sandbox of its tasks mounts.

The sandbox runs the host's system Python (``/usr/bin/python3``) with its standard library, the Debian packages
installed under ``/usr``, and the pytest runtime; nothing a repository declares is there. A test that needs
another package then skips or errors in the sandbox while it passed where the task was made, so FAIL_TO_PASS /
PASS_TO_PASS lists computed in a normal virtualenv do not hold. ``declared_requirements`` reads what a project
says its tests need (runtime dependencies plus test extras, test dependency groups, test requirements files,
literal ``setup.py`` arguments); ``install_deps`` installs them with ``pip install --target`` from a wheelhouse
folder or the package index the user configures (pip's own ``PIP_*`` settings apply too), once per distinct
set, into a folder named by a hash of the requirements and their sources. The sandbox mounts it read-only at
``DEPS_DIR`` (the agent cannot edit a dependency to make tests pass, and it never shows in a diff).
"""

from __future__ import annotations

import ast
import configparser
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from rubricgym.envs.swe.builtin import cache_root
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
        tree = ast.parse(text)
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


def _sources(wheelhouse: Path | None, index_url: str | None) -> list[str]:
    if wheelhouse is not None:
        return ["--no-index", "--find-links", str(wheelhouse)]
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


def _pip(args: list[str], timeout: float) -> tuple[bool, str]:
    try:
        res = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-input", "--disable-pip-version-check", "-q", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return False, f"pip install timed out after {timeout:g} s"
    return res.returncode == 0, (res.stderr or res.stdout).strip()[-800:]


def _dists(folder: Path) -> list[str]:
    out = []
    for info in sorted(folder.glob("*.dist-info")):
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        out.append(f"{canonicalize_name(name)}=={version}")
    return out


def install_deps(
    requirements: list[str],
    *,
    wheelhouse: str | Path | None = None,
    index_url: str | None = None,
    root: Path | None = None,
    timeout: float = 600.0,
) -> DepsInstall:
    """``requirements`` installed with pip into ``<root>/<hash>`` (default root: ``<cache>/deps``), once.

    ``wheelhouse`` is a folder of wheels/sdists used instead of any index (``--no-index --find-links``);
    ``index_url`` a package index; with neither, pip's own configuration decides. When installing everything at
    once fails, each requirement is tried alone, so one unavailable package costs only itself."""
    if not requirements:
        return DepsInstall(None)
    house = Path(wheelhouse).expanduser().resolve() if wheelhouse is not None else None
    if house is not None and not house.is_dir():
        raise FileNotFoundError(f"wheelhouse {house} is not a folder: give a folder of wheels (pip download -d DIR)")
    py = _sandbox_python_version()
    listing = sorted((p.name, p.stat().st_size) for p in house.iterdir()) if house is not None else []
    key = hashlib.sha256(json.dumps([sorted(requirements), str(house), listing, index_url, py]).encode()).hexdigest()[
        :16
    ]
    base = root or cache_root() / "deps"
    target, manifest = base / key, base / f"{key}.json"
    if target.is_dir() and manifest.is_file():  # only complete installs are recorded
        data = json.loads(manifest.read_text())
        return DepsInstall(target, list(data["installed"]), dict(data["failed"]))
    base.mkdir(parents=True, exist_ok=True)
    common = _sources(house, index_url)
    if py != "unknown" and py != "{}.{}".format(*sys.version_info[:2]):  # wheels for the sandbox's Python, not ours
        common += ["--python-version", py, "--only-binary", ":all:"]
    failed: dict[str, str] = {}
    with tempfile.TemporaryDirectory(dir=base, prefix=".deps-") as tmp:
        folder = Path(tmp) / "site"
        ok, err = _pip(["--target", str(folder), *common, *requirements], timeout)
        if not ok:
            shutil.rmtree(folder, ignore_errors=True)
            for req in requirements:
                ok, err = _pip(["--target", str(folder), "--upgrade", *common, req], timeout)
                if not ok:
                    failed[req] = err
        installed = _dists(folder) if folder.is_dir() else []
        if not installed:
            return DepsInstall(None, [], failed)
        shutil.rmtree(target, ignore_errors=True)
        folder.rename(target)
    if not failed:  # a failure may be passing (an index down): try again next time
        manifest.write_text(json.dumps({"requirements": requirements, "installed": installed, "failed": failed}))
    return DepsInstall(target, installed, failed)
