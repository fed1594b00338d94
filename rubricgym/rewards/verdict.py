"""``Verdict`` and ``Evidence`` (defined in ``rubricgym.core.rubric``; re-exported here)."""

from rubricgym.core.rubric import APPLIES_IF_JUDGE, PROGRAMMATIC_JUDGES, Evidence, Verdict

__all__ = ["APPLIES_IF_JUDGE", "PROGRAMMATIC_JUDGES", "Evidence", "Verdict"]
