"""Built-in env families; importing this package registers them (toy-*, deepsearch-v0, swe-v0, clinical-v0)."""

from rubricgym.envs import clinical, deepsearch, swe, toy  # noqa: F401  (each registers its envs on import)
