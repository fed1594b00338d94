"""``import rubricgym`` alone registers the built-in envs with Gymnasium (issue 9, item 12)."""

from __future__ import annotations

import subprocess
import sys


def test_gymnasium_make_works_right_after_import_rubricgym():
    code = (
        "import gymnasium, rubricgym, sys\n"
        "env = gymnasium.make('rubricgym/ToyCalculator-v0')\n"
        "obs, info = env.reset(seed=0)\n"
        "assert 'calculator' in obs\n"
        "ids = {'rubricgym/Deepsearch-v0', 'rubricgym/Swe-v0', 'rubricgym/Clinical-v0'}\n"
        "assert ids <= set(gymnasium.registry)\n"
        "assert 'rubricgym.envs.deepsearch.env' not in sys.modules  # registered by name, imported on make\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
