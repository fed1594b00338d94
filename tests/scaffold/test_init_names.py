"""``rubricgym init`` refuses names that would write a broken or a shadowing package (issue 40, item 9)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.scaffold.cli import name_problem

runner = CliRunner()


@pytest.mark.parametrize("name", ["price-check\n", "price-check\r\n", "price\ncheck"])
def test_a_name_with_a_newline_writes_nothing(tmp_path: Path, name: str) -> None:
    r = runner.invoke(app, ["init", name, "--dir", str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert "characters a package name cannot" in r.output or "lower-case words" in r.output, r.output
    assert list(tmp_path.iterdir()) == []  # the old CLI wrote 'price-check\n/' whose files do not parse


@pytest.mark.parametrize("name", ["numpy", "pydantic", "typer", "rich"])
def test_the_name_of_an_installed_package_is_refused(tmp_path: Path, name: str) -> None:
    r = runner.invoke(app, ["init", name, "--dir", str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert "installed package" in r.output and f"'{name}-env'" in r.output
    assert list(tmp_path.iterdir()) == []


def test_an_installed_distribution_name_with_a_dash_is_refused() -> None:
    """``typing-extensions`` is installed as ``typing_extensions``: the package would shadow it."""
    problem = name_problem("typing-extensions")
    assert problem is not None and "installed package" in problem


def test_a_fresh_name_still_writes_a_package_that_parses(tmp_path: Path) -> None:
    r = runner.invoke(app, ["init", "price-check", "--dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert name_problem("price-check") is None
    for source in (tmp_path / "price-check").rglob("*.py"):
        ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
