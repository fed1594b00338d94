"""The README is the five-minute front door (issue 42): short, the two commands CI relies on, and links into the
site that resolve on GitHub (relative paths to files that exist)."""

from __future__ import annotations

import re

from tests.docs.pages import DOCS, README, ROOT

TEXT = README.read_text(encoding="utf-8")
MAX_LINES = 250


def test_the_readme_fits_in_250_lines():
    n = len(TEXT.splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines (at most {MAX_LINES}): move detail to a page under docs/"


def test_the_readme_gives_the_two_commands_ci_runs():
    """`.ci/run` runs `make lint` then `make test`, "exactly the test command the README gives"."""
    block = re.search(r"```bash\n(.*?)```", TEXT, re.S)
    assert block is not None
    assert [line.split()[:2] for line in block.group(1).splitlines()] == [["make", "demo"], ["make", "test"]]
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_readme_and_pages_link_to_files_that_exist():
    """Relative links from the README and between pages reach real files (the strict site build checks anchors
    too, but does not read the README)."""
    checked = 0
    for page in [README, *sorted(DOCS.rglob("*.md"))]:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)  # inline code shows link syntax, it holds no link
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = (page.parent / target.split("#", 1)[0]).resolve()
            assert path.exists(), f"{page.relative_to(ROOT)}: link to {target} reaches no file"
            checked += 1
    assert checked >= 50, checked


def test_the_readme_links_every_journey():
    for page in ("register-env", "train", "arena", "public-data", "serve-and-connect", "scale-out"):
        assert f"](docs/tutorials/{page}.md)" in TEXT, f"the README does not link docs/tutorials/{page}.md"
    for page in ("reference/cli.md", "reference/config.md", "benchmarks.md", "getting-started.md"):
        assert f"](docs/{page}" in TEXT
