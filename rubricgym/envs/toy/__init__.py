"""Toy envs used by the docs and by the tests of every other module."""

from rubricgym.envs.toy.calculator import CalculatorEnv

__all__ = ["CalculatorEnv"]
