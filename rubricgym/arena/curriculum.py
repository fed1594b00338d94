"""Moved to ``rubricgym.suites.curriculum`` (the trainer samples suites with it); kept for old imports."""

from rubricgym.suites.curriculum import CurriculumConfig, SuiteSampler, mean_abs_advantage

__all__ = ["CurriculumConfig", "SuiteSampler", "mean_abs_advantage"]
