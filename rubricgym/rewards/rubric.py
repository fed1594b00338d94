"""The rubric schema (``Criterion``, ``Rubric``, ``Aggregation``), defined in ``rubricgym.core.rubric`` so envs
can return typed rubrics; re-exported here for ``rewards`` users. The file format is documented there."""

from rubricgym.core.rubric import (
    LEVEL_WEIGHTS,
    Aggregation,
    Criterion,
    Level,
    Method,
    Rubric,
    RubricError,
    load_rubric,
)

__all__ = ["LEVEL_WEIGHTS", "Aggregation", "Criterion", "Level", "Method", "Rubric", "RubricError", "load_rubric"]
