"""The trainer tests' small configs on the tiny model, for the proxy's training test."""

from tests.trainers.conftest import tiny_config  # noqa: F401
