"""``gui-v0``: a real browser (Debian Chromium via Playwright), bundled everyday web apps, state judges.

Importing this package registers the envs and nothing else: no browser starts until an episode is reset.
"""

from rubricgym.core.registry import register
from rubricgym.envs.gui.byo import EXAMPLE_SPEC, WebTaskEnv, WebTaskSpec, register_web_tasks
from rubricgym.envs.gui.env import GuiEnv

register(
    "gui-v0",
    GuiEnv,
    description="Everyday tasks in six bundled web apps driven through a real Chromium (ARIA snapshots, element "
                "refs); rewards are goal predicates over the app's state (stages: navigate, act, finish).",
    replace=True,
)

register(
    "web-example-v0",
    WebTaskEnv,
    kwargs={"spec": str(EXAMPLE_SPEC)},
    description="Bring-your-own web tasks, worked example: a flight-booking page that computes its own reward in "
                "JavaScript, turned into an env by byo_example/spec.yaml.",
    replace=True,
)

__all__ = ["GuiEnv", "WebTaskEnv", "WebTaskSpec", "register_web_tasks"]
