"""``ast.parse`` that is safe to call from many threads at once.

CPython 3.11 keeps the AST constructor's recursion counter in interpreter-wide state. When two threads build AST
objects at once (a garbage collection inside one parse runs a finaliser, the interpreter switches threads, the
other thread parses), one parse moves the other's counter and ``ast.parse`` raises ``SystemError: AST constructor
recursion depth mismatch`` on valid input (python/cpython#106905). The server steps many sessions in a thread pool,
and the calculator, the toy teacher and the SWE tools parse source on those threads. So every parse in rubricgym
goes through :func:`parse_module` or :func:`parse_expression`, which hold one process-wide lock for the parse.
Parses are short (an arithmetic expression, one source file), so the lock costs nothing measurable.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse_module(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)`` under the process-wide AST lock; raises ``SyntaxError`` as it does."""
    with _LOCK:
        return ast.parse(source, filename=filename)


def parse_expression(source: str) -> ast.expr:
    """The expression ``source`` (``ast.parse(source, mode="eval").body``) under the process-wide AST lock."""
    with _LOCK:
        return ast.parse(source, mode="eval").body
