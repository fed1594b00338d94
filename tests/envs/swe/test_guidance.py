"""swe-v0's graded hints: the failing test, then the file to edit, then the lines; every level on the built-in
tasks and on SWE-bench-format records, more help at each level, and never a line of the gold or test patch."""

from __future__ import annotations

from pathlib import Path

import pytest

import rubricgym
from rubricgym.core.types import Task
from rubricgym.envs.swe import SweEnv
from rubricgym.envs.swe.builtin import builtin_instances
from rubricgym.envs.swe.instance import SweInstance
from rubricgym.rewards.leaks import Scanner, make_secrets

from .swebench_samples import make_clone, make_records

ENV = "swe-v0"


@pytest.fixture(scope="module")
def swebench_tasks(tmp_path_factory) -> list[Task]:
    """The SWE-bench-format sample records (a test patch that adds the failing test's file, a CRLF bug file) as
    tasks; guidance reads only the task, so no sandbox is built."""
    root = tmp_path_factory.mktemp("swebench")
    repo, base, fix = make_clone(root / "clones")
    tasks = []
    for r in make_records(repo, base, fix):
        fields = {k: v for k, v in r.items() if k in SweInstance.model_fields}
        tasks.append(SweInstance.model_validate({**fields, "snapshot": str(repo)}).to_task())
    return tasks


def _all(swebench_tasks: list[Task]) -> list[Task]:
    builtin = [i.to_task(split) for i in builtin_instances() for split in ("train", "test")]
    return builtin + swebench_tasks


def _scanner(task: Task) -> Scanner:
    """The secrets a hint must not show: every one but the ``hintable`` localisation."""
    hintable = SweEnv.hintable
    return Scanner(make_secrets((p, v) for p, v in SweEnv.secrets(task) if p.split("[")[0] not in hintable))


def test_every_level_hints_and_none_beyond(swebench_tasks):
    env = rubricgym.make(ENV)
    assert SweEnv.guidance_levels == 3
    for task in _all(swebench_tasks):
        hints = [env.guidance(task, level) for level in (1, 2, 3)]
        assert all(h and h.strip() for h in hints), (task.id, hints)
        assert env.guidance(task, 0) is None and env.guidance(task, 4) is None
        assert hints == [rubricgym.make(ENV).guidance(task, level) for level in (1, 2, 3)]  # deterministic


def test_each_level_keeps_the_one_below_and_localises_further(swebench_tasks):
    env = rubricgym.make(ENV)
    for task in _all(swebench_tasks):
        inst = SweInstance.from_task(task)
        one, two, three = (env.guidance(task, level) or "" for level in (1, 2, 3))
        assert two.startswith(one) and len(two) > len(one) and three.startswith(two) and len(three) > len(two)
        if inst.FAIL_TO_PASS:
            assert inst.FAIL_TO_PASS[0] in one
        if inst.buggy_files:
            assert inst.buggy_files[0] not in one and inst.buggy_files[0] in two
            assert "Look at lines" in three and "Look at lines" not in two


def test_a_test_the_graders_add_is_said_to_be_missing_from_the_checkout(swebench_tasks):
    adds = next(t for t in swebench_tasks if t.id == "acme__minicalc-1")  # its test patch creates the test file
    text = rubricgym.make(ENV).guidance(adds, 1) or ""
    assert "tests/test_mean.py::test_mean" in text and "may not have it" in text
    builtin = builtin_instances()[0].to_task()
    assert "call run_tests" in (rubricgym.make(ENV).guidance(builtin, 1) or "")


def test_no_hint_shows_a_line_of_either_patch(swebench_tasks):
    env = rubricgym.make(ENV)
    checked = 0
    for task in _all(swebench_tasks):
        scanner = _scanner(task)
        assert scanner.secrets, task.id  # every task hides its patch
        for level in (1, 2, 3):
            text = env.guidance(task, level) or ""
            found = scanner.find(text)
            assert not found, (task.id, level, [s.value for s in found], text)
            checked += 1
    assert checked >= 3 * 24


def test_the_scanner_catches_a_hint_that_gives_the_fix():
    task = next(i for i in builtin_instances() if i.instance_id == "tinytext__slugify-last-word").to_task()
    scanner = _scanner(task)
    hint = rubricgym.make(ENV).guidance(task, 3) or ""
    assert hint and not scanner.find(hint)
    assert scanner.find(hint + ' Add: words.append("".join(current))')  # the gold patch's added line
    assert scanner.find(task.hidden["instance"]["patch"])


def test_the_localisation_is_secret_everywhere_but_in_hints():
    """The failing tests and the files are where to work: the guidance names them (``hintable``), every other
    channel keeps them secret; the patches are secret everywhere."""
    inst = builtin_instances()[1]
    paths = {p for p, _ in SweEnv.secrets(inst.to_task())}
    assert "instance.patch" in paths and "instance.patch+" in paths
    assert any(p.startswith("FAIL_TO_PASS") for p in paths) and any(p.startswith("buggy_files") for p in paths)
    assert SweEnv.hintable == {"FAIL_TO_PASS", "buggy_files", "test_files"}
    values = " ".join(str(v) for _, v in SweEnv.secrets(inst.to_task()))
    assert "if line and len(line) + 1 + len(word) > width:" in values


def test_the_leak_audit_allows_the_localisation_in_hints_only():
    import asyncio

    from rubricgym.rewards.leaks import LeakReport, _Episode

    task = builtin_instances()[0].to_task()
    env = rubricgym.make(ENV)
    report = LeakReport(ENV)
    ep = _Episode(report, env, task, "probe")
    failing = task.hidden["instance"]["FAIL_TO_PASS"][0]
    ep.scan("guidance level 1", f"run {failing}", "(guidance)")
    assert report.ok and "FAIL_TO_PASS in a hint" in report.exempt  # (its file is a hintable test_files too)
    ep.scan("step 1 info", {"note": failing})  # anywhere else it is a leak
    assert [leak.path for leak in report.leaks] == ["FAIL_TO_PASS[0]"]
    asyncio.run(env.aclose())


def test_guidance_needs_no_sandbox(tmp_path):
    inst = builtin_instances()[0].model_copy(update={"snapshot": str(Path(tmp_path) / "gone")})
    assert rubricgym.make(ENV).guidance(inst.to_task(), 3)
