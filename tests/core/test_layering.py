"""``core`` imports nothing of rubricgym's above it, and the package has no import cycle between its layers."""

import ast
from pathlib import Path

import rubricgym

PACKAGE = Path(rubricgym.__file__).parent
# an arrow means "may import" (docs/architecture.md); a layer may also import itself
LAYERS = {
    "core": set(),
    "rewards": {"core"},
    "envs": {"rewards", "core"},
    "agents": {"rewards", "core"},
}


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rubricgym."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("rubricgym.")}
    return found


def test_lower_layers_import_only_what_is_below_them():
    broken = []
    for layer, allowed in LAYERS.items():
        for path in (PACKAGE / layer).rglob("*.py"):
            for target in _imports(path) - allowed - {layer}:
                broken.append(f"{path.relative_to(PACKAGE)} imports rubricgym.{target}")
    assert not broken, broken
