"""The README's Python examples run as written."""

import re
from pathlib import Path

import pytest

import rubricgym

BLOCKS = re.findall(r"```python\n(.*?)```", (Path(__file__).parents[1] / "README.md").read_text(), re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    try:
        exec(compile(BLOCKS[index], f"README.md block {index}", "exec"), namespace)
    finally:
        for env_id in ("echo-v0",):
            rubricgym.unregister(env_id)
