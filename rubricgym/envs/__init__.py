"""Built-in env families; importing this package registers them."""

from rubricgym.envs import toy  # noqa: F401  (registers toy-* envs)
from rubricgym.envs import deepsearch  # noqa: F401
