"""``gui-v0``: a real browser (Debian Chromium via Playwright), bundled everyday web apps, state judges; and
``web-example-v0`` / ``register_web_tasks``: bring-your-own web tasks.

``rubricgym.envs`` registers the envs by name. Importing this package starts no browser: that waits until an
episode is reset.
"""

from rubricgym.envs.gui.byo import EXAMPLE_SPEC, WebTaskEnv, WebTaskSpec, register_web_tasks
from rubricgym.envs.gui.env import GuiEnv

__all__ = ["EXAMPLE_SPEC", "GuiEnv", "WebTaskEnv", "WebTaskSpec", "register_web_tasks"]
