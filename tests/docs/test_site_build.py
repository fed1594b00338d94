"""``mkdocs build --strict`` builds the site (issue 42): a broken link or anchor, a page missing from the nav, a
reference mkdocstrings cannot resolve or a generator that fails stops the build."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.docs.pages import ROOT


def mkdocs(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_mkdocs_is_installed():
    result = mkdocs("--version", cwd=ROOT)
    assert result.returncode == 0, f"mkdocs is missing: pip install -e '.[dev]' (make install does)\n{result.stderr}"


@pytest.mark.slow
def test_the_site_builds_strict(tmp_path: Path):
    result = mkdocs("build", "--strict", "--site-dir", str(tmp_path / "site"), cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    site = tmp_path / "site"
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "rubricgym swe import" in cli and "--env-arg" in cli  # generated from the Typer app
    config = (site / "reference" / "config" / "index.html").read_text()
    assert "max_staleness" in config and "entropy_modulation" in config  # generated from the config models
    api = (site / "reference" / "api" / "index.html").read_text()
    assert 'id="rubricgym.RubricEnv"' in api and 'id="rubricgym.rewards.path.choose_rubric"' in api  # mkdocstrings
    assert (site / "benchmarks" / "index.html").is_file() and (
        site / "tutorials" / "scale-out" / "index.html"
    ).is_file()


def test_the_site_config_makes_a_broken_link_fail_the_build(tmp_path: Path):
    """The project's strictness and link validation, on a one-page site with a broken link and anchor."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["strict"] is True
    small = {k: config[k] for k in ("site_name", "strict", "validation", "markdown_extensions")}
    (tmp_path / "docs").mkdir()
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump({**small, "docs_dir": "docs", "nav": [{"Home": "index.md"}]}))
    (tmp_path / "docs" / "index.md").write_text("# Home\n\n## Here\n\nSee [here](#here).\n")
    assert mkdocs("build", cwd=tmp_path).returncode == 0, "the one-page site builds"
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the guide](guide.md) and [there](#there).\n")
    result = mkdocs("build", cwd=tmp_path)
    assert result.returncode != 0
    assert "guide.md" in result.stderr and "#there" in result.stderr
