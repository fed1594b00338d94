"""Fetch a project's source distribution from PyPI (``pip download --no-binary :all: --no-deps``) and unpack it.

Sdists are cached under ``<cache>/sdists``; unpacking uses tarfile's ``data`` filter (no absolute paths, no
links out of the tree, no device files).
"""

from __future__ import annotations

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


def fetch_sdist(requirement: str, cache: Path | None = None, timeout: float = 120.0) -> Path:
    """The unpacked project directory of ``requirement`` (e.g. ``"six==1.17.0"``)."""
    base = cache or cache_root() / "sdists"
    base.mkdir(parents=True, exist_ok=True)
    safe = requirement.replace("=", "_").replace("<", "_").replace(">", "_").replace(" ", "")
    target = base / safe
    if target.is_dir() and any(target.iterdir()):
        return next(p for p in sorted(target.iterdir()) if p.is_dir())
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "--no-build-isolation",
               "-q", "-d", tmp, requirement]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise SourceUnavailable(f"pip download {requirement} timed out after {timeout:g} s") from None
        files = [p for p in Path(tmp).iterdir() if p.suffix in (".gz", ".zip", ".bz2", ".xz")]
        if res.returncode != 0 or not files:
            raise SourceUnavailable(f"pip download {requirement} failed: {res.stderr.strip()[-800:]}")
        unpacked = Path(tmp) / "unpacked"
        unpacked.mkdir()
        archive = files[0]
        if archive.suffix == ".zip":
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(unpacked)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(unpacked, filter="data")
        shutil.copy2(archive, base / archive.name)
        unpacked.rename(target)
    return next(p for p in sorted(target.iterdir()) if p.is_dir())
