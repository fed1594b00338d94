"""rubricgym: train and compare LLM agents with rubric rewards.

>>> import rubricgym
>>> env = rubricgym.make("toy-calculator-v0")
>>> obs, info = env.reset(seed=0)
"""

from rubricgym import envs as _envs  # noqa: F401  (registers the built-in envs, with Gymnasium too)
from rubricgym.core import *  # noqa: F403  (the public face is core's __all__)
from rubricgym.core import __all__ as _core_all
from rubricgym.core.registry import register_id_prefix as _register_id_prefix
from rubricgym.core.registry import register_url_handler as _register_url_handler
from rubricgym.rewards import CheckJudge, Criterion, LLMJudge, ProcessRewardModel, Rubric, Verdict

# make("ws://host:port") drives a served env: a rubricgym server's as it serves it, a stock OpenEnv server's mapped
_register_url_handler("rubricgym.interop.openenv:url_spec")
_register_id_prefix("verifiers:", "rubricgym.interop.verifiers_env:verifiers_spec")  # make("verifiers:<taskset>")
__version__ = "0.1.0"
__all__ = [*_core_all, "CheckJudge", "Criterion", "LLMJudge", "ProcessRewardModel", "Rubric", "Verdict", "__version__"]
