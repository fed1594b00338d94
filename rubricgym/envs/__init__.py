"""Built-in env families; importing this package registers them (toy-*, deepsearch-v0, swe-v0)."""

from rubricgym.envs import deepsearch, gui, swe, toy  # noqa: F401  (each registers its envs on import)
