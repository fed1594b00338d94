"""Moved to ``rubricgym.suites.suite`` (suites are shared by the arena and the trainer); kept for old imports."""

from rubricgym.suites.suite import (
    SUITES_DIR,
    Suite,
    SuiteEntry,
    SuiteError,
    builtin_suites,
    load_suite,
    suite_from_dict,
)

__all__ = ["SUITES_DIR", "Suite", "SuiteEntry", "SuiteError", "builtin_suites", "load_suite", "suite_from_dict"]
