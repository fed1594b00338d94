"""Clinical diagnosis: interview, examine and test a virtual (or real-case) patient, then commit to a diagnosis.

``rubricgym.make("clinical-v0")`` draws synthetic cases from the built-in knowledge base (81 conditions, 11
specialties, 155 exams); ``kb=FOLDER`` loads your own, ``cases=FILE.jsonl`` real cases. ``clinical-cost-v0`` is
the same env whose default rubric also weighs the work-up's cost and invasiveness. Seed: DiagGym (2510.24654).
"""

from rubricgym.envs.clinical.env import ClinicalEnv, CostAwareClinicalEnv

__all__ = ["ClinicalEnv", "CostAwareClinicalEnv"]
