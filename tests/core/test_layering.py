"""Every package imports only the layers below it (docs/architecture.md), so the package has no import cycle."""

import ast
from pathlib import Path

import rubricgym

PACKAGE = Path(rubricgym.__file__).parent
_BASE = {"core", "rewards"}
_MIDDLE = _BASE | {"envs", "agents", "suites"}
_TOOLS = _MIDDLE | {"env_checker"}
# an arrow means "may import" (docs/architecture.md); a layer may also import itself
LAYERS: dict[str, set[str]] = {
    "core": set(),
    "rewards": {"core"},
    "envs": _BASE,
    "agents": _BASE,
    "suites": _BASE,
    "__init__": _BASE,
    "env_checker": _MIDDLE,
    "proxy": _MIDDLE,
    "viewer": _TOOLS | {"trainers"},
    "trainers": _TOOLS | {"proxy"},
    "arena": _TOOLS,
    "server": _TOOLS,
    "interop": _TOOLS | {"server"},
    "demo": _TOOLS | {"trainers", "arena"},
    "cli": _TOOLS | {"trainers", "arena", "server", "interop", "demo", "scaffold", "proxy", "viewer"},
    "scaffold": _TOOLS | {"cli"},  # borrows the CLI's console; `cli` registers its command
}
GROUP = {"cli_env": "cli", "cli_show": "cli", "cli_export": "cli", "__main__": "cli"}
"""Top-level modules that belong to another layer."""
ALLOWED_CYCLES = {frozenset({"cli", "scaffold"})}
"""The scaffold is a piece of the CLI that lives in its own folder (its templates)."""


def _layer(name: str) -> str:
    return GROUP.get(name, name)


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rubricgym."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("rubricgym.")}
    return {_layer(f) for f in found}


def _modules() -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for path in PACKAGE.rglob("*.py"):
        top = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        out.setdefault(_layer(top), []).append(path)
    return out


def test_every_package_has_a_layer():
    missing = set(_modules()) - set(LAYERS)
    assert not missing, f"add {sorted(missing)} to LAYERS here and to docs/architecture.md"


def test_the_layers_allow_no_cycle():
    def reaches(a: str, b: str, seen: set[str]) -> bool:
        return any(n == b or (n not in seen and reaches(n, b, seen | {n})) for n in LAYERS[a] - {a})

    cycles = [
        (a, b) for a in LAYERS for b in LAYERS[a] if reaches(b, a, {b}) and frozenset({a, b}) not in ALLOWED_CYCLES
    ]
    assert not cycles, cycles


def test_every_layer_imports_only_what_is_below_it():
    broken = []
    for layer, paths in _modules().items():
        for path in paths:
            for target in _imports(path) - LAYERS[layer] - {layer}:
                broken.append(f"{path.relative_to(PACKAGE)} imports rubricgym.{target}")
    assert not broken, broken
