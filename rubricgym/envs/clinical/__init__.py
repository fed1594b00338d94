"""Clinical diagnosis: interview, examine and test a virtual (or real-case) patient, then commit to a diagnosis.

``rubricgym.make("clinical-v0")`` draws synthetic cases from the built-in knowledge base (81 conditions, 11
specialties, 155 exams); ``kb=FOLDER`` loads your own, ``cases=FILE.jsonl`` real cases. ``clinical-cost-v0`` is
the same env whose default rubric also weighs the work-up's cost and invasiveness. Seed: DiagGym (2510.24654).
"""

from rubricgym.core.registry import register
from rubricgym.envs.clinical.env import ClinicalEnv, CostAwareClinicalEnv

register(
    "clinical-v0",
    ClinicalEnv,
    description="Diagnose a virtual patient: ask, examine, order exams one at a time, diagnose; DiagGym reward and "
    "a physician-style rubric (stages: history, examination, testing, diagnosis).",
    replace=True,
)
register(
    "clinical-cost-v0",
    CostAwareClinicalEnv,
    description="clinical-v0 with a cost-aware default rubric (total cost and invasiveness of the work-up count).",
    replace=True,
)

__all__ = ["ClinicalEnv", "CostAwareClinicalEnv"]
