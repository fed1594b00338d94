"""`rubricgym score` at 80 columns: every criterion id and every value whole (issue #42 item 6)."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_score_at_80_columns_cuts_no_criterion_id_or_value(tmp_path):
    env = {**os.environ, "COLUMNS": "80"}
    run = [sys.executable, "-m", "rubricgym"]
    made = subprocess.run(
        [*run, "run", "toy-calculator-v0", "--agent", "oracle", "--tasks", "3", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr
    out = subprocess.run([*run, "score", str(tmp_path)], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    import json

    summary = json.loads((tmp_path / "scores_summary.json").read_text())
    words = out.stdout.split()
    assert "…" not in out.stdout and max(len(ln) for ln in out.stdout.splitlines()) <= 80
    for row in summary["criteria"]:
        assert row["criterion"] in words and row["judged_by"] in words
