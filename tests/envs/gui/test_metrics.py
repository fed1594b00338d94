"""GUI run metrics: SR, PR, FC, OT, USE and pass@k from trajectory summaries."""

import pytest

from rubricgym.core.types import Outcome, Task, Trajectory
from rubricgym.envs.gui.metrics import format_metrics, gui_metrics, pass_at_k


def _traj(task_id: str, success: bool, progress: float, fc=False, ot=False, side=()):
    task = Task(id=task_id, env_id="gui-v0", prompt="p")
    summary = {
        "success": success,
        "progress": progress,
        "false_completion": fc,
        "overdue": ot,
        "side_effects": list(side),
    }
    return Trajectory(task=task, outcome=Outcome(summary=summary))


def test_pass_at_k_matches_the_unbiased_estimator():
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)
    assert pass_at_k(4, 0, 4) == 0.0 and pass_at_k(4, 3, 2) == 1.0


def test_gui_metrics_over_two_tasks_with_two_attempts():
    trajs = [
        _traj("a", True, 1.0),
        _traj("a", False, 0.5, fc=True),
        _traj("b", False, 0.0, ot=True),
        _traj("b", False, 0.5, side=["settings.wifi"]),
    ]
    m = gui_metrics(trajs)
    assert m["SR"] == 0.25 and m["PR"] == 0.5 and m["FC"] == 0.25 and m["OT"] == 0.25 and m["USE"] == 0.25
    assert m["pass@k"] == {"1": pytest.approx(0.25), "2": pytest.approx(0.5)}
    assert "SR 0.250" in format_metrics(m) and "pass@2 0.500" in format_metrics(m)


def test_runs_of_other_envs_have_no_gui_metrics():
    assert gui_metrics([Trajectory(task=Task(id="t", env_id="toy-calculator-v0", prompt="p"))]) is None
