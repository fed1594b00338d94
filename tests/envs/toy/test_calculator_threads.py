"""The calculator evaluates correctly when many server threads call it at once (CPython 3.11's AST race)."""

from __future__ import annotations

import gc
import threading

import pytest

from rubricgym.core.pyast import parse_module
from rubricgym.envs.toy.arith import evaluate


class _Finaliser:
    """Garbage whose collection runs Python code, so the interpreter may switch threads inside a parse."""

    def __del__(self) -> None:
        sum(range(50))


@pytest.fixture
def eager_gc():
    old = gc.get_threshold()
    gc.set_threshold(10, 1, 1)
    yield
    gc.set_threshold(*old)


def test_eight_threads_evaluating_at_once_all_get_the_right_value(eager_gc: None) -> None:
    # Without the lock in rubricgym.core.pyast, CPython 3.11 raised "SystemError: AST constructor recursion depth
    # mismatch" here in most threads within a second (the server load test's calculator step failed this way).
    errors: list[str] = []
    values: list[float | int] = []

    def work() -> None:
        for _ in range(1500):
            cycle: list[object] = [_Finaliser() for _ in range(3)]
            cycle.append(cycle)
            try:
                values.append(evaluate("((1+2)*(3-4))/(5+6*(7-(8+9)))"))
                parse_module("def f(a, b=2):\n    return a + b\n")
            except SystemError as e:
                errors.append(str(e))
                return

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(values) == 8 * 1500
    assert set(values) == {3 / 55}
