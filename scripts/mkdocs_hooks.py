"""MkDocs hooks for the documentation site (``mkdocs.yml`` names this file under ``hooks:``).

- ``reference/cli.md`` is generated at build time by walking the Typer app ``rubricgym.cli.app`` and every sub-app:
  each command's help, usage, arguments and options, as the code declares them (never copied by hand).
- ``reference/config.md`` is generated from the pydantic models of ``rubricgym/trainers/config.py``: every field of
  ``TrainConfig`` and of the models nested in it, with its type, default, bounds and attribute docstring.
- The ``Guides`` section of the nav lists every page in ``docs/guides/`` (title from its first heading), so a new
  guide appears in the site when its file lands.

In the repository both pages are short placeholders (so links to them work on GitHub); their content is replaced
when the site is built. The two generators are plain functions (``cli_reference()``, ``config_reference()``) so
tests can check them.
"""

from __future__ import annotations

import ast
import enum
import inspect
import re
import textwrap
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

GUIDES_DIR = "guides"
CLI_PAGE = "reference/cli.md"
CONFIG_PAGE = "reference/config.md"


# ---- the CLI ---------------------------------------------------------------------------------------------------


def _cell(text: object) -> str:
    """Text safe inside a Markdown table cell: one line, pipes and angle brackets escaped."""
    s = " ".join(str(text).split())
    return s.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _code(text: object) -> str:
    """Inline code for a table cell (backticks inside the value are doubled around)."""
    s = " ".join(str(text).split()).replace("|", "\\|")
    return f"`` {s} ``" if "`" in s else f"`{s}`"


def _type_name(annotation: Any) -> str:
    """A readable name for a type annotation: ``int``, ``Path``, ``list[str]``, ``'a' | 'b'``, ``X | None``."""
    if annotation is None or annotation is type(None):
        return "None"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(_type_name(a) for a in args)}]" if args else name
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _commands(group: Any, path: list[str]) -> list[tuple[list[str], Any]]:
    """Every command under ``group`` (depth first, in the order ``--help`` lists them), with its full path."""
    out: list[tuple[list[str], Any]] = []
    for name in group.list_commands(None):
        cmd = group.get_command(None, name)
        if cmd is None or getattr(cmd, "hidden", False):
            continue
        out.append(([*path, name], cmd))
        if hasattr(cmd, "list_commands"):
            out.extend(_commands(cmd, [*path, name]))
    return out


def _anchor(path: list[str]) -> str:
    return "-".join(path)


def _param_default(param: Any) -> str:
    if getattr(param, "required", False):
        return "required"
    default = getattr(param, "default", None)
    if getattr(param, "is_flag", False):
        return _code(bool(default))
    if default is None or default == () or default == []:
        return ""
    if isinstance(default, enum.Enum):
        default = default.value
    return _code(default)


def _param_type(param: Any) -> str:
    if getattr(param, "is_flag", False):
        return "flag"
    desc = getattr(param, "type_descriptor", None)
    if desc is not None:
        return _cell(_type_name(desc.annotation))
    return _cell(getattr(getattr(param, "type", None), "name", ""))


def _param_names(param: Any) -> str:
    if type(param).__name__.endswith("Argument"):
        return _code((param.metavar or param.name).upper())
    names = list(param.opts) + list(getattr(param, "secondary_opts", []))
    return " / ".join(_code(n) for n in names)


def cli_command_paths() -> list[list[str]]:
    """The path of every (non-hidden) command and sub-app of ``rubricgym``, e.g. ``["rubricgym", "model", "path"]``."""
    import typer.main

    from rubricgym.cli import app

    root = typer.main.get_command(app)
    return [path for path, _ in _commands(root, ["rubricgym"])]


def cli_reference() -> str:
    """The CLI reference page: every command of ``rubricgym.cli.app`` and its sub-apps, from the code."""
    import typer.main

    from rubricgym.cli import app

    root = typer.main.get_command(app)
    lines = [
        "# CLI reference",
        "",
        "Generated at build time from the Typer app `rubricgym.cli.app` (`scripts/mkdocs_hooks.py`): every command,",
        "its arguments and options, with the types, defaults and help text the code declares. `rubricgym COMMAND",
        "--help` prints the same in a terminal.",
        "",
        _cell(root.help or ""),
        "",
    ]
    entries = _commands(root, ["rubricgym"])
    lines += ["| command | what it does |", "|---|---|"]
    for path, cmd in entries:
        short = (cmd.help or "").strip().split("\n\n", 1)[0]
        lines.append(f"| [`{' '.join(path)}`](#{_anchor(path)}) | {_cell(short)} |")
    lines.append("")
    for path, cmd in entries:
        level = "#" * min(len(path), 4)
        lines += [f"{level} `{' '.join(path)}` {{ #{_anchor(path)} }}", ""]
        help_text = inspect.cleandoc(cmd.help or "").replace("\b\n", "")
        if help_text:
            lines += [help_text, ""]
        if hasattr(cmd, "list_commands"):
            subs = [p for p, _ in entries if p[:-1] == path]
            lines += ["Sub-commands: " + ", ".join(f"[`{' '.join(p)}`](#{_anchor(p)})" for p in subs) + ".", ""]
            continue
        pieces = []
        for p in cmd.params:
            if type(p).__name__.endswith("Argument"):
                name = (p.metavar or p.name).upper()
                pieces.append(name if p.required else f"[{name}]")
        usage = " ".join([*path, "[OPTIONS]", *pieces])
        lines += ["```text", usage, "```", ""]
        params = [p for p in cmd.params if not getattr(p, "hidden", False)]
        if params:
            lines += ["| argument / option | type | default | help |", "|---|---|---|---|"]
            for p in params:
                help_ = _cell(getattr(p, "help", "") or "")
                lines.append(f"| {_param_names(p)} | {_param_type(p)} | {_param_default(p)} | {help_} |")
            lines.append("")
    return "\n".join(lines) + "\n"


# ---- the training config -----------------------------------------------------------------------------------------


def _field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of a class body (the string literal right after ``name: type = ...``)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or klass is BaseModel or not issubclass(klass, BaseModel):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0]
        assert isinstance(body, ast.ClassDef)
        for node, nxt in zip(body.body, [*body.body[1:], None], strict=True):
            documented = isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and documented:
                assert isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                if isinstance(nxt.value.value, str):
                    docs[node.target.id] = inspect.cleandoc(nxt.value.value)
    return docs


def _annotations(model: type[BaseModel]) -> dict[str, Any]:
    """Each field's resolved annotation (pydantic may keep a forward reference for a model defined later)."""
    try:
        hints = typing.get_type_hints(model)
    except (NameError, TypeError):
        hints = {}
    return {name: hints.get(name, field.annotation) for name, field in model.model_fields.items()}


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation refers to (``X | None``, ``list[X]``, ``dict[str, X]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models_in(a)]


def _bounds(field: Any) -> str:
    marks = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    out = []
    for meta in field.metadata:
        for attr, sign in marks.items():
            value = getattr(meta, attr, None)
            if value is not None:
                out.append(f"{sign} {value:g}" if isinstance(value, float) else f"{sign} {value}")
    return ", ".join(out)


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:
            return "(computed)"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "(the model's defaults)"
    if value is None:
        return "`None`"
    if isinstance(value, Path):
        value = str(value)
    return _code(repr(value) if isinstance(value, str) else value)


def config_sections() -> list[tuple[str, type[BaseModel]]]:
    """(dotted key, model) for ``TrainConfig`` and every model nested in it, breadth first, each model once."""
    from rubricgym.trainers.config import TrainConfig

    seen: set[type] = set()
    queue: list[tuple[str, type[BaseModel]]] = [("", TrainConfig)]
    out: list[tuple[str, type[BaseModel]]] = []
    while queue:
        key, model = queue.pop(0)
        if model in seen:
            continue
        seen.add(model)
        out.append((key, model))
        hints = _annotations(model)
        for name, field in model.model_fields.items():
            yaml_name = field.alias or name
            for sub in _models_in(hints[name]):
                queue.append((f"{key}.{yaml_name}" if key else yaml_name, sub))
    return out


def config_reference() -> str:
    """The training-config reference page: every field of ``TrainConfig`` and its nested models, from the code."""
    sections = config_sections()
    anchors = {model: "cfg-" + (key.replace(".", "-") or "top") for key, model in sections}
    lines = [
        "# Training config reference",
        "",
        "Generated at build time from the pydantic models in `rubricgym/trainers/config.py` (and the models they",
        "nest) by `scripts/mkdocs_hooks.py`: every field `rubricgym train --config FILE.yaml` accepts, with its type,",
        "default and bounds. Unknown keys are refused, naming the field; so are values out of bounds. The",
        "[training tutorial](../tutorials/train.md) shows these fields at work.",
        "",
    ]
    for key, model in sections:
        title = key or "top level"
        lines += [f"## `{title}`: {model.__name__} {{ #{anchors[model]} }}", ""]
        doc = inspect.getdoc(model)
        if doc and doc != inspect.getdoc(BaseModel) and not doc.startswith("!!! abstract"):
            lines += [doc, ""]
        docs = _field_docs(model)
        lines += ["| field | type | default | bounds | what it does |", "|---|---|---|---|---|"]
        hints = _annotations(model)
        for name, field in model.model_fields.items():
            yaml_name = field.alias or name
            type_text = _cell(_type_name(hints[name]))
            for sub in _models_in(hints[name]):
                type_text = re.sub(rf"\b{sub.__name__}\b", f"[{sub.__name__}](#{anchors[sub]})", type_text)
            cells = [f"`{yaml_name}`", type_text, _default(field), _cell(_bounds(field)), _cell(docs.get(name, ""))]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines) + "\n"


# ---- MkDocs events -------------------------------------------------------------------------------------------


def _title(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem.replace("-", " ").capitalize()


def on_config(config: Any) -> Any:
    """Fill the nav's ``Guides`` section with every page in ``docs/guides/`` (sorted by file name)."""
    guides_dir = Path(config["docs_dir"]) / GUIDES_DIR
    pages = sorted(guides_dir.glob("*.md")) if guides_dir.is_dir() else []
    nav = config.get("nav")
    if not pages or nav is None:
        return config
    entries = [{_title(p): f"{GUIDES_DIR}/{p.name}"} for p in pages]
    for item in nav:
        if isinstance(item, dict) and "Guides" in item:
            listed = {v for e in item["Guides"] or [] for v in (e.values() if isinstance(e, dict) else [e])}
            item["Guides"] = [*(item["Guides"] or []), *(e for e in entries if next(iter(e.values())) not in listed)]
            return config
    at = next((i + 1 for i, item in enumerate(nav) if isinstance(item, dict) and "Tutorials" in item), len(nav))
    nav.insert(at, {"Guides": entries})
    return config


GENERATED = {CLI_PAGE: cli_reference, CONFIG_PAGE: config_reference}
"""Pages whose Markdown is replaced at build time. In the repository each is a short placeholder that says so, so
links to them work on GitHub too."""


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace the placeholder of a generated reference page with the page generated from the code."""
    generate = GENERATED.get(page.file.src_uri)
    return generate() if generate is not None else markdown
