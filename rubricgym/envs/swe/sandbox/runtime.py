"""Host paths shared by sandboxes: the sandbox root directory and the read-only pytest runtime.

Sandboxed commands run ``/usr/bin/python3`` (the system Python; the host's own interpreter may live in a home
directory the unprivileged sandbox user cannot read). Tests need pytest, so the pure-Python distributions of
the host's pytest and its dependencies are copied once into ``<root>/runtime/`` and mounted read-only at
``/opt/rubricgym`` (on ``PYTHONPATH``) in every sandbox. A task's dependency folder is copied the same way
(``shared_copy``) so the unprivileged sandbox user can read it wherever the cache lives.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata as md
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

SANDBOX_PYTHON = "/usr/bin/python3"
RUNTIME_DISTRIBUTIONS = ("pytest", "pluggy", "iniconfig", "packaging", "pygments")


def sandbox_root() -> Path:
    """``$RUBRICGYM_SANDBOX_DIR`` or ``<tmp>/rubricgym-sandboxes-<uid>``: created 0711 and owned by us.

    It must be traversable by the unprivileged sandbox user (a home directory usually is not), and it is
    refused if someone else owns it or it is a symlink (a pre-planted path in a shared /tmp).
    """
    default = Path(tempfile.gettempdir()) / f"rubricgym-sandboxes-{os.geteuid()}"
    root = Path(os.environ.get("RUBRICGYM_SANDBOX_DIR") or default)
    root.mkdir(parents=True, exist_ok=True, mode=0o711)
    st = root.lstat()
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.geteuid():
        raise RuntimeError(
            f"sandbox root {root} is a symlink or owned by uid {st.st_uid}, not us: remove it "
            "or set RUBRICGYM_SANDBOX_DIR to a directory we own"
        )
    os.chmod(root, 0o711)
    return root


def _dist_names() -> list[str]:
    from packaging.requirements import Requirement

    names, todo = [], list(RUNTIME_DISTRIBUTIONS)
    while todo:
        name = todo.pop()
        if name in names:
            continue
        names.append(name)
        for req in md.requires(name) or []:
            r = Requirement(req)
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(r.name)
    return sorted(names)


def runtime_dir() -> Path:
    """The read-only pytest runtime directory, built from the host's installed distributions on first use."""
    names = _dist_names()
    key = hashlib.sha1("|".join(["pyc", *(f"{n}={md.version(n)}" for n in names)]).encode()).hexdigest()[:12]
    target = sandbox_root() / "runtime" / f"pytest-{key}"
    if target.is_dir():
        return target
    target.parent.mkdir(exist_ok=True, mode=0o755)
    os.chmod(target.parent, 0o755)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".build-"))
    for name in names:
        dist = md.distribution(name)
        for f in dist.files or []:
            parts = f.parts
            if not parts or parts[0] == ".." or "__pycache__" in parts or f.suffix == ".pyc":
                continue
            src = Path(str(dist.locate_file(f)))
            if src.is_file():
                dst = tmp.joinpath(*parts)
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
    if os.path.exists(SANDBOX_PYTHON):  # bytecode for the sandbox's Python: pytest then starts 2-3x faster
        subprocess.run(
            [SANDBOX_PYTHON, "-m", "compileall", "-q", "-j", "0", str(tmp)], capture_output=True, timeout=300
        )
    for dirpath, _dirnames, filenames in os.walk(tmp):
        os.chmod(dirpath, 0o755)
        for fn in filenames:
            os.chmod(os.path.join(dirpath, fn), 0o644)
    try:
        tmp.rename(target)
    except OSError:  # another process built it first
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _make_readable(root: Path) -> None:
    for dirpath, _dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for fn in filenames:
            full = os.path.join(dirpath, fn)
            if not os.path.islink(full):
                os.chmod(full, 0o755 if os.stat(full).st_mode & 0o111 else 0o644)


def shared_copy(src: Path, kind: str = "deps") -> Path:
    """A world-readable copy of the folder ``src`` under ``<sandbox root>/<kind>/``, made once per content.

    The sandbox user must read what is mounted (a cache under a private home directory is not readable by it),
    and a copy keyed by path and file sizes/times cannot change under a running sandbox."""
    from rubricgym.envs.swe.sandbox.treediff import fingerprint

    src = Path(src).resolve()
    if not src.is_dir():
        raise FileNotFoundError(f"{src} is not a folder")
    sig = hashlib.sha1(repr((str(src), sorted(fingerprint(str(src)).items()))).encode()).hexdigest()[:20]
    parent = sandbox_root() / kind
    parent.mkdir(exist_ok=True, mode=0o755)
    os.chmod(parent, 0o755)
    target = parent / sig
    if target.is_dir():
        return target
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=".copy-"))
    shutil.copytree(src, tmp / "t", symlinks=True)
    _make_readable(tmp / "t")
    with contextlib.suppress(OSError):  # another process made it first
        (tmp / "t").rename(target)
    shutil.rmtree(tmp, ignore_errors=True)
    return target
