"""Tree diffs the host can trust: never through a link, every change shown, bounded in size."""

from __future__ import annotations

from pathlib import Path

from rubricgym.envs.swe.patch import parse_patch, patch_files, unquote_path
from rubricgym.envs.swe.sandbox.treediff import diff_trees, open_beneath, quote_path


def _trees(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    return a, b


def test_new_empty_file_is_in_the_patch(tmp_path):
    a, b = _trees(tmp_path)
    (b / "pkg").mkdir()
    (b / "pkg" / "__init__.py").write_text("")
    diff = diff_trees(a, b)
    assert diff == "diff --git a/pkg/__init__.py b/pkg/__init__.py\nnew file mode 100644\n"
    (fp,) = parse_patch(diff)
    assert fp.path == "pkg/__init__.py" and fp.is_new


def test_odd_names_are_quoted_and_read_back(tmp_path):
    a, b = _trees(tmp_path)
    name = 'x\n+++ b:y\t"q\\'
    (b / name).write_text("1\n")
    (b / "caf\xe9.py").write_text("2\n")
    diff = diff_trees(a, b)
    assert "\n+++ b:y" not in diff
    assert set(patch_files(diff)) == {name, "caf\xe9.py"}
    for n in (name, "caf\xe9.py", "plain/name.py", "bad\udcff"):
        assert unquote_path(quote_path(n)) == n


def test_total_diff_size_is_capped(tmp_path):
    a, b = _trees(tmp_path)
    for i in range(20):
        (b / f"f{i:02d}.txt").write_text("line\n" * 200)
    diff = diff_trees(a, b, max_bytes=5000)
    assert len(diff) < 5000 + 600
    assert "diff truncated at 5000 bytes" in diff and "f19.txt" in diff.splitlines()[-1]


def test_open_beneath_never_follows_a_link(tmp_path):
    import errno

    import pytest

    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_text("in")
    (tmp_path / "secret").write_text("out")
    (root / "link").symlink_to(tmp_path)
    (root / "flink").symlink_to(tmp_path / "secret")
    fd = open_beneath(str(root), "d/f")
    assert __import__("os").read(fd, 10) == b"in"
    for rel in ("link/secret", "flink"):
        with pytest.raises(OSError) as e:
            open_beneath(str(root), rel)
        assert e.value.errno in (errno.ELOOP, errno.ENOTDIR)
