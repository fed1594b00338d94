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
        for env_id in ("echo-v0", "price-check-v0"):
            rubricgym.unregister(env_id)


def test_readme_training_config_validates():
    import yaml

    from rubricgym.trainers.config import validate_config

    blocks = re.findall(r"```yaml\n(.*?)```", (Path(__file__).parents[1] / "README.md").read_text(), re.S)
    configs = [b for b in blocks if "advantage:" in b]
    assert configs, "the README shows a training config"
    for block in configs:
        cfg = validate_config(yaml.safe_load(block), "README.md")
        assert cfg.env.kwargs["style"] == "expression"
