"""``rubricgym view``: a trace viewer over run directories (episodes with per-step verdicts, training groups with
advantages, the live training dashboard, the arena), served on loopback or exported as static HTML."""

from rubricgym.viewer.runs import Run, ViewerError, discover

__all__ = ["Run", "ViewerError", "discover"]
