"""``gui-v0``: a real browser (Debian Chromium via Playwright), bundled everyday web apps, state judges.

Importing this package registers the envs and nothing else: no browser starts until an episode is reset.
"""

from rubricgym.core.registry import register
from rubricgym.envs.gui.env import GuiEnv

register(
    "gui-v0",
    GuiEnv,
    description="Everyday tasks in six bundled web apps driven through a real Chromium (ARIA snapshots, element "
                "refs); rewards are goal predicates over the app's state (stages: navigate, act, finish).",
    replace=True,
)

__all__ = ["GuiEnv"]
