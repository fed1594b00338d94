"""A small two-family suite (toy + deep search) that plays in seconds with scripted agents."""

from pathlib import Path

import pytest
import yaml

SMALL = {
    "name": "small",
    "version": "1",
    "entries": [
        {"env": "toy-calculator-v0", "name": "toy", "kwargs": {"min_ops": 1, "max_ops": 2}, "tasks": 6},
        {
            "env": "deepsearch-v0",
            "name": "ds",
            "kwargs": {"n_docs": 200, "difficulty": "easy"},
            "tasks": 3,
            "weight": 0.5,
        },
    ],
}


@pytest.fixture
def small_suite_file(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    return path


@pytest.fixture
def agents_file(tmp_path: Path):
    """``agents_file(*entries)`` writes an agents YAML and returns its path."""

    def write(*entries: dict) -> Path:
        path = tmp_path / "agents.yaml"
        path.write_text(yaml.safe_dump({"agents": list(entries)}))
        return path

    return write
