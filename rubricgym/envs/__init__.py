"""Built-in env families; importing this package registers them."""

import rubricgym.envs.deepsearch  # noqa: F401  (registers deepsearch-v0)
from rubricgym.envs import toy  # noqa: F401  (registers toy-* envs)
from rubricgym.envs import swe  # noqa: F401
