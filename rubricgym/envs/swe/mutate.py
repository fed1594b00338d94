"""AST mutation operators that inject realistic one-site bugs into Python source.

Each operator finds candidate sites with ``ast`` and rewrites only the exact source span of the site (an
operator token, a constant, an argument pair, whole statement lines), so the gold patch that undoes a mutation
is a one-line or few-line diff, not a reformatted file. Pure functions: no I/O.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from rubricgym.core.pyast import parse_module

KINDS = (
    "flipped_comparison",
    "off_by_one",
    "swapped_arguments",
    "dropped_branch",
    "wrong_return",
    "removed_call",
    "flipped_boolean_operator",
    "flipped_arithmetic",
)
_FLIP = {
    "<": ">=",
    ">": "<=",
    "<=": ">",
    ">=": "<",
    "==": "!=",
    "!=": "==",
    "in": "not in",
    "not in": "in",
    "is": "is not",
    "is not": "is",
}
_CMP_TOKEN = re.compile(r"not\s+in\b|is\s+not\b|<=|>=|==|!=|<|>|\bin\b|\bis\b")


@dataclass(frozen=True)
class Mutation:
    """Replace bytes ``start:end`` (UTF-8 offsets into the file) with ``replacement``."""

    path: str
    kind: str
    line: int
    start: int
    end: int
    replacement: str
    description: str


class _Source:
    def __init__(self, text: str):
        self.data = text.encode()
        self.line_starts = [0]
        for i, b in enumerate(self.data):
            if b == 10:
                self.line_starts.append(i + 1)

    def offset(self, line: int, col: int) -> int:
        return self.line_starts[line - 1] + col

    def span(self, node: ast.expr | ast.stmt) -> tuple[int, int]:
        end_line, end_col = node.end_lineno, node.end_col_offset
        assert end_line is not None and end_col is not None, "parsed nodes carry their end position"
        return self.offset(node.lineno, node.col_offset), self.offset(end_line, end_col)

    def text(self, start: int, end: int) -> str:
        return self.data[start:end].decode()

    def statement_lines(self, node: ast.stmt) -> tuple[int, int] | None:
        """The byte span of whole lines holding only ``node`` (None when it shares a line)."""
        start = self.line_starts[node.lineno - 1]
        if self.data[start : self.offset(node.lineno, node.col_offset)].strip():
            return None
        end_line = node.end_lineno or node.lineno
        end = self.offset(end_line, node.end_col_offset or 0)
        line_end = self.line_starts[end_line] if end_line < len(self.line_starts) else len(self.data)
        rest = self.data[end:line_end].strip()
        if rest and not rest.startswith(b"#"):
            return None
        return start, line_end


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _skipped_regions(tree: ast.Module) -> list[ast.AST]:
    """``if __name__ == "__main__"`` and ``if TYPE_CHECKING`` blocks: mutating them changes no test."""
    out: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            src = ast.unparse(node.test)
            if "__name__" in src or "TYPE_CHECKING" in src:
                out.append(node)
    return out


def find_mutations(path: str, text: str) -> list[Mutation]:  # noqa: C901 (one visitor over the mutation operators; split is a follow-up)
    """Every candidate mutation in ``text`` (the source of ``path``), in source order."""
    try:
        tree = parse_module(text)
    except SyntaxError:
        return []
    src = _Source(text)
    skip: set[int] = set()
    for region in _skipped_regions(tree):
        skip.update(id(n) for n in ast.walk(region))
    out: list[Mutation] = []

    def add(node: ast.AST, kind: str, start: int, end: int, repl: str, what: str) -> None:
        if src.text(start, end) != repl:
            out.append(Mutation(path, kind, node.lineno, start, end, repl, what))  # type: ignore[attr-defined]

    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            a, b = src.span(node.left)[1], src.span(node.comparators[0])[0]
            between = src.text(a, b)
            m = _CMP_TOKEN.search(between)
            if m:
                tok = re.sub(r"\s+", " ", m.group(0))
                new = between[: m.start()] + _FLIP[tok] + between[m.end() :]
                add(node, "flipped_comparison", a, b, new, f"'{tok}' became '{_FLIP[tok]}'")
        elif isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) <= 1000:
            s, e = src.span(node)
            if src.text(s, e).isdigit():
                add(node, "off_by_one", s, e, str(node.value + 1), f"{node.value} became {node.value + 1}")
                if node.value > 0:
                    add(node, "off_by_one", s, e, str(node.value - 1), f"{node.value} became {node.value - 1}")
        elif (
            isinstance(node, ast.Call)
            and len(node.args) >= 2
            and not any(isinstance(a, ast.Starred) for a in node.args[:2])
        ):
            (s0, e0), (s1, e1) = src.span(node.args[0]), src.span(node.args[1])
            first, second = src.text(s0, e0), src.text(s1, e1)
            if first != second and e0 <= s1:
                add(
                    node,
                    "swapped_arguments",
                    s0,
                    e1,
                    second + src.text(e0, s1) + first,
                    f"arguments {first!r} and {second!r} swapped",
                )
        elif isinstance(node, ast.Return) and node.value is not None:
            s, e = src.span(node.value)
            v = node.value
            if isinstance(v, ast.Constant) and isinstance(v.value, bool):
                add(node, "wrong_return", s, e, str(not v.value), f"returns {not v.value} instead of {v.value}")
            elif not (isinstance(v, ast.Constant) and v.value is None):
                add(node, "wrong_return", s, e, "None", f"returns None instead of {src.text(s, e)[:40]!r}")
        elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
            a, b = src.span(node.values[0])[1], src.span(node.values[1])[0]
            between = src.text(a, b)
            old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
            m = re.search(rf"\b{old}\b", between)
            if m:
                add(
                    node,
                    "flipped_boolean_operator",
                    a,
                    b,
                    between[: m.start()] + new + between[m.end() :],
                    f"'{old}' became '{new}'",
                )
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            a, b = src.span(node.left)[1], src.span(node.right)[0]
            between = src.text(a, b)
            old, new = ("+", "-") if isinstance(node.op, ast.Add) else ("-", "+")
            if between.count(old) == 1 and not isinstance(node.left, ast.Constant | ast.JoinedStr):
                add(node, "flipped_arithmetic", a, b, between.replace(old, new), f"'{old}' became '{new}'")
        for block in ("body", "orelse", "finalbody"):
            stmts = getattr(node, block, None)
            if not isinstance(stmts, list) or len([s for s in stmts if not _is_docstring(s)]) < 2:
                continue
            for stmt in stmts:
                if id(stmt) in skip:
                    continue
                kind = None
                if isinstance(stmt, ast.If) and not stmt.orelse:
                    kind, what = "dropped_branch", f"the branch 'if {ast.unparse(stmt.test)[:50]}:' was removed"
                elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                    kind, what = "removed_call", f"the call {ast.unparse(stmt.value)[:50]!r} was removed"
                span = src.statement_lines(stmt) if kind else None
                if kind and span:
                    add(stmt, kind, span[0], span[1], "", what)
    return sorted(out, key=lambda m: (m.start, m.end, m.kind, m.replacement))


def apply_mutation(text: str, m: Mutation) -> str:
    """``text`` with mutation ``m`` applied; the result is checked to still parse."""
    data = text.encode()
    new = (data[: m.start] + m.replacement.encode() + data[m.end :]).decode()
    parse_module(new)
    return new
