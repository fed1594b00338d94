"""Built-in env families, registered here by ``"module:Class"`` strings (``import rubricgym`` runs this).

Registering by string keeps ``import rubricgym`` light (no search index, no sandbox code is imported) while
``rubricgym.make`` and ``gymnasium.make("rubricgym/<Name>-v0")`` work at once.
"""

import importlib.util

from rubricgym.core.registry import register, register_id_hint, register_id_prefix

register(
    "toy-calculator-v0",
    "rubricgym.envs.toy.calculator:CalculatorEnv",
    description="Multi-step arithmetic word problems solved with a calculator tool (stages: compute, answer).",
    replace=True,
)
register(
    "deepsearch-v0",
    "rubricgym.envs.deepsearch.env:DeepSearchEnv",
    description="Multi-hop questions over a fictional encyclopedia (or a real corpus): search, open, find and "
    "answer with citations; CaRR citation-aware rubric rewards (stages: plan, gather, review, answer).",
    replace=True,
)
register(
    "swe-v0",
    "rubricgym.envs.swe.env:SweEnv",
    description="Fix an injected or SWE-bench bug in a sandboxed Python repository (stages: reproduce, localize, "
    "edit, verify); graded by FAIL_TO_PASS/PASS_TO_PASS tests.",
    replace=True,
)
register(
    "clinical-v0",
    "rubricgym.envs.clinical.env:ClinicalEnv",
    description="Diagnose a virtual patient: ask, examine, order exams one at a time, diagnose; DiagGym reward and "
    "a physician-style rubric (stages: history, examination, testing, diagnosis).",
    replace=True,
)
register(
    "clinical-cost-v0",
    "rubricgym.envs.clinical.env:CostAwareClinicalEnv",
    description="clinical-v0 with a cost-aware default rubric (total cost and invasiveness of the work-up count).",
    replace=True,
)
register(
    "gui-v0",
    "rubricgym.envs.gui.env:GuiEnv",
    description="Everyday tasks in six bundled web apps driven through a real Chromium (ARIA snapshots, element "
    "refs); rewards are goal predicates over the app's state (stages: navigate, act, finish).",
    replace=True,
)
register(
    "web-example-v0",
    "rubricgym.envs.gui.byo:WebTaskEnv",  # its default spec is the worked example
    description="Bring-your-own web tasks, worked example: a flight-booking page that computes its own reward in "
    "JavaScript, turned into an env by rubricgym/envs/gui/byo_example/spec.yaml.",
    replace=True,
)
register_id_prefix("web:", "rubricgym.envs.gui.byo:web_env_spec")  # web:my_site/spec.yaml runs a spec, unregistered

if importlib.util.find_spec("miniwob") is not None:  # pip install 'rubricgym[miniwob]': its pages become envs
    from rubricgym.envs.gui.miniwob import register_miniwob

    register_miniwob()
else:
    register_id_hint("miniwob-", "The MiniWoB++ envs need the miniwob package: pip install 'rubricgym[miniwob]'.")
