"""``rubricgym init``: write a new env package that installs, checks and serves from day one.

A family is a set of templates (``templates/<family>/``, plus ``templates/common/``) rendered with the names
derived from the package name: the env id, the import package, the env class. Each family's package registers
its env through the ``rubricgym.envs`` entry point, ships a default rubric, an oracle and a random agent, tests
that run ``rubricgym check`` and the agents, a README that says how to publish it, and a Dockerfile that serves
it (the same pattern as rubricgym's own).

- ``tools``: an env class with two ``@tool``s, two stages, named checks and an outcome-gated ``rubric.yaml``;
- ``web``: a bring-your-own web-task spec over a small page that scores itself (``envs.gui.byo``);
- ``corpus``: a deep-search env over a folder of documents and a questions file (``envs.deepsearch``).
"""

from __future__ import annotations

import keyword
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Family = Literal["tools", "web", "corpus"]
FAMILIES: tuple[Family, ...] = ("tools", "web", "corpus")
TEMPLATES = Path(__file__).with_name("templates")
_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")


class ScaffoldError(ValueError):
    """A package name or target folder ``rubricgym init`` cannot use; the message says what to use instead."""


@dataclass(frozen=True)
class Names:
    """Every name a generated package uses, derived from one package name such as ``price-check``."""

    name: str
    """The distribution and folder name (``price-check``)."""
    env_id: str
    """The registered env id (``price-check-v0``; a web family's is ``web-<spec name>-v0``)."""
    spec_name: str
    """A web family's spec name (the name without a leading ``web-``)."""
    package: str
    """The import package (``price_check``)."""
    class_name: str
    """The env class (``PriceCheckEnv``)."""
    title: str
    """A heading (``Price check``)."""

    @classmethod
    def of(cls, name: str, family: str = "tools") -> Names:
        """The names of package ``name``; ``ScaffoldError`` saying what to write when ``name`` cannot be one."""
        if not _NAME.fullmatch(name):  # match() lets "name\n" through ($ matches before a final newline)
            suggestion = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "my-env"
            suggestion = suggestion if suggestion[0].isalpha() else f"env-{suggestion}"
            raise ScaffoldError(
                f"package name {name!r} must be lower-case words of letters and digits joined by '-', starting "
                f"with a letter (it becomes the env id NAME-v0 and the import package), e.g. {suggestion!r}"
            )
        if re.search(r"-v\d+$", name):
            raise ScaffoldError(
                f"leave the version out of {name!r}: init adds it (give {re.sub(r'-v[0-9]+$', '', name)!r} for the "
                f"env id {name!r})"
            )
        package = name.replace("-", "_")
        if keyword.iskeyword(package) or package in sys.stdlib_module_names or package == "rubricgym":
            raise ScaffoldError(
                f"{name!r} would make the import package {package!r}, which shadows "
                f"{'rubricgym' if package == 'rubricgym' else 'a Python module'}; pick another name, e.g. "
                f"'{name}-env'"
            )
        words = name.split("-")
        camel = "".join(w.capitalize() for w in words)
        spec_name = name.removeprefix("web-") or name
        return cls(
            name=name,
            env_id=f"web-{spec_name}-v0" if family == "web" else f"{name}-v0",
            spec_name=spec_name,
            package=package,
            class_name=camel if camel.endswith("Env") else camel + "Env",
            title=" ".join(words).capitalize(),
        )


@dataclass(frozen=True)
class _Family:
    """What differs between families: extra placeholders and which templates go where."""

    description: str
    requires: str
    docker_system: str
    n_tasks: int
    fuzz: int
    files: dict[str, str]
    """Template path under ``templates/`` -> output path (``PKG`` is the import package)."""


_COMMON = {
    "common/pyproject.toml.tmpl": "pyproject.toml",
    "common/README.md.tmpl": "README.md",
    "common/Dockerfile.tmpl": "Dockerfile",
    "common/openenv.yaml.tmpl": "openenv.yaml",
    "common/dot-dockerignore.tmpl": ".dockerignore",
    "common/dot-gitignore.tmpl": ".gitignore",
    "common/wheels-README.md.tmpl": "wheels/README.md",
    "common/test_env.py.tmpl": "tests/test_env.py",
}
_NO_SYSTEM_PACKAGES = "# (no system packages needed: the env is pure Python)"
FAMILY_SPECS: dict[Family, _Family] = {
    "tools": _Family(
        description="Price an order: look each price up, then answer with the total (a rubricgym env).",
        requires="rubricgym",
        docker_system=_NO_SYSTEM_PACKAGES,
        n_tasks=8,
        fuzz=100,
        files={
            "tools/about.md.tmpl": "",
            **{
                f"tools/PKG/{f}.tmpl": f"PKG/{f}"
                for f in ("__init__.py", "env.py", "records.py", "checks.py", "agents.py")
            },
            "tools/PKG/rubric.yaml.tmpl": "PKG/rubric.yaml",
        },
    ),
    "web": _Family(
        description="Web tasks on a small page that scores itself, driven through Chromium (a rubricgym env).",
        requires="rubricgym[gui]",
        docker_system="RUN apt-get update && apt-get install -y --no-install-recommends chromium "
        "&& rm -rf /var/lib/apt/lists/*",
        n_tasks=4,
        fuzz=30,
        files={
            "web/about.md.tmpl": "",
            "web/PKG/__init__.py.tmpl": "PKG/__init__.py",
            "web/PKG/agents.py.tmpl": "PKG/agents.py",
            "web/PKG/page/index.html.tmpl": "PKG/page/index.html",
            "web/PKG/page/spec.yaml.tmpl": "PKG/page/spec.yaml",
        },
    ),
    "corpus": _Family(
        description="Deep search over a folder of documents: search, read, answer with citations (a rubricgym env).",
        requires="rubricgym",
        docker_system=_NO_SYSTEM_PACKAGES,
        n_tasks=4,
        fuzz=60,
        files={
            "corpus/about.md.tmpl": "",
            "corpus/PKG/__init__.py.tmpl": "PKG/__init__.py",
            "corpus/PKG/env.py.tmpl": "PKG/env.py",
            "corpus/PKG/questions.jsonl.tmpl": "PKG/questions.jsonl",
            **{
                f"corpus/PKG/docs/{p.name}": f"PKG/docs/{p.name.removesuffix('.tmpl')}"
                for p in sorted((TEMPLATES / "corpus" / "PKG" / "docs").glob("*.tmpl"))
            },
        },
    ),
}


def render(text: str, values: dict[str, str], source: str = "<template>") -> str:
    """``text`` with every ``{{key}}`` replaced; an unknown key is a bug in the template and raises."""

    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in values:
            raise KeyError(f"{source}: unknown placeholder {m.group(0)} (known: {', '.join(sorted(values))})")
        return values[m.group(1)]

    return _PLACEHOLDER.sub(sub, text)


def plan(name: str, family: Family = "tools") -> dict[str, str]:
    """The files of a new package ``name`` of ``family``, by path relative to the package folder."""
    if family not in FAMILY_SPECS:
        raise ScaffoldError(f"unknown family {family!r}: choose one of {', '.join(FAMILIES)}")
    names = Names.of(name, family)
    fam = FAMILY_SPECS[family]
    values = {
        "name": names.name,
        "env_id": names.env_id,
        "spec_name": names.spec_name,
        "package": names.package,
        "class_name": names.class_name,
        "title": names.title,
        "dist": names.name,
        "family": family,
        "description": fam.description,
        "requires": fam.requires,
        "docker_system": fam.docker_system,
        "n_tasks": str(fam.n_tasks),
        "fuzz": str(fam.fuzz),
    }
    about = next(t for t, out in fam.files.items() if out == "")
    values["about"] = render((TEMPLATES / about).read_text(encoding="utf-8"), values, about).strip()
    out: dict[str, str] = {}
    for template, target in {**_COMMON, **fam.files}.items():
        if target:
            text = (TEMPLATES / template).read_text(encoding="utf-8")
            out[target.replace("PKG", names.package, 1)] = render(text, values, template)
    return out


def init_package(name: str, family: Family = "tools", parent: str | Path = ".") -> Path:
    """Write package ``name`` of ``family`` into ``parent/name`` (which must not exist or be empty) and return
    the folder."""
    files = plan(name, family)
    root = Path(parent) / name
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ScaffoldError(f"{root} already exists and is not empty: pick another name or --dir, or remove it")
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
