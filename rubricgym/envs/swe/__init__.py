"""``swe-v0``: software-engineering tasks in real Python repositories, run in bubblewrap or container sandboxes.

``rubricgym.envs`` registers the env by name. Importing this package starts no sandbox, writes no repository and
uses no network: all of that waits until an episode is reset.
"""

from rubricgym.envs.swe.env import SweEnv
from rubricgym.envs.swe.instance import SweInstance

__all__ = ["SweEnv", "SweInstance"]
