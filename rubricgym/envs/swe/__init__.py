"""``swe-v0``: software-engineering tasks in real Python repositories, run in bubblewrap or container sandboxes.

Importing this package registers the env and nothing else: no sandbox starts, no repository is written and no
network is used until an episode is reset.
"""

from rubricgym.core.registry import register
from rubricgym.envs.swe.env import SweEnv
from rubricgym.envs.swe.instance import SweInstance

register(
    "swe-v0",
    SweEnv,
    description="Fix an injected or SWE-bench bug in a sandboxed Python repository (stages: reproduce, localize, "
                "edit, verify); graded by FAIL_TO_PASS/PASS_TO_PASS tests.",
    replace=True,
)

__all__ = ["SweEnv", "SweInstance"]
