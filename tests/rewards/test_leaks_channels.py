"""The leak audit reads every channel (issue 39): the system prompt and tool specs as rendered for the task, the
task as the server hands it out, error texts behind unusual calls, numbers in any notation, encoded and split
values; and it stays quiet on text that is not secret (SWE: the problem statement, the repository)."""

from __future__ import annotations

import asyncio
import base64
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rubricgym.core.agent import BaseAgent, tool_call
from rubricgym.core.env import ToolError, ToolOutput
from rubricgym.core.registry import register, unregister
from rubricgym.core.types import Message, Task, ToolCall, ToolSpec
from rubricgym.envs.toy.calculator import CalculatorEnv
from rubricgym.rewards.leaks import Scanner, audit_leaks, make_secrets
from rubricgym.rewards.shortcuts import run_battery


class BigAnswer(CalculatorEnv):
    """The calculator with a five-digit answer (short numbers are not secrets), the base of the leaky envs."""

    env_id = "test-big-answer-v0"

    def sample_task(self, rng: np.random.Generator, split: str = "train") -> Task:
        task = super().sample_task(rng, split)
        hidden = {**task.hidden, "answer": int(rng.integers(10_000, 99_999))}
        return task.model_copy(update={"hidden": hidden, "env_id": self.env_id})

    def answer_now(self) -> int:
        assert self._task is not None
        return int(self._task.hidden["answer"])


class SystemPromptLeak(BigAnswer):
    """Renders its tools anew for each task (so its system prompt is rendered for the task) and names the answer."""

    env_id = "test-leak-system-prompt-v0"

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self._specs = CalculatorEnv.tools(self)

    def begin(self, task: Task) -> None:
        super().begin(task)
        self._specs = [t.model_copy() for t in CalculatorEnv.tools(self)]

    def tools(self) -> list[ToolSpec]:
        return self._specs

    def system_prompt(self) -> str:
        extra = f"\nThe checked result of this task is {self.answer_now()}." if self._task else ""
        return super().system_prompt() + extra


class ToolDescriptionLeak(SystemPromptLeak):
    """States the answer in the ``answer`` tool's description."""

    env_id = "test-leak-tool-description-v0"

    def begin(self, task: Task) -> None:
        super().begin(task)
        hint = f" (the expected value is {task.hidden['answer']})"
        self._specs = [
            t.model_copy(update={"description": t.description + hint}) if t.name == "answer" else t
            for t in CalculatorEnv.tools(self)
        ]

    def system_prompt(self) -> str:
        return CalculatorEnv.system_prompt(self)


class ParamsLeak(BigAnswer):
    """Puts the answer in ``task.params``, which the server's ``tasks`` reply hands to every client."""

    env_id = "test-leak-params-v0"

    def sample_task(self, rng: np.random.Generator, split: str = "train") -> Task:
        task = super().sample_task(rng, split)
        return task.model_copy(update={"params": {**task.params, "check": task.hidden["answer"]}})


class ErrorLeak(BigAnswer):
    """Names the answer in the error of an empty calculator expression (no scripted agent sends one)."""

    env_id = "test-leak-error-v0"

    def call_tool(self, call: ToolCall) -> ToolOutput:
        if call.name == "calculator" and not str(call.arguments.get("expression", "")).strip():
            raise ToolError(f"the expression is empty; type one, e.g. {self.answer_now()}")
        return super().call_tool(call)


class Base64Leak(BigAnswer):
    """Appends the answer in base64 to each calculator result (the calculator's output: no exemption for that)."""

    env_id = "test-leak-base64-v0"

    def call_tool(self, call: ToolCall) -> ToolOutput:
        out = super().call_tool(call)
        if call.name == "calculator":
            out.text += " [ref " + base64.b64encode(str(self.answer_now()).encode()).decode() + "]"
        return out


class ScientificLeak(BigAnswer):
    """Gives the answer's scale in scientific notation in the prompt ("1.234e+04")."""

    env_id = "test-leak-scientific-v0"

    def sample_task(self, rng: np.random.Generator, split: str = "train") -> Task:
        task = super().sample_task(rng, split)
        return task.model_copy(update={"prompt": task.prompt + f" (Scale: {task.hidden['answer']:.4e}.)"})


class SplitLeak(BigAnswer):
    """Shows the answer's first half in the first calculator call's public details, the rest in the second's."""

    env_id = "test-leak-split-v0"
    public_info_keys = frozenset({"value", "progress"})

    def begin(self, task: Task) -> None:
        super().begin(task)
        self._calls = 0

    def call_tool(self, call: ToolCall) -> ToolOutput:
        out = super().call_tool(call)
        if call.name == "calculator":
            text = str(self.answer_now())
            parts = (text[: len(text) // 2], text[len(text) // 2 :])
            if self._calls < 2:
                out.info = {**out.info, "progress": parts[self._calls]}
            self._calls += 1
        return out


LEAKY = {
    SystemPromptLeak: "system prompt",
    ToolDescriptionLeak: "tool answer",
    ParamsLeak: "task (the server's tasks reply",
    ErrorLeak: "observation (calculator, error)",
    Base64Leak: "observation (calculator)",
    ScientificLeak: "first observation",
    SplitLeak: "split over",
}


def audit(cls: type[BigAnswer], **kw: Any):
    register(cls.env_id, cls, replace=True)
    try:
        return asyncio.run(audit_leaks(cls.env_id, n_tasks=2, **kw))
    finally:
        unregister(cls.env_id)


@pytest.mark.parametrize("cls", list(LEAKY), ids=lambda c: c.__name__)
def test_an_answer_in_any_channel_or_form_is_a_leak(cls: type[BigAnswer]):
    report = audit(cls)
    assert not report.ok, f"{cls.__name__} passed the audit: {report.line()}"
    channels = [leak.channel for leak in report.leaks if leak.path == "answer"]
    assert any(LEAKY[cls] in c for c in channels), channels[:8]


@pytest.mark.parametrize("cls", [SystemPromptLeak, ToolDescriptionLeak, ParamsLeak], ids=lambda c: c.__name__)
def test_the_shortcut_battery_reads_the_plain_channels_too(cls: type[BigAnswer]):
    """A policy that answers with what the system prompt, a tool spec or the params show earns the reward."""
    register(cls.env_id, cls, replace=True)
    try:
        report = asyncio.run(run_battery(cls.env_id, n_tasks=2))
    finally:
        unregister(cls.env_id)
    readers = [p for p in report.probes if p.name.startswith("info_reader") and p.reward > report.threshold]
    assert readers and not report.ok, report.line()


def test_the_channel_readers_earn_nothing_where_nothing_leaks():
    register(BigAnswer.env_id, BigAnswer, replace=True)
    try:
        report = asyncio.run(run_battery(BigAnswer.env_id, n_tasks=2))
    finally:
        unregister(BigAnswer.env_id)
    readers = [p for p in report.probes if p.name.startswith("info_reader:")]
    assert readers and all(p.reward == 0.0 for p in readers), [(p.name, p.reward) for p in readers]


def test_the_leak_says_which_form_it_was_read_in():
    forms = {cls: {leak.form for leak in audit(cls).leaks} for cls in (Base64Leak, ScientificLeak, SplitLeak)}
    assert "base64" in forms[Base64Leak] and "number" in forms[ScientificLeak] and "split" in forms[SplitLeak]


def test_the_clean_base_env_and_the_builtin_envs_pass():
    assert audit(BigAnswer).ok
    for env_id in ("toy-calculator-v0", "clinical-v0", "deepsearch-v0"):
        report = asyncio.run(audit_leaks(env_id, n_tasks=2))
        assert report.ok, f"{env_id}: {report.line()}"
        assert report.episodes > 0


def test_numbers_match_in_any_notation_and_encodings_are_read():
    from rubricgym.rewards.leaks import canonical_numbers

    scanner = Scanner(make_secrets([("n", 4200), ("who", "Ke Hirox")]), encodings=True)
    assert canonical_numbers("4.2e3, 4,200 and 4200.000; v1.2.3 and 007") == "4200, 4200 and 4200; v1.2.3 and 007"
    for text, form in [
        ("scale 4.2e3", "number"),
        ("total 42.000E+02", "number"),
        ("ref " + base64.b64encode(b"answer: 4200").decode(), "base64"),
        ("ref " + b"Ke Hirox".hex(), "hex"),
        ("xr uvebk", "rot13"),
        ("xorih ek", "reversed"),
    ]:
        assert [(s.path, s.form) for s in scanner.hits(text)] in ([("n", form)], [("who", form)]), text
    assert all(scanner.hits(t) for t in ("4200", "4,200.00", "4200.000", "4.2e+3", "4\u202f200"))
    assert not scanner.hits("42 and 4.2 and 420 and 4.2e2")
    assert not scanner.hits("the calculator said 9f86d081884c7d65")  # hex that decodes to nothing printable


def test_a_split_value_is_found_only_where_its_words_run_on_in_order():
    scanner = Scanner(make_secrets([("who", "Ke Hirox"), ("n", 31415), ("short", 123)]), encodings=True)
    assert {s.path for s, _, _ in scanner.across(["the winner is Ke", "Hirox, by far"])} == {"who"}
    assert {s.path for s, _, _ in scanner.across(["result 31", "415"])} == {"n"}
    assert scanner.across(["Hirox wins", "said Ke"]) == []  # the words, but not running on across the join
    assert scanner.across(["Ke Hirox", "won"]) == []  # whole in one piece: that piece's own scan finds it
    assert scanner.across(["12", "3"]) == []  # short numbers run on by chance


def test_a_discovery_is_the_successful_output_of_a_declared_tool_only():
    """The calculator may show the answer it computed (``discoverable``); the same value in its error text, behind
    a call no scripted agent makes, is a leak that the fuzz agent finds."""
    report = audit(ErrorLeak, agents={}, fuzz=True)
    assert report.leaks and {leak.agent for leak in report.leaks} == {"fuzz"}
    assert any(leak.channel.endswith("observation (calculator, error)") for leak in report.leaks)
    assert "answer via calculator" not in report.exempt


# ---- SWE: what the repository and the problem statement show is not a secret --------------------------------

BASE = {
    "shapes/__init__.py": '''"""Rectangle helpers."""


def area(w, h):
    if w < 0 or h < 0:
        raise ValueError("sizes must not be negative")
    return w * h


def perimeter(w, h):
    return 2 * (w + h)
''',
    "shapes/boxes.py": """from shapes import area


def volume(w, h, d):
    if w < 0 or h < 0:
        raise ValueError("sizes must not be negative")
    return area(w, h) * d
""",
    "tests/__init__.py": "",
    "tests/test_shapes.py": "from shapes import area\n\n\ndef test_area():\n    assert area(2, 3) == 6\n",
}
FIX = BASE["shapes/__init__.py"].replace(
    "def perimeter(w, h):\n",
    'def perimeter(w, h):\n    if w < 0 or h < 0:\n        raise ValueError("sizes must not be negative")\n',
)
TEST = '''import pytest

from shapes import perimeter

EXPECTED = """
perimeter(-1, 2) raised ValueError: sizes must not be negative
"""


def test_perimeter_negative():
    with pytest.raises(ValueError) as e:
        perimeter(-1, 2)
    assert f"perimeter(-1, 2) raised ValueError: {e.value}" == EXPECTED.strip()
'''
STATEMENT = (
    "perimeter() accepts negative sizes, unlike area().\r\n\r\nExpected output:\r\n```\r\n"
    "perimeter(-1, 2) raised ValueError: sizes must not be negative\r\n```\r\n"
)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def swebench_record(root: Path) -> dict[str, Any]:
    """A SWE-bench-style record over a git repository at its base commit: the gold patch adds two lines the
    repository already has twice, and the test patch quotes the expected output that the issue quotes."""
    repo = root / "acme" / "shapes"
    for rel, text in BASE.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "shapes/__init__.py").write_text(FIX)
    patch = _git(repo, "diff")
    (repo / "shapes/__init__.py").write_text(BASE["shapes/__init__.py"])
    (repo / "tests/test_negative.py").write_text(TEST)
    _git(repo, "add", "-N", "tests/test_negative.py")
    test_patch = _git(repo, "diff", "--", "tests/test_negative.py")
    (repo / "tests/test_negative.py").unlink()
    _git(repo, "reset", "-q")
    return {
        "instance_id": "acme__shapes-1",
        "repo": "acme/shapes",
        "base_commit": base,
        "problem_statement": STATEMENT,
        "patch": patch,
        "test_patch": test_patch,
        "FAIL_TO_PASS": '["tests/test_negative.py::test_perimeter_negative"]',
        "PASS_TO_PASS": '["tests/test_shapes.py::test_area"]',
        "snapshot": str(repo),
    }


class Reader(BaseAgent):
    """Reads every file of the repository with ``view``, then submits: what any careful agent does first."""

    name = "reader"

    def __init__(self, seed: int | None = None):
        self.files = sorted(BASE) + ["tests"]

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        return tool_call("view", path=self.files.pop(0)) if self.files else tool_call("submit")


@pytest.mark.sandbox
@pytest.mark.slow
def test_swebench_records_have_no_false_positive(tmp_path):
    from rubricgym.envs.swe import SweEnv
    from rubricgym.envs.swe.instance import SweInstance

    inst = SweInstance.model_validate(swebench_record(tmp_path))
    values = {str(v) for _, v in SweEnv.secrets(inst.to_task())}
    assert 'raise ValueError("sizes must not be negative")' in values  # a line of the fix, twice in the repo
    assert "perimeter(-1, 2) raised ValueError: sizes must not be negative" in values  # quoted by the issue
    public = "\n".join(SweEnv.public_text(inst.to_task()))
    assert STATEMENT in public and BASE["shapes/boxes.py"] in public and ".git" not in public
    kw = {"instances": [inst.model_dump()]}
    report = asyncio.run(
        audit_leaks("swe-v0", tasks=[inst.to_task()], env_kwargs=kw, agents={"reader": Reader}, fuzz=True)
    )
    assert report.ok, report.line()
    assert report.public >= 2 and report.episodes >= 2
    assert report.exempt.get("test_files via view", 0) > 0  # the reader found the test files by reading
