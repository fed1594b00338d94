import ast

import pytest

from rubricgym.envs.swe.mutate import apply_mutation, find_mutations
from rubricgym.envs.swe.patch import hunk_edits, is_test_path, parse_patch, patch_files
from rubricgym.envs.swe.sandbox.treediff import diff_trees, file_diff

SRC = """def clamp(x, lo, hi):
    if x < lo:
        return lo
    log("clamped", x)
    return min(x, hi)


def window(items, n):
    out = []
    for i in range(len(items) - n + 1):
        out.append(items[i:i + n])
    return out if n > 0 and items else []
"""


def _by_kind(kind):
    return [m for m in find_mutations("m.py", SRC) if m.kind == kind]


@pytest.mark.parametrize(
    "kind, before, after",
    [
        ("flipped_comparison", "if x < lo:", "if x >= lo:"),
        ("off_by_one", "len(items) - n + 1", "len(items) - n + 2"),
        ("swapped_arguments", "min(x, hi)", "min(hi, x)"),
        ("wrong_return", "return lo", "return None"),
        ("flipped_boolean_operator", "n > 0 and items", "n > 0 or items"),
        ("flipped_arithmetic", "len(items) - n + 1", "len(items) + n + 1"),
    ],
)
def test_each_operator_rewrites_only_its_site(kind, before, after):
    found = [apply_mutation(SRC, m) for m in _by_kind(kind)]
    hits = [new for new in found if after in new and new.replace(after, before, 1) == SRC]
    assert hits, f"no {kind} mutation turns {before!r} into {after!r}"


def test_statement_mutations_delete_whole_lines_and_keep_blocks_valid():
    removed = [apply_mutation(SRC, m) for m in _by_kind("removed_call")]
    assert any('log("clamped", x)' not in new for new in removed)
    dropped = [apply_mutation(SRC, m) for m in _by_kind("dropped_branch")]
    assert any("if x < lo" not in new for new in dropped)
    for new in removed + dropped:
        ast.parse(new)


def test_no_mutation_in_main_guard():
    src = "def f():\n    return 1\n\nif __name__ == '__main__':\n    print(f() + 2)\n"
    assert all(m.line < 4 for m in find_mutations("f.py", src))


def test_gold_patch_round_trip():
    m = _by_kind("flipped_comparison")[0]
    mutant = apply_mutation(SRC, m)
    patch = file_diff("pkg/m.py", mutant.encode(), SRC.encode())
    assert patch_files(patch) == ["pkg/m.py"]
    (fp,) = parse_patch(patch)
    ((old, new),) = hunk_edits(fp)
    assert mutant.count(old) == 1 and mutant.replace(old, new) == SRC


def test_diff_trees_new_deleted_and_no_trailing_newline(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "d").mkdir(parents=True)
    (b / "d").mkdir(parents=True)
    (a / "d" / "gone.py").write_text("x = 1\n")
    (a / "same.py").write_text("same\n")
    (b / "same.py").write_text("same\n")
    (a / "edit.txt").write_text("one\ntwo")
    (b / "edit.txt").write_text("one\nthree")
    (b / "new.py").write_text("y = 2\n")
    (b / "__pycache__").mkdir()
    (b / "__pycache__" / "x.pyc").write_bytes(b"\0")
    diff = diff_trees(a, b)
    assert patch_files(diff) == ["d/gone.py", "edit.txt", "new.py"]
    assert "\\ No newline at end of file" in diff and "same.py" not in diff and "pyc" not in diff
    files = {fp.path: fp for fp in parse_patch(diff)}
    assert files["new.py"].is_new and files["d/gone.py"].is_deleted
    assert hunk_edits(files["edit.txt"]) == [("one\ntwo", "one\nthree")]


@pytest.mark.parametrize(
    "path, expected",
    [
        ("tests/test_x.py", True),
        ("pkg/tests/helpers.py", True),
        ("test_six.py", True),
        ("conftest.py", True),
        ("pkg/core_test.py", True),
        ("pkg/core.py", False),
        ("pkg/testing_utils.py", False),
        ("setup.py", False),
    ],
)
def test_is_test_path(path, expected):
    assert is_test_path(path) is expected
