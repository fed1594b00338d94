"""The generated reference pages (``scripts/mkdocs_hooks.py``) cover every CLI command and option and every
training-config field, from the code; and the site's nav picks up guides as they land."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import typer.main

from rubricgym.cli import app
from tests.docs.pages import DOCS, ROOT


def load_hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mkdocs_hooks", module)
    spec.loader.exec_module(module)
    return module


hooks = load_hooks()


def sections(markdown: str) -> dict[str, str]:
    """Heading text -> the text under it, for the headings a generated page uses (code blocks skipped)."""
    out: dict[str, str] = {}
    current, in_fence = None, False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        if not in_fence and re.match(r"^#{2,4} ", line):
            current = line.lstrip("#").split("{", 1)[0].strip()
            out[current] = ""
        elif current is not None:
            out[current] += line + "\n"
    return out


def test_every_cli_command_and_option_is_in_the_cli_reference():
    page = sections(hooks.cli_reference())
    root = typer.main.get_command(app)
    seen = 0

    def walk(group, path):
        nonlocal seen
        for name in group.list_commands(None):
            cmd = group.get_command(None, name)
            title = f"`{' '.join([*path, name])}`"
            assert title in page, f"the CLI reference has no section for {title}"
            if hasattr(cmd, "list_commands"):
                walk(cmd, [*path, name])
                continue
            seen += 1
            for p in cmd.params:
                names = [(p.metavar or p.name).upper()] if type(p).__name__.endswith("Argument") else p.opts
                for n in names:
                    assert f"`{n}`" in page[title], f"{title}: the CLI reference does not list {n}"

    walk(root, ["rubricgym"])
    assert seen >= 20  # every leaf command: run, train, serve, swe import, model path, ...
    assert {"`rubricgym model path`", "`rubricgym swe import`", "`rubricgym clinical import`"} <= set(page)


def test_every_training_config_field_is_in_the_config_reference():
    page = sections(hooks.config_reference())
    keys = {key for key, _ in hooks.config_sections()}
    assert {
        "",
        "model",
        "model.lora",
        "model.parallel",
        "generation",
        "env",
        "env.curriculum",
        "loss",
        "loss.entropy_modulation",
        "guidance",
        "async",
        "judge",
        "warm_start",
        "monitor",
    } <= keys
    count = 0
    for key, model in hooks.config_sections():
        title = f"`{key or 'top level'}`: {model.__name__}"
        assert title in page, f"the config reference has no section {title!r}"
        for name, field in model.model_fields.items():
            assert f"| `{field.alias or name}` |" in page[title], f"{title}: field {field.alias or name} missing"
            count += 1
    assert count >= 100, count
    top = page["`top level`: TrainConfig"]
    assert "| `async` | [AsyncConfig](#cfg-async)" in top  # the YAML key (alias), linked to its section
    assert "Stop starting new steps once this much wall time has passed" in top  # the field's docstring


def test_the_generated_pages_replace_their_placeholders_only():
    for rel in ("reference/cli.md", "reference/config.md"):
        assert (DOCS / rel).is_file(), f"docs/{rel} is the placeholder GitHub links reach"

    class Page:
        def __init__(self, uri: str):
            self.file = type("F", (), {"src_uri": uri})()

    assert hooks.on_page_markdown("x", Page("reference/cli.md"), {}, None).startswith("# CLI reference\n\nGenerated")
    assert hooks.on_page_markdown("x", Page("concepts/stages.md"), {}, None) == "x"


def test_guides_join_the_nav_after_the_tutorials(tmp_path: Path):
    nav: list[dict[str, Any]] = [{"Home": "index.md"}, {"Tutorials": [{"A": "tutorials/a.md"}]}, {"Reference": []}]
    config = {"docs_dir": str(tmp_path), "nav": [dict(x) for x in nav]}
    assert hooks.on_config(config)["nav"] == nav  # no guides yet: the nav is unchanged
    (tmp_path / "guides").mkdir()
    (tmp_path / "guides" / "viewer.md").write_text("# The trace viewer\n\ntext\n")
    (tmp_path / "guides" / "progress.md").write_text("Intro without a heading\n")
    config = hooks.on_config({"docs_dir": str(tmp_path), "nav": [dict(x) for x in nav]})
    assert config["nav"][2] == {
        "Guides": [{"Progress": "guides/progress.md"}, {"The trace viewer": "guides/viewer.md"}]
    }
    listed = [*nav[:2], {"Guides": [{"Viewer": "guides/viewer.md"}]}, nav[2]]
    config = hooks.on_config({"docs_dir": str(tmp_path), "nav": [dict(x) for x in listed]})
    assert config["nav"][2] == {"Guides": [{"Viewer": "guides/viewer.md"}, {"Progress": "guides/progress.md"}]}
