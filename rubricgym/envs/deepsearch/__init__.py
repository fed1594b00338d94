"""Deep search: multi-hop questions over a fictional (or real) corpus, answered with cited sources.

``rubricgym.make("deepsearch-v0")`` builds a 500-page fictional world (``n_docs`` up to 100,000); pass
``corpus=FOLDER_OR_JSONL, questions=QUESTIONS.jsonl`` for a real corpus. Rewards follow CaRR / C-GRPO.
"""

from rubricgym.core.registry import register
from rubricgym.envs.deepsearch.env import DeepSearchEnv

register(
    "deepsearch-v0",
    DeepSearchEnv,
    description="Multi-hop questions over a fictional encyclopedia (or a real corpus): search, open, find and "
    "answer with citations; CaRR citation-aware rubric rewards (stages: plan, gather, review, answer).",
    replace=True,
)

__all__ = ["DeepSearchEnv"]
