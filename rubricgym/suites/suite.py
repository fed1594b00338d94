"""``Suite``: a named, versioned list of env entries that evaluation, the arena and the trainer share.

A suite is a YAML file (or a ``Suite`` built in Python)::

    name: toy
    version: "1"
    description: Toy calculator problems, two styles.
    entries:
      - env: toy-calculator-v0
        name: toy-expression          # unique within the suite; default: the env id
        kwargs: {style: expression, min_ops: 1, max_ops: 1}
        split: test
        tasks: 8                      # how many generated tasks, or a task file (JSONL / Parquet / datasets dir)
        seed: 0
        weight: 1.0                   # share of training tasks, and of the overall score
        rubric: null                  # a rubric file or dict; default: the env's default rubric

Built-in suites are the YAML files in ``rubricgym/suites/builtin/`` (``rubricgym suites`` lists them); adding a
family's suite is adding a file there. A bad file fails on load naming the file, the entry and the field.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rubricgym.core.jsonl import read_text
from rubricgym.core.tasks import TaskFileError, TaskSet
from rubricgym.core.types import Task

SUITES_DIR = Path(__file__).with_name("builtin")


class SuiteError(ValueError):
    """A suite that cannot be loaded; the message names the file, entry and field and what to do."""


class SuiteEntry(BaseModel):
    """One env of a suite with the kwargs, task source and weight it runs with."""

    model_config = ConfigDict(extra="forbid")

    env: str
    name: str = ""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    split: str = "test"
    tasks: int | str = Field(8)
    """A number of generated tasks, or the path of a task file (relative paths: to the suite file)."""
    seed: int = 0
    weight: float = Field(1.0, gt=0.0)
    rubric: str | dict[str, Any] | None = None

    @model_validator(mode="after")
    def _defaults(self) -> SuiteEntry:
        if not self.name:
            self.name = self.env
        if isinstance(self.tasks, int) and self.tasks < 1:
            raise ValueError(f"tasks must be >= 1, got {self.tasks}")
        return self

    def task_set(self, base_dir: Path | None = None) -> TaskSet:
        """The entry's tasks: generated (seeded, deterministic; repeats dropped, so a small task space such as
        the SWE env's built-in bugs yields fewer) or read from its task file."""
        if isinstance(self.tasks, int):
            from rubricgym.core.registry import make

            unique: dict[str, Task] = {}
            for t in make(self.env, **self.kwargs).task_set(self.tasks, seed=self.seed, split=self.split):
                unique.setdefault(t.id, t)
            return TaskSet(unique.values(), source=f"{self.env}(seed={self.seed}, split={self.split})")
        path = Path(self.tasks)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        return TaskSet.from_file(path, env_id=self.env, split=self.split)

    def load_rubric(self, base_dir: Path | None = None) -> Any:
        """The entry's ``Rubric``: its own (file or dict), else the env's default rubric."""
        from rubricgym.core.registry import spec
        from rubricgym.rewards.rubric import load_rubric

        if self.rubric is None:
            return load_rubric(spec(self.env).load().default_rubric())
        if isinstance(self.rubric, str) and base_dir is not None and not Path(self.rubric).is_absolute():
            return load_rubric(str(base_dir / self.rubric))
        return load_rubric(self.rubric)


class Suite(BaseModel):
    """A named, versioned list of entries; ``source`` is the file it came from (if any)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    version: str = "1"
    description: str = ""
    entries: list[SuiteEntry] = Field(min_length=1)
    source: str | None = Field(None, exclude=True)

    @model_validator(mode="after")
    def _unique_names(self) -> Suite:
        seen: set[str] = set()
        for i, e in enumerate(self.entries):
            if e.name in seen:
                raise ValueError(f"entries[{i}]: name {e.name!r} is used twice; give each entry a unique 'name'")
            seen.add(e.name)
        return self

    @property
    def base_dir(self) -> Path | None:
        return Path(self.source).parent if self.source else None

    @property
    def weights(self) -> dict[str, float]:
        """Entry weights normalised to sum to 1."""
        total = sum(e.weight for e in self.entries)
        return {e.name: e.weight / total for e in self.entries}

    def entry(self, name: str) -> SuiteEntry:
        for e in self.entries:
            if e.name == name:
                return e
        raise KeyError(f"suite {self.name!r} has no entry {name!r}; entries: {[e.name for e in self.entries]}")

    def check_envs(self) -> None:
        """Every entry's env is registered (an unknown one names the entry and the close matches)."""
        from rubricgym.core.registry import spec

        for i, e in enumerate(self.entries):
            try:
                spec(e.env)
            except KeyError as err:
                where = f"{self.source or self.name}: entries[{i}] ({e.name})"
                raise SuiteError(f"{where}: field 'env': {err.args[0]}") from None

    @cached_property
    def _task_sets(self) -> dict[str, TaskSet]:
        out = {}
        for i, e in enumerate(self.entries):
            try:
                out[e.name] = e.task_set(self.base_dir)
            except (TaskFileError, KeyError, TypeError, ValueError) as err:
                where = f"{self.source or self.name}: entries[{i}] ({e.name})"
                raise SuiteError(f"{where}: cannot build its tasks: {err}") from None
        return out

    def tasks(self, name: str) -> TaskSet:
        """The tasks of entry ``name`` (built once per ``Suite`` object)."""
        self.entry(name)
        return self._task_sets[name]

    def all_tasks(self) -> list[tuple[SuiteEntry, Task]]:
        return [(e, t) for e in self.entries for t in self.tasks(e.name)]


def _describe(e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        loc = err["loc"]
        where = ".".join(str(p) for p in loc) or "(suite)"
        if len(loc) >= 2 and loc[0] == "entries":
            where = f"entries[{loc[1]}]" + ("." + ".".join(str(p) for p in loc[2:]) if len(loc) > 2 else "")
        parts.append(f"field '{where}': {err['msg']}")
    return "; ".join(parts)


def suite_from_dict(data: Any, source: str) -> Suite:
    if not isinstance(data, dict):
        raise SuiteError(f"{source}: a suite must be a mapping with 'name' and 'entries', got {type(data).__name__}")
    try:
        return Suite.model_validate({**data, "source": source})
    except ValidationError as e:
        raise SuiteError(f"{source}: {_describe(e)}") from None


def builtin_suites() -> dict[str, Path]:
    """Built-in suite name -> YAML file."""
    return {p.stem: p for p in sorted(SUITES_DIR.glob("*.yaml"))}


def load_suite(name_or_path: str | Path, *, check_envs: bool = True) -> Suite:
    """A built-in suite by name, or a suite YAML file by path."""
    path = Path(name_or_path)
    builtin = builtin_suites()
    if str(name_or_path) in builtin:
        path = builtin[str(name_or_path)]
    elif not path.exists():
        raise SuiteError(
            f"no suite {str(name_or_path)!r}: not a built-in suite ({', '.join(builtin)}) nor an existing file"
        )
    try:
        data = yaml.safe_load(read_text(path, SuiteError))
    except yaml.YAMLError as e:
        raise SuiteError(f"{path}: not valid YAML: {e}") from None
    suite = suite_from_dict(data, str(path))
    if check_envs:
        suite.check_envs()
    return suite
