"""SWE-bench-format samples with the real dataset's mess, over a tiny git repository made here (no downloads).

``make_clone(root)`` writes ``acme/minicalc`` with two commits (buggy base, fix); ``make_records(clone)`` the
records: test lists as JSON strings, extra and missing optional fields, a test patch that adds a test file,
an ``environment_setup_commit``, a bug in a CRLF file, a record whose tests need a dependency (``tinydep``), one
whose gold patch does not fix its failing test and one whose repository has no clone. ``make_wheel(folder)``
builds ``tinydep``'s wheel, a local wheelhouse for ``pip install --no-index --find-links``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import zipfile
from pathlib import Path

BUGGY = '''"""Small arithmetic helpers."""


def add(a, b):
    return a + b


def mean(xs):
    return sum(xs) / (len(xs) + 1)


def clamp(x, lo, hi):
    return max(lo, min(x, hi))
'''
LEGACY_BUGGY = '"""Old helpers kept with Windows line endings."""\r\n\r\n\r\ndef double(x):\r\n    return x * 3\r\n'
TEST_BASIC = """from minicalc import add, clamp
from minicalc.legacy import double


def test_add():
    assert add(2, 3) == 5


def test_clamp():
    assert clamp(7, 0, 5) == 5


def test_double():
    assert double(4) == 8
"""
TEST_FMT = """import pytest

from minicalc import add, mean

tinydep = pytest.importorskip("tinydep")


def test_fmt_add():
    assert tinydep.fmt(add(1, 2)) == "3.00"


def test_fmt_mean():
    assert tinydep.fmt(mean([1, 2, 3])) == "2.00"
"""
TEST_MEAN = """from minicalc import mean


def test_mean():
    assert mean([2, 4]) == 3
"""
BASE_FILES = {
    "pyproject.toml": '[project]\nname = "minicalc"\nversion = "0.1"\n\n[project.optional-dependencies]\n'
    'test = ["tinydep>=0.1", "pytest>=7"]\n',
    "minicalc/__init__.py": BUGGY,
    "minicalc/legacy.py": LEGACY_BUGGY,
    "tests/__init__.py": "",
    "tests/test_basic.py": TEST_BASIC,
    "tests/test_fmt.py": TEST_FMT,
}
FIXED = {
    "minicalc/__init__.py": BUGGY.replace("(len(xs) + 1)", "len(xs)"),
    "minicalc/legacy.py": LEGACY_BUGGY.replace("x * 3", "x * 2"),
    "tests/test_mean.py": TEST_MEAN,
}
REPO = "acme/minicalc"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "core.autocrlf=false", *args],
        check=True,
        capture_output=True,
    ).stdout.decode()  # bytes: text mode would turn the CRLF lines of a diff into LF


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(text.encode())


def make_clone(root: Path) -> tuple[Path, str, str]:
    """``root/acme/minicalc``: a git clone with a buggy base commit and a fix commit; (path, base, fix)."""
    repo = root / REPO
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    _write(repo, BASE_FILES)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD").strip()
    _write(repo, FIXED)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "fix")
    fix = git(repo, "rev-parse", "HEAD").strip()
    return repo, base, fix


def make_records(repo: Path, base: str, fix: str) -> list[dict]:
    """Five records over the clone (see the module docstring); the first three verify given ``tinydep``."""
    mean_fix = git(repo, "diff", base, fix, "--", "minicalc/__init__.py")
    double_fix = git(repo, "diff", base, fix, "--", "minicalc/legacy.py")
    adds_test = git(repo, "diff", base, fix, "--", "tests/test_mean.py")
    assert "\r\n" in double_fix and "new file mode" in adds_test
    common = {"repo": REPO, "base_commit": base, "problem_statement": "`mean([2, 4])` returns 2, not 3.\r\n"}
    return [
        {
            **common,
            "instance_id": "acme__minicalc-1",
            "patch": mean_fix,
            "test_patch": adds_test,
            "FAIL_TO_PASS": json.dumps(["tests/test_mean.py::test_mean"]),
            "PASS_TO_PASS": json.dumps(["tests/test_basic.py::test_add", "tests/test_basic.py::test_clamp"]),
            "hints_text": "look at the divisor",
            "created_at": "2024-01-02T03:04:05Z",
            "version": "0.1",
            "environment_setup_commit": base,
            "some_future_field": {"nested": [1, 2]},
        },
        {  # no test_patch, no PASS_TO_PASS; the bug is in a CRLF file
            **common,
            "instance_id": "acme__minicalc-2",
            "problem_statement": "`double(4)` returns 12.",
            "patch": double_fix,
            "FAIL_TO_PASS": '["tests/test_basic.py::test_double"]',
        },
        {  # the tests need tinydep, which the sandbox lacks unless it is installed
            **common,
            "instance_id": "acme__minicalc-3",
            "patch": mean_fix,
            "test_patch": "",
            "FAIL_TO_PASS": json.dumps(["tests/test_fmt.py::test_fmt_mean"]),
            "PASS_TO_PASS": json.dumps(["tests/test_fmt.py::test_fmt_add"]),
            "version": "0.1",
        },
        {  # the gold patch fixes another bug than the failing test's
            **common,
            "instance_id": "acme__minicalc-4",
            "patch": double_fix,
            "test_patch": adds_test,
            "FAIL_TO_PASS": json.dumps(["tests/test_mean.py::test_mean"]),
            "PASS_TO_PASS": "[]",
        },
        {**common, "instance_id": "other__gone-1", "repo": "other/gone", "patch": mean_fix, "FAIL_TO_PASS": "[]"},
    ]


def write_jsonl_crlf(path: Path, records: list[dict]) -> Path:
    """Records one per line with Windows line endings, as a file edited on Windows has them."""
    path.write_bytes("".join(json.dumps(r) + "\r\n" for r in records).encode())
    return path


def make_wheel(folder: Path, name: str = "tinydep", version: str = "0.1") -> Path:
    """A pure-Python wheel of ``name`` (``fmt(x)`` formats a number with two decimals) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": 'def fmt(x):\n    return f"{x:.2f}"\n',
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: rubricgym-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for rel, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{rel},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join(record + [f"{info}/RECORD,,"]) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for rel, text in files.items():
            zf.writestr(rel, text)
    return wheel
