"""Fetch a project's source distribution from PyPI (``pip download --no-binary :all: --no-deps``) and unpack it.

Sdists are cached under ``<cache>/sdists``; unpacking uses tarfile's ``data`` filter (no absolute paths, no
links out of the tree, no device files).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from rubricgym.envs.swe.builtin import cache_root

# Small pure-Python projects whose sdists ship a pytest-runnable test suite (checked by the tests).
KNOWN_PROJECTS = ("inflection==0.5.1", "six==1.17.0", "cachetools==5.5.2")


class SourceUnavailable(RuntimeError):
    """The sdist could not be downloaded (PyPI unreachable, no sdist for that version...)."""


ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")


def _extract(archive: Path, dest: Path) -> None:
    dest.mkdir(parents=True)
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(dest)
    else:
        with tarfile.open(archive) as tf:
            tf.extractall(dest, filter="data")


def unpack_sdist(archive: str | Path, cache: Path | None = None) -> Path:
    """The project directory inside a local sdist archive, unpacked once under ``<cache>/sdists``."""
    path = Path(archive).expanduser().resolve()
    if not path.name.endswith(ARCHIVE_SUFFIXES):
        raise SourceUnavailable(f"{path}: not an sdist archive (expected one of {', '.join(ARCHIVE_SUFFIXES)})")
    digest = hashlib.sha1(path.read_bytes()).hexdigest()[:12]
    base = cache or cache_root() / "sdists"
    target = base / f"local-{digest}"
    if not (target.is_dir() and any(target.iterdir())):
        base.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=base) as tmp:
            try:
                _extract(path, Path(tmp) / "unpacked")
            except (tarfile.TarError, zipfile.BadZipFile, OSError) as e:
                raise SourceUnavailable(f"{path}: cannot unpack: {e}") from None
            shutil.rmtree(target, ignore_errors=True)
            (Path(tmp) / "unpacked").rename(target)
    dirs = [p for p in sorted(target.iterdir()) if p.is_dir()]
    return dirs[0] if len(dirs) == 1 else target


def fetch_sdist(requirement: str, cache: Path | None = None, timeout: float = 120.0) -> Path:
    """The unpacked project directory of ``requirement`` (e.g. ``"six==1.17.0"``), downloaded with pip.

    pip's own configuration applies (``PIP_INDEX_URL``, ``PIP_FIND_LINKS``, ``PIP_NO_INDEX``), so a mirror or a
    folder of sdists works offline.
    """
    base = cache or cache_root() / "sdists"
    base.mkdir(parents=True, exist_ok=True)
    safe = requirement.replace("=", "_").replace("<", "_").replace(">", "_").replace(" ", "")
    target = base / safe
    if target.is_dir() and any(target.iterdir()):
        return next(p for p in sorted(target.iterdir()) if p.is_dir())
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-binary",
            ":all:",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-d",
            tmp,
            requirement,
        ]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise SourceUnavailable(f"pip download {requirement} timed out after {timeout:g} s") from None
        files = [p for p in Path(tmp).iterdir() if p.suffix in (".gz", ".zip", ".bz2", ".xz")]
        if res.returncode != 0 or not files:
            raise SourceUnavailable(f"pip download {requirement} failed: {res.stderr.strip()[-800:]}")
        unpacked = Path(tmp) / "unpacked"
        _extract(files[0], unpacked)
        shutil.copy2(files[0], base / files[0].name)
        unpacked.rename(target)
    return next(p for p in sorted(target.iterdir()) if p.is_dir())
