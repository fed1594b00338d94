"""``declared_requirements``: what a project says its tests need, from each place projects write it."""

from __future__ import annotations

from rubricgym.envs.swe.deps import declared_requirements


def test_every_declaration_style_is_read_and_the_runtime_and_project_are_left_out(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "Demo_Pkg"\ndependencies = ["attrs>=22", "tomli; python_version < \'3.0\'"]\n'
        '[project.optional-dependencies]\ntest = ["pytest>=8", "demo-pkg[extra]", "hypothesis"]\n'
        'docs = ["sphinx"]\n'
        '[dependency-groups]\ntesting = ["pytest-mock", {include-group = "base"}]\nbase = ["freezegun"]\n'
    )
    (tmp_path / "setup.cfg").write_text(
        "[options]\ninstall_requires =\n    six\n[options.extras_require]\ntests =\n    mock\n"
    )
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\nsetup(name='demo', tests_require=['nose'], extras_require={'dev': ['black']})\n"
    )
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "test.txt").write_text("# pins\n-r base.txt\nresponses==0.25  # http\n\n")
    assert declared_requirements(tmp_path) == [
        "attrs>=22",
        "freezegun",
        "hypothesis",
        "mock",
        "nose",
        "pytest-mock",
        "responses==0.25",
        "six",
    ]


def test_a_project_without_declarations_needs_nothing(tmp_path):
    (tmp_path / "pyproject.toml").write_text("not = [valid toml")
    assert declared_requirements(tmp_path) == []
