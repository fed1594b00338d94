"""Toy envs used by the docs and by the tests of every other module."""

from rubricgym.core.registry import register
from rubricgym.envs.toy.calculator import CalculatorEnv

register(
    "toy-calculator-v0",
    CalculatorEnv,
    description="Multi-step arithmetic word problems solved with a calculator tool (stages: compute, answer).",
    replace=True,
)

__all__ = ["CalculatorEnv"]
