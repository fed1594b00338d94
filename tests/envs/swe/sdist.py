"""A tiny pure-Python package with a pytest suite, packed as an sdist in a folder pip can install from offline."""

from __future__ import annotations

import tarfile
from pathlib import Path

NAME, VERSION = "tallypkg", "0.1"
FILES = {
    "pyproject.toml": f'[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
    f'[project]\nname = "{NAME}"\nversion = "{VERSION}"\n',
    "tallypkg/__init__.py": '''"""Small counting helpers."""


def total_below(n):
    """The sum of 0 .. n-1."""
    i = 0
    s = 0
    while i < n:
        s = s + i
        i = i + 1
    return s


def clamp(x, lo, hi):
    """``x`` limited to ``[lo, hi]``."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def is_even(n):
    return n % 2 == 0
''',
    "tests/__init__.py": "",
    "tests/test_tally.py": """from tallypkg import clamp, is_even, total_below


def test_total_below():
    assert total_below(5) == 10


def test_total_below_zero():
    assert total_below(0) == 0


def test_clamp_low():
    assert clamp(-1, 0, 10) == 0


def test_clamp_high():
    assert clamp(11, 0, 10) == 10


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5


def test_is_even():
    assert is_even(4) and not is_even(3)
""",
}


def make_sdist(links: Path) -> Path:
    """Write ``tallypkg-0.1.tar.gz`` into ``links`` (a find-links folder) and return its path."""
    src = links / "src" / f"{NAME}-{VERSION}"
    for rel, text in FILES.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    archive = links / f"{NAME}-{VERSION}.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(src, arcname=src.name)
    return archive
