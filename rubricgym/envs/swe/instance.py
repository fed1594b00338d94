"""``SweInstance``: one repository task in the SWE-bench format, plus what a sandbox needs to run it.

The SWE-bench fields (``instance_id, repo, base_commit, problem_statement, patch, test_patch, FAIL_TO_PASS,
PASS_TO_PASS``) keep their names and meaning, so SWE-bench-style JSONL loads directly (the two test lists may be
JSON strings, as SWE-bench stores them). ``snapshot`` is the host directory holding the repository at the
task's start state, ``deps`` the folder of its installed test dependencies (see ``deps``); in a tasks file both
are relative to the file (``taskfile``). ``python_path`` lists the import roots (``src`` layouts).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rubricgym.core.types import Task
from rubricgym.envs.swe.patch import is_test_path, patch_files

ENV_ID = "swe-v0"
INSTRUCTIONS = (
    "\n\nThe repository is checked out at /work (your working directory). Reproduce the problem, find the cause, "
    "fix it in the library code (do not edit the tests), run the tests to verify, then call submit."
)


class SweInstance(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instance_id: str
    repo: str
    base_commit: str = ""
    problem_statement: str
    patch: str
    test_patch: str = ""
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    snapshot: str
    deps: str | None = None
    python_path: list[str] = Field(default_factory=lambda: ["."])
    source: Literal["inject", "swebench", "builtin"] = "swebench"
    details: dict[str, Any] = Field(default_factory=dict)

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _json_list(cls, v: Any) -> Any:
        return json.loads(v) if isinstance(v, str) else v

    @property
    def buggy_files(self) -> list[str]:
        return [p for p in patch_files(self.patch) if not is_test_path(p)]

    @property
    def test_files(self) -> list[str]:
        files = patch_files(self.test_patch) + [t.split("::")[0] for t in self.FAIL_TO_PASS + self.PASS_TO_PASS]
        return list(dict.fromkeys(files))

    def to_task(self, split: str = "test") -> Task:
        """The rubricgym ``Task``: the agent sees the problem statement; patches and tests stay hidden."""
        return Task(
            id=self.instance_id,
            env_id=ENV_ID,
            split=split,
            prompt=self.problem_statement.rstrip() + INSTRUCTIONS,
            params={
                "snapshot": self.snapshot,
                "deps": self.deps,
                "python_path": self.python_path,
                "repo": self.repo,
                "base_commit": self.base_commit,
                "source": self.source,
            },
            hidden={
                "instance": self.model_dump(mode="json"),
                "buggy_files": self.buggy_files,
                "test_files": self.test_files,
            },
        )

    @classmethod
    def from_task(cls, task: Task) -> SweInstance:
        if "instance" not in task.hidden:
            raise ValueError(f"task {task.id!r} has no hidden 'instance': build swe tasks with SweInstance.to_task")
        return cls.model_validate(task.hidden["instance"])
