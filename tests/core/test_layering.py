"""Every package imports only the layers below it (docs/architecture.md), so the package has no import cycle;
inside ``trainers`` the floors (``algo/`` the math, ``engine/`` how updates and sampling run, the run loop on top)
import only the floors below; and no import inside a function hides a cycle."""

import ast
from collections.abc import Iterator
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


# ---- trainers/ in floors ----------------------------------------------------------------------------------------

TRAINER_FLOORS: dict[str, set[str]] = {
    "config": set(),
    "algo": {"config"},
    "engine": {"config", "algo"},
    "run": {"config", "algo", "engine"},
}
"""The floors of ``rubricgym.trainers`` and what each may import (a floor may also import itself). ``config``
(``config.py`` with ``config_checks.py``, the YAML schema) is the floor every other one reads its section of;
``algo/`` is the math on tensors and typed records, ``engine/`` how updates and sampling run, and the run loop
(every module at ``trainers/``'s root) sits on top."""
SCHEMA = {"config", "config_checks"}


def _trainer_floor(path: Path, package: Path = PACKAGE) -> str:
    """The floor of a module of ``rubricgym/trainers`` (from its path)."""
    parts = path.relative_to(package / "trainers").parts
    if len(parts) > 1:
        return parts[0]
    return "config" if parts[0].removesuffix(".py") in SCHEMA else "run"


def _trainer_imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module under ``rubricgym.trainers``) for every import of a trainers module in ``path``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rubricgym.trainers"):
            rest = node.module.split(".")[2:]
            for a in node.names:
                yield node.lineno, ".".join(rest or [a.name])
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("rubricgym.trainers."):
                    yield node.lineno, ".".join(a.name.split(".")[2:])


def _floor_of_module(name: str) -> str:
    head = name.split(".")[0]
    if head in TRAINER_FLOORS and head != "config":
        return head
    return "config" if head in SCHEMA else "run"


def floor_violations(package: Path) -> list[str]:
    """Imports in ``package``'s trainers modules of a floor above their own."""
    broken = []
    for path in sorted((package / "trainers").rglob("*.py")):
        floor = _trainer_floor(path, package)
        for line, target in _trainer_imports(path):
            to = _floor_of_module(target)
            if to != floor and to not in TRAINER_FLOORS[floor]:
                broken.append(
                    f"trainers/{path.relative_to(package / 'trainers')}:{line} ({floor}) imports {to}: {target}"
                )
    return broken


def test_every_trainers_floor_is_known():
    floors = {_trainer_floor(p) for p in (PACKAGE / "trainers").rglob("*.py")}
    assert floors <= set(TRAINER_FLOORS), f"add {sorted(floors - set(TRAINER_FLOORS))} to TRAINER_FLOORS"
    assert {"algo", "engine", "run", "config"} <= floors


def test_each_trainers_floor_imports_only_the_floors_below_it():
    broken = floor_violations(PACKAGE)
    assert not broken, broken


def test_a_back_import_between_floors_fails(tmp_path):
    """The check itself: an ``algo`` module importing ``engine``, or ``engine`` importing the run loop, is caught."""
    pkg = tmp_path / "rubricgym"
    for rel, text in {
        "trainers/algo/loss.py": "from rubricgym.trainers.engine.update import policy_update\n",
        "trainers/engine/update.py": "from rubricgym.trainers import step\nfrom rubricgym.trainers.algo import loss\n",
        "trainers/step.py": "from rubricgym.trainers.engine.update import policy_update\n",
        "trainers/config.py": "from rubricgym.trainers.algo.loss import ppo_clip_loss\n",
    }.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text, encoding="utf-8")
    broken = floor_violations(pkg)
    assert [b.split(":")[0] for b in broken] == [
        "trainers/algo/loss.py",
        "trainers/config.py",
        "trainers/engine/update.py",
    ], broken


# ---- no import inside a function hides a cycle -------------------------------------------------------------------

KNOWN_HIDDEN_CYCLES = {
    frozenset({"rubricgym.cli", "rubricgym.scaffold.cli"}),  # ALLOWED_CYCLES: the scaffold is a piece of the CLI
}


def _module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def import_graph(package: Path) -> tuple[dict[str, set[str]], dict[str, list[tuple[str, int]]]]:
    """The modules of ``package``: what each imports at run time at module level, and (with the line) inside a
    function. Imports under ``if TYPE_CHECKING`` never run and are left out."""
    files = {_module_name(p, package): p for p in package.rglob("*.py")}
    root = package.name

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    top: dict[str, set[str]] = {}
    inner: dict[str, list[tuple[str, int]]] = {}
    for mod, path in files.items():
        top[mod], inner[mod] = set(), []

        def visit(node: ast.AST, in_function: bool, mod: str = mod) -> None:
            for child in ast.iter_child_nodes(node):
                if _type_checking(child):
                    continue
                targets: list[str | None] = []
                if isinstance(child, ast.ImportFrom) and child.module and child.module.split(".")[0] == root:
                    for a in child.names:
                        full = f"{child.module}.{a.name}"
                        targets.append(full if full in files else resolve(child.module))
                elif isinstance(child, ast.Import):
                    targets = [resolve(a.name) for a in child.names if a.name.split(".")[0] == root]
                for t in targets:
                    if t is not None and t != mod:
                        if in_function:
                            inner[mod].append((t, child.lineno))
                        else:
                            top[mod].add(t)
                visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return top, inner


def hidden_cycles(package: Path) -> list[str]:
    """Imports inside a function of module A of a module B whose imports (at module level or in functions) lead
    back to A: the function-level import only hides the cycle A -> B -> ... -> A."""
    top, inner = import_graph(package)
    graph = {m: top[m] | {t for t, _ in inner[m]} for m in top}

    def reaches(a: str, b: str) -> bool:
        seen, stack = set(), [a]
        while stack:
            n = stack.pop()
            if n == b:
                return True
            if n not in seen:
                seen.add(n)
                stack.extend(graph[n])
        return False

    return sorted(
        {
            f"{a} (line {line}) imports {b} inside a function, and {b} leads back to {a}"
            for a in inner
            for b, line in inner[a]
            if frozenset({a, b}) not in KNOWN_HIDDEN_CYCLES and reaches(b, a)
        }
    )


def test_no_import_inside_a_function_hides_a_cycle():
    found = hidden_cycles(PACKAGE)
    assert not found, found


def test_a_hidden_cycle_is_found(tmp_path):
    """The check itself: the old ``sharding -> update`` import inside a function (``update`` imports ``sharding``)."""
    pkg = tmp_path / "rubricgym"
    (pkg / "trainers").mkdir(parents=True)
    (pkg / "trainers" / "sharding.py").write_text(
        "def logprobs():\n    from rubricgym.trainers.update import generated_logprobs\n", encoding="utf-8"
    )
    (pkg / "trainers" / "update.py").write_text("from rubricgym.trainers.sharding import logprobs\n", encoding="utf-8")
    (pkg / "trainers" / "lora.py").write_text(  # an optional heavy dependency is no cycle
        "def add():\n    import peft\n    from rubricgym.trainers.update import x\n", encoding="utf-8"
    )
    assert hidden_cycles(pkg) == [
        "rubricgym.trainers.sharding (line 2) imports rubricgym.trainers.update inside a function, and "
        "rubricgym.trainers.update leads back to rubricgym.trainers.sharding"
    ]
