"""The live training display as a log sees it (a console that is not a terminal)."""

import io

from rich.console import Console

from rubricgym.trainers.config import TrainConfig
from rubricgym.trainers.display import LiveDisplay


def test_a_logged_display_names_the_suite_and_ends_its_last_line():
    out = io.StringIO()
    console = Console(file=out, width=200)
    with LiveDisplay(TrainConfig.model_validate({"env": {"suite": "demo-mix"}}), console) as display:
        display.status("evaluating the trained policy on held-out tasks")
    console.print("base vs trained after 0 steps")
    text = out.getvalue()
    assert "on demo-mix" in text and "toy-calculator-v0" not in text
    assert "held-out tasks\nbase vs trained" in text  # not glued to the display's last line
