"""Deep search: multi-hop questions over a fictional (or real) corpus, answered with cited sources.

``rubricgym.make("deepsearch-v0")`` builds a 500-page fictional world (``n_docs`` up to 100,000); pass
``corpus=FOLDER_OR_JSONL, questions=QUESTIONS.jsonl`` for a real corpus. Rewards follow CaRR / C-GRPO.
"""

from rubricgym.envs.deepsearch.env import DeepSearchEnv

__all__ = ["DeepSearchEnv"]
