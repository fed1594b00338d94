"""The built-in task repository: ``tinytext``, a small pure-Python package with a pytest suite.

It needs no network, so ``make("swe-v0")`` has tasks everywhere. Each built-in task injects one bug (the kinds
the mutation operators produce) into a copy of the package; the gold patch undoes it. The repository is kept
here as text and written to the cache on first use.

Each built-in task has a fixed split (``HELDOUT_BUGS``, recorded in the instance's ``details["split"]``): the four
held-out bugs live in the two functions no training bug touches (``truncate``, ``title_case``) and include a kind
of bug training never shows (a flipped comparison), so no held-out fix, failing test or fixed line is a training one.
"""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rubricgym.core.pyast import parse_module
from rubricgym.envs.swe.instance import SweInstance
from rubricgym.envs.swe.sandbox.treediff import file_diff

CORE = '''"""Small text utilities."""


def slugify(text: str, sep: str = "-") -> str:
    """Lower-case words of ``text`` joined by ``sep``; anything not alphanumeric separates words."""
    words = []
    current = []
    for ch in text.lower():
        if ch.isalnum():
            current.append(ch)
        elif current:
            words.append("".join(current))
            current = []
    if current:
        words.append("".join(current))
    return sep.join(words)


def truncate(text: str, width: int, suffix: str = "...") -> str:
    """``text`` cut to at most ``width`` characters, ending in ``suffix`` when cut."""
    if len(text) <= width:
        return text
    if width <= len(suffix):
        return suffix[:width]
    return text[: width - len(suffix)] + suffix


def word_count(text: str) -> dict[str, int]:
    """How often each word occurs (case-insensitive, surrounding punctuation ignored)."""
    counts: dict[str, int] = {}
    for word in text.lower().split():
        word = word.strip(".,;:!?\\"'()")
        if word:
            counts[word] = counts.get(word, 0) + 1
    return counts


def wrap(text: str, width: int) -> list[str]:
    """Greedy word wrap: lines of at most ``width`` characters (longer words get a line of their own)."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return lines


def title_case(text: str, minor: tuple[str, ...] = ("a", "an", "and", "of", "the")) -> str:
    """Capitalise each word except minor words, which stay lower-case unless they come first."""
    out = []
    for i, word in enumerate(text.split()):
        if i > 0 and word.lower() in minor:
            out.append(word.lower())
        else:
            out.append(word[:1].upper() + word[1:].lower())
    return " ".join(out)
'''

TESTS = """from tinytext import slugify, title_case, truncate, word_count, wrap


def test_slugify_basic():
    assert slugify("Hello, World!") == "hello-world"


def test_slugify_separator():
    assert slugify("a b  c", sep="_") == "a_b_c"


def test_slugify_trailing_word():
    assert slugify("rubric gym") == "rubric-gym"


def test_slugify_empty():
    assert slugify("!!!") == ""


def test_truncate_short_text_unchanged():
    assert truncate("abc", 10) == "abc"


def test_truncate_exact_width_unchanged():
    assert truncate("abcdef", 6) == "abcdef"


def test_truncate_adds_suffix():
    assert truncate("abcdefghij", 6) == "abc..."


def test_truncate_tiny_width():
    assert truncate("abcdefghij", 2) == ".."


def test_word_count():
    assert word_count("The cat and the hat.") == {"the": 2, "cat": 1, "and": 1, "hat": 1}


def test_word_count_empty():
    assert word_count("  ") == {}


def test_wrap_fits_exactly():
    assert wrap("aaa bbb ccc", 7) == ["aaa bbb", "ccc"]


def test_wrap_never_exceeds_width():
    assert wrap("aaa bbb", 6) == ["aaa", "bbb"]


def test_wrap_breaks_lines():
    assert wrap("one two three four", 9) == ["one two", "three", "four"]


def test_wrap_long_word():
    assert wrap("extraordinarily long", 5) == ["extraordinarily", "long"]


def test_title_case_minor_words():
    assert title_case("the lord of the rings") == "The Lord of the Rings"


def test_title_case_first_word_capitalised():
    assert title_case("a tale of two cities") == "A Tale of Two Cities"


def test_title_case_lowercases_rest():
    assert title_case("hELLO wORLD") == "Hello World"
"""

FILES = {
    "pyproject.toml": '[project]\nname = "tinytext"\nversion = "0.1.0"\n\n[tool.pytest.ini_options]\n'
    'testpaths = ["tests"]\n',
    "README.md": "# tinytext\n\nSmall text utilities: slugify, truncate, word_count, wrap, title_case.\n",
    "tinytext/__init__.py": '"""Small text utilities."""\n\nfrom tinytext.core import slugify, title_case, truncate, '
    'word_count, wrap\n\n__all__ = ["slugify", "title_case", "truncate", "word_count", '
    '"wrap"]\n',
    "tinytext/core.py": CORE,
    "tests/__init__.py": "",
    "tests/test_core.py": TESTS,
}
TEST_FILE = "tests/test_core.py"


@dataclass(frozen=True)
class BuiltinBug:
    id: str
    kind: str
    old: str
    new: str
    fail_to_pass: tuple[str, ...]
    statement: str


BUGS = (
    BuiltinBug(
        "truncate-boundary",
        "flipped_comparison",
        "if len(text) <= width:",
        "if len(text) < width:",
        ("test_truncate_exact_width_unchanged",),
        "`truncate(text, width)` cuts text that already fits: `truncate('abcdef', 6)` returns 'abc...' "
        "instead of 'abcdef'. Text whose length equals the width should come back unchanged.",
    ),
    BuiltinBug(
        "wrap-width",
        "off_by_one",
        "if line and len(line) + 1 + len(word) > width:",
        "if line and len(line) + len(word) > width:",
        ("test_wrap_breaks_lines", "test_wrap_never_exceeds_width"),
        "`wrap` produces lines longer than the width: `wrap('aaa bbb', 6)` gives ['aaa bbb'] (7 "
        "characters) instead of ['aaa', 'bbb'].",
    ),
    BuiltinBug(
        "title-first-word",
        "flipped_comparison",
        "if i > 0 and word.lower() in minor:",
        "if i >= 0 and word.lower() in minor:",
        ("test_title_case_minor_words", "test_title_case_first_word_capitalised"),
        "`title_case('a tale of two cities')` returns 'a Tale of Two Cities': a minor word at the start "
        "of a title must be capitalised.",
    ),
    BuiltinBug(
        "slugify-last-word",
        "dropped_branch",
        '    if current:\n        words.append("".join(current))\n    return sep.join(words)',
        "    return sep.join(words)",
        ("test_slugify_separator", "test_slugify_trailing_word"),
        "`slugify('rubric gym')` returns 'rubric' instead of 'rubric-gym': the last word of the text is "
        "lost unless the text ends with punctuation.",
    ),
    BuiltinBug(
        "truncate-tiny-width",
        "wrong_value",
        "return suffix[:width]",
        "return suffix",
        ("test_truncate_tiny_width",),
        "`truncate('abcdefghij', 2)` returns '...' (3 characters): the result must never be longer than the "
        "width, even when the width is smaller than the suffix.",
    ),
    BuiltinBug(
        "word-count-case",
        "dropped_call",
        "for word in text.lower().split():",
        "for word in text.split():",
        ("test_word_count",),
        "`word_count('The cat and the hat.')` counts 'The' and 'the' as different words; counting should be "
        "case-insensitive.",
    ),
    BuiltinBug(
        "word-count-punctuation",
        "dropped_call",
        'word = word.strip(".,;:!?\\"\'()")',
        "word = word.strip()",
        ("test_word_count",),
        "`word_count('The cat and the hat.')` reports a word 'hat.' with its full stop; punctuation around a "
        "word must not count.",
    ),
    BuiltinBug(
        "title-rest-lowercase",
        "dropped_call",
        "out.append(word[:1].upper() + word[1:].lower())",
        "out.append(word[:1].upper() + word[1:])",
        ("test_title_case_lowercases_rest",),
        "`title_case('hELLO wORLD')` returns 'HELLO WORLD' instead of 'Hello World': the rest of each word "
        "should be lower-cased.",
    ),
    BuiltinBug(
        "slugify-separator",
        "wrong_value",
        "return sep.join(words)",
        'return "-".join(words)',
        ("test_slugify_separator",),
        "`slugify('a b  c', sep='_')` returns 'a-b-c': the `sep` argument is ignored.",
    ),
    BuiltinBug(
        "wrap-leading-empty-line",
        "dropped_condition",
        "if line and len(line) + 1 + len(word) > width:",
        "if len(line) + 1 + len(word) > width:",
        ("test_wrap_long_word",),
        "`wrap('extraordinarily long', 5)` starts with an empty line: ['', 'extraordinarily', 'long'] instead "
        "of ['extraordinarily', 'long'].",
    ),
)


HELDOUT_BUGS = frozenset({"truncate-boundary", "title-first-word", "truncate-tiny-width", "title-rest-lowercase"})
"""The built-in bugs of the held-out split (``test``); the other six are ``train``'s. Held out: every bug in
``truncate`` and ``title_case`` (kinds flipped_comparison x2, wrong_value, dropped_call); training: every bug in
``wrap``, ``slugify`` and ``word_count`` (off_by_one, dropped_branch, dropped_call x2, wrong_value,
dropped_condition)."""


def cache_root() -> Path:
    """``$RUBRICGYM_CACHE/swe`` or ``~/.cache/rubricgym/swe``: where repositories and built tasks are kept."""
    base = os.environ.get("RUBRICGYM_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "rubricgym") / "swe"


def _test_ids() -> list[str]:
    tree = parse_module(TESTS)
    return [f"{TEST_FILE}::{n.name}" for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write ``files`` under ``root`` atomically (built in a temp dir, then renamed); no-op if present."""
    if root.is_dir():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root.parent, prefix=".tmp-"))
    for rel, text in files.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_text(text)
    try:
        tmp.rename(root)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def builtin_instances() -> list[SweInstance]:
    """The built-in tasks (one per ``BUGS`` entry), their repositories written to the cache on first use."""
    digest = hashlib.sha1(repr((FILES, BUGS)).encode()).hexdigest()[:10]
    base = cache_root() / "builtin" / digest
    ids = _test_ids()
    if unknown := HELDOUT_BUGS - {bug.id for bug in BUGS}:
        raise AssertionError(f"HELDOUT_BUGS names bugs that are not in BUGS: {sorted(unknown)}")
    out = []
    for bug in BUGS:
        if CORE.count(bug.old) != 1:
            raise AssertionError(f"built-in bug {bug.id}: its text must occur once in tinytext/core.py")
        buggy = CORE.replace(bug.old, bug.new)
        snapshot = write_tree(base / bug.id, {**FILES, "tinytext/core.py": buggy})
        f2p = [f"{TEST_FILE}::{t}" for t in bug.fail_to_pass]
        out.append(
            SweInstance(
                instance_id=f"tinytext__{bug.id}",
                repo="rubricgym/tinytext",
                base_commit=digest,
                problem_statement=bug.statement,
                patch=file_diff("tinytext/core.py", buggy.encode(), CORE.encode()),
                FAIL_TO_PASS=f2p,
                PASS_TO_PASS=[t for t in ids if t not in f2p],
                snapshot=str(snapshot),
                source="builtin",
                details={"kind": bug.kind, "split": "test" if bug.id in HELDOUT_BUGS else "train"},
            )
        )
    return out
