"""``swe-v0``: fix a bug in a real Python repository inside a sandbox, then submit.

The agent reads an issue, and with ``bash``, ``view``, ``str_replace``, ``create`` and ``run_tests`` works in its
own sandboxed copy of the repository; ``submit`` grades the repository with the instance's FAIL_TO_PASS and
PASS_TO_PASS tests (the env reward is the graded score). Steps are labelled ``reproduce`` (tests before any
edit), ``localize`` (reading before any edit), ``edit`` and ``verify`` (tests after an edit, submit).

Tools run sandbox commands, so they are ``async def``: ``astep_typed`` awaits them (rollouts use it) and the
synchronous ``step``/``step_typed`` run them to completion through the env contract's one bridge (``core.aio``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rubricgym.core.env import RubricEnv, ToolError, ToolOutput
from rubricgym.core.rubric import Rubric
from rubricgym.core.steprecord import ToolRecord
from rubricgym.core.tools import declared_tools, tool
from rubricgym.core.types import Task, ToolCall
from rubricgym.envs.swe import checks
from rubricgym.envs.swe.builtin import builtin_instances
from rubricgym.envs.swe.grading import Grade, grade
from rubricgym.envs.swe.guidance import LEVELS as GUIDANCE_LEVELS
from rubricgym.envs.swe.guidance import hint
from rubricgym.envs.swe.instance import ENV_ID, SweInstance
from rubricgym.envs.swe.records import RECORDS, Submit, SweRecord, changed_files, ran_tests
from rubricgym.envs.swe.sandbox import Limits, Sandbox, SandboxBackend, get_backend
from rubricgym.envs.swe.taskfile import load_instances, load_instances_at, raw_record_hint
from rubricgym.envs.swe.tools import SweTools

__all__ = ["SweEnv", "load_instances"]

ALL_SPLIT = "all"
"""The split that draws every instance, training and held-out alike (to evaluate a model trained elsewhere)."""
_UNMARKED = (
    ": the split of an instance is its record's details.split ('train' or 'test'); one without it serves every split"
)


class SweEnv(SweTools, RubricEnv):
    """Bug fixing in a sandboxed repository.

    ``instances`` (``SweInstance`` objects, dicts, or a JSONL path) are the tasks ``reset`` draws from when no
    task is given; the default is the built-in ``tinytext`` tasks (no network). ``backend`` is ``bwrap``
    (default) or ``docker`` (with ``docker_url`` or ``DOCKER_HOST``); ``limits`` bounds each sandbox.
    ``guidance`` gives three levels of hints for a failing group: the failing test, the file to edit, the lines
    (``guidance.py``).

    Splits: a marked instance belongs to ``train`` or to the held-out split (``test``, or any name but ``train``
    and ``all``), so held-out tasks never share an instance, a gold patch or a failing test with training. The ten
    built-in tasks are split 6 / 4 by function (``builtin.HELDOUT_BUGS``: the bugs in ``truncate`` and
    ``title_case`` are held out, among them a kind training never shows). A user's instance goes where its record's
    ``details.split`` (``"train"`` or ``"test"``) says; a record that does not say serves every split (a file of
    SWE-bench instances to evaluate on works as it is: mark the records to hold some out of training).
    ``split="all"`` draws every instance. Asking ``task_set`` for more tasks than a split holds is a
    ``ValueError`` that says how many it holds.
    """

    env_id = ENV_ID
    stages = ("reproduce", "localize", "edit", "verify")
    default_max_steps = 30
    max_observation_chars = 8000
    check_set = checks.ALL
    step_records = RECORDS
    discoverable = {
        field: frozenset({"bash", "view", "run_tests"}) for field in ("buggy_files", "test_files", "FAIL_TO_PASS")
    }
    """The repository is the agent's to read and test: the files and the failing tests are found by working."""
    hintable = frozenset({"buggy_files", "test_files", "FAIL_TO_PASS"})
    """Guidance names the failing test and the files to edit (never a line of either patch)."""
    guidance_levels = GUIDANCE_LEVELS
    scripted_agents = {
        "oracle": "rubricgym.envs.swe.agents:OracleAgent",
        "random": "rubricgym.envs.swe.agents:RandomAgent",
        "teacher": "rubricgym.envs.swe.teacher:Teacher",
    }
    outcome_agents = {
        "partial": "rubricgym.envs.swe.agents:PartialFixAgent",
        "failed": "rubricgym.envs.swe.agents:IrrelevantEditAgent",
        "activity": "rubricgym.envs.swe.agents:BusyAgent",
    }
    """The outcome-consistency audit's calibration agents (``agents.py``): a partly right fix, a comment and a
    changelog note, and reading and testing that change nothing."""

    def __init__(
        self,
        instances: list[SweInstance | dict[str, Any]] | str | Path | None = None,
        backend: str | SandboxBackend = "bwrap",
        docker_url: str | None = None,
        limits: Limits | dict[str, Any] | None = None,
        command_timeout: float = 60.0,
        test_timeout: float = 300.0,
        max_steps: int | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        self._origins: dict[str, str] = {}
        if isinstance(instances, str | Path):
            located = load_instances_at(instances)
            instances = [inst for inst, _ in located]
            self._origins = {inst.instance_id: f"{inst.instance_id} at {where}" for inst, where in located}
        for n, i in enumerate(instances or []):
            if hint := raw_record_hint(i, f"instances[{n}]"):
                raise ValueError(hint)
        self._instances = [SweInstance.model_validate(i) if isinstance(i, dict) else i for i in instances or []]
        self._owns_backend = isinstance(backend, str)  # made here, so closed here (its spare sandboxes removed)
        if isinstance(backend, str):
            backend = get_backend(backend, **({"base_url": docker_url} if backend == "docker" else {}))
        self.backend = backend
        self.limits = Limits(**limits) if isinstance(limits, dict) else (limits or Limits())
        self.command_timeout = command_timeout
        self.test_timeout = test_timeout
        self.sandbox: Sandbox | None = None
        self.python_path: list[str] = ["."]
        self._instance: SweInstance | None = None
        self._edited = False
        self._last_record: ToolRecord | None = None

    # ---- tasks ------------------------------------------------------------------------------------------

    def instances(self) -> list[SweInstance]:
        if not self._instances:
            self._instances = builtin_instances()
        return self._instances

    def task_origin(self, task: Task) -> str:
        """The record of the user's tasks file a task came from (its instance id and ``FILE:LINE``); ``""`` for
        built-in tasks and instances given as objects."""
        return self._origins.get(task.id, "")

    def split_of(self, inst: SweInstance) -> str | None:
        """``"train"`` or ``"test"``: the side of the instance's own ``details["split"]`` (every built-in task has
        one; ``"train"`` is training, any other name, such as SWE-bench's ``"dev"``, held out); ``None`` for an
        instance whose record does not say, which every split draws."""
        marked = inst.details.get("split")
        if marked is None:
            return None
        if not isinstance(marked, str) or not marked.strip():
            where = self._origins.get(inst.instance_id, inst.instance_id)
            raise ValueError(
                f"instance {where}: details.split is {marked!r}; mark it 'train' or 'test', or leave it out to serve "
                f"every split"
            )
        return "train" if marked.strip() == "train" else "test"

    def pool(self, split: str = "train") -> list[SweInstance]:
        """The instances ``split`` draws from: ``train`` the training ones, ``all`` every one, any other split
        (``test``, ...) the held-out ones; an instance of no split (an unmarked record) is in every pool."""
        if split == ALL_SPLIT:
            return self.instances()
        side = "train" if split == "train" else "test"
        return [i for i in self.instances() if self.split_of(i) in (side, None)]

    def task_set(self, n: int, seed: int = 0, split: str = "train") -> list[Task]:
        """``n`` distinct tasks of ``split`` in a seeded order; asking for more than the split has says how many it
        has and how to build more."""
        pool = self.pool(split)
        if n > len(pool):
            total = len(self.instances())
            what = "built-in offline tasks" if all(i.source == "builtin" for i in self.instances()) else "tasks"
            unmarked = _UNMARKED if any("split" in i.details for i in self.instances()) else ""
            raise ValueError(
                f"{self.env_id} has {len(pool)} {what} in split {split!r} ({total} in all; split={ALL_SPLIT!r} draws "
                f"every one), fewer than the {n} asked for: ask for at most {len(pool)}, or build more from a "
                f"package with `rubricgym swe build PACKAGE==VERSION --n {n} --out tasks.jsonl` and pass them with "
                f"`--env-arg instances=tasks.jsonl` (Python: instances='tasks.jsonl'){unmarked}"
            )
        order = np.random.default_rng([seed, sum(split.encode())]).permutation(len(pool))[:n]
        return [pool[int(i)].to_task(split) for i in order]

    def sample_task(self, rng: np.random.Generator, split: str = "train") -> Task:
        pool = self.pool(split)
        if not pool:
            raise ValueError(
                f"{self.env_id}: none of the {len(self.instances())} tasks is in split {split!r}{_UNMARKED}; or ask "
                f"for split={ALL_SPLIT!r}"
            )
        return pool[int(rng.integers(len(pool)))].to_task(split)

    def system_prompt(self) -> str:
        return (
            super().system_prompt() + "\nYou work in a sandbox without network access. Paths are relative to "
            "the repository root /work. Fix the bug in the library code, not in the tests."
        )

    # ---- episode ----------------------------------------------------------------------------------------

    def begin(self, task: Task) -> None:
        self._instance = SweInstance.from_task(task)
        self._edited = False
        self._last_record = None
        deps = Path(self._instance.deps) if self._instance.deps else None
        self.run_async(self._open(Path(self._instance.snapshot), deps))

    async def _open(self, snapshot: Path, deps: Path | None = None) -> None:
        await self._close()
        self.sandbox = await self.backend.create(snapshot, self.limits, deps)
        self.python_path = self._instance.python_path if self._instance else ["."]

    async def _close(self) -> None:
        if self.sandbox is not None:
            sandbox, self.sandbox = self.sandbox, None
            await sandbox.destroy()
        if self._owns_backend:
            await self.backend.aclose()

    def close(self) -> None:
        self.run_async(self._close())
        super().close()

    async def aclose(self) -> None:
        await self._close()

    @tool
    async def submit(self) -> ToolOutput:
        """Submit the current state of the repository as your fix; this ends the episode."""
        g = await self._grade()
        return ToolOutput(
            text="Submitted. " + g.describe(),
            done=True,
            answer=g.model_patch,
            reward=g.score,
            info=Submit(tool="submit", grading=g.to_record()).info(),
            solved=g.resolved,
        )

    async def _grade(self) -> Grade:
        if self.sandbox is None or self._instance is None:
            raise ToolError("the sandbox is closed: call reset() to start an episode")
        return await grade(self.sandbox, self._instance, timeout=self.test_timeout)

    async def acall_tool(self, call: ToolCall) -> ToolOutput:
        """Run the tool in the sandbox; on the episode's last step grade what is there. Records what the tool did
        for ``stage_of``."""
        try:
            if self.sandbox is None or self._instance is None:
                raise ToolError("the sandbox is closed: call reset() to start an episode")
            final = len(self._records) + 1 >= self.max_steps
            out = await self.run_tool(declared_tools(type(self))[call.name].method, dict(call.arguments))
            if final and not out.done:  # the step limit ends the episode after this step: grade what is there
                g = await self._grade()
                graded = RECORDS.parse(call.name, out.info).model_copy(update={"grading": g.to_record()})
                out.reward, out.info = g.score, graded.info()
        except ToolError:
            self._last_record = None
            raise
        self._last_record = RECORDS.parse(call.name, out.info, len(self._records))
        return out

    def stage_of(self, call: ToolCall | None) -> str:
        if call is None:
            return self._stage or "localize"
        record = self._last_record
        if call.name == "submit":
            return "verify"
        if changed_files(record):
            self._edited = True
            return "edit"
        if ran_tests(record):
            return "verify" if self._edited else "reproduce"
        return "edit" if self._edited else "localize"

    @classmethod
    def secrets(cls, task: Task) -> list[tuple[str, Any]]:
        """The gold patch (whole, and each line it adds), the test patch, the failing tests and the buggy and test
        files; the problem statement is the prompt and the instance id, repo and commit name the task.

        The failing tests and the files are localisation, found by working (``discoverable``) and named by
        ``guidance`` for a group that keeps failing (``hintable``), but in no other channel (ids, ``info``,
        ``state()``, the first observation).
        """
        inst = task.hidden.get("instance", {})
        out: list[tuple[str, Any]] = []
        for key in ("patch", "test_patch"):
            text = inst.get(key) or ""
            if text:
                out.append((f"instance.{key}", text))
            lines = text.splitlines()
            added = [ln[1:].strip() for ln in lines if ln.startswith("+") and not ln.startswith("+++")]
            removed = [f" {_words(ln[1:])} " for ln in lines if ln.startswith("-") and not ln.startswith("---")]
            # a fix that changes an operator ("i >= 0" -> "i > 0") or deletes words ("/ (len(xs) + 1)" -> "/ len(xs)")
            # reads, once normalised, like (part of) the buggy line the agent must read: not a secret then
            out += [
                (f"instance.{key}+", ln)
                for ln in added
                if len(ln) >= 12 and not any(f" {_words(ln)} " in r for r in removed)
            ]
        out += [(f"FAIL_TO_PASS[{i}]", t) for i, t in enumerate(inst.get("FAIL_TO_PASS", []))]
        for key in ("buggy_files", "test_files"):
            out += [(f"{key}[{i}]", f) for i, f in enumerate(task.hidden.get(key, []))]
        return out

    @classmethod
    def public_text(cls, task: Task) -> Iterator[str]:
        """The problem statement and every text file of the repository at its base commit (the task's snapshot;
        no ``.git``, nothing binary or over 1 MB): a line of the fix that the repository already has hundreds of
        times, or an expected output the issue quotes, is there for any agent to read, not a secret."""
        inst = task.hidden.get("instance", {})
        yield inst.get("problem_statement") or task.prompt
        snapshot = inst.get("snapshot") or task.params.get("snapshot")
        if not snapshot or not Path(snapshot).is_dir():
            return
        root = Path(snapshot)
        for path in sorted(root.rglob("*")):
            if ".git" in path.relative_to(root).parts or not path.is_file() or path.stat().st_size > 1_000_000:
                continue
            data = path.read_bytes()
            if b"\0" not in data[:8192]:
                yield data.decode("utf-8", errors="replace")

    def guidance(self, task: Task, level: int) -> str | None:
        """Level 1: the first failing test to run ("Start by running the failing test `tests/test_core.py::
        test_wrap_long_word` with run_tests ..."), or, when the graders' test patch adds that test, that the agent
        should write its own reproduction; level 2 adds the library file(s) the gold patch touches; level 3 adds the
        line ranges of its hunks there. Each level keeps the ones below.

        All of it is localisation (``hintable``, see ``secrets``): no level shows a line of either patch.
        Deterministic in the task; no sandbox or episode needed.
        """
        if "instance" not in task.hidden:
            return None
        return hint(SweInstance.from_task(task), level)

    def summary(self) -> dict[str, Any]:
        typed = [RECORDS.of(s) for s in self.steps]
        graded = next((r.grading for r in reversed(typed) if isinstance(r, SweRecord) and r.grading), None)
        return {
            "backend": self.backend.name,
            "resolved": bool(graded and graded.resolved),
            "score": graded.score if graded else 0.0,
            "edits": sum(1 for r in typed if changed_files(r)),
            "test_runs": sum(1 for r in typed if ran_tests(r)),
            "invalid_steps": sum(1 for r in self._records if r.parse_error or r.out.error),
        }

    # ---- rubric hooks -----------------------------------------------------------------------------------

    @classmethod
    def default_rubric(cls) -> Rubric:
        return Rubric.from_dict(checks.DEFAULT_RUBRIC, source="swe DEFAULT_RUBRIC")


def _words(line: str) -> str:
    return " ".join(re.findall(r"[^\W_]+", line.casefold()))
