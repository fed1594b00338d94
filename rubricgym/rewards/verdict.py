"""``Verdict`` and ``Evidence`` (defined in ``rubricgym.core.rubric``; re-exported here)."""

from rubricgym.core.rubric import Evidence, Verdict

__all__ = ["Evidence", "Verdict"]
