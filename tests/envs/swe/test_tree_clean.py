"""Sandbox tests leave the repository tree clean: an out-of-memory container writes nothing in it (issue 9, item 14)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rubricgym.envs.swe.sandbox import Limits

pytestmark = pytest.mark.slow
ROOT = Path(__file__).parents[3]


async def test_an_oom_killed_container_leaves_no_file_in_the_tree(docker, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "mod.py").write_text("VALUE = 1\n")
    places = {ROOT, Path.cwd()}
    before = {p: set(p.iterdir()) for p in places}
    async with await docker.create(repo, Limits(timeout_s=20, memory_mb=128, pids=64)) as sb:
        res = await sb.exec(["/usr/bin/python3", "-c", "b = []\nwhile True:\n    b.append(bytearray(32 << 20))"])
        assert res.exit_code != 0
    for p in places:
        assert set(p.iterdir()) - before[p] == set(), f"new files in {p}"
