"""clinical-v0's graded hints and its ``specialty`` knob: every level hints on both case sources, each level adds
help, none names the diagnosis or a key exam (by id, catalogue name or alias), and the leak audit still passes."""

import asyncio

import pytest

import rubricgym
from rubricgym.core.types import Task
from rubricgym.envs.clinical.case import generate_case
from rubricgym.envs.clinical.cases import EXAMPLE_CASES
from rubricgym.envs.clinical.env import ClinicalEnv
from rubricgym.envs.clinical.guidance import CATEGORIES, category, organ_system
from rubricgym.envs.clinical.osce import import_osce, write_cases
from rubricgym.rewards.leaks import Scanner, audit_leaks, make_secrets

from .test_public_cases import MESSY

ENV = "clinical-v0"


def _generated(n: int = 30, **kw) -> list[Task]:
    env = rubricgym.make(ENV, **kw)
    return [t for split in ("train", "test") for t in env.task_set(n, seed=11, split=split)]


def _every_case(kb, tmp_path) -> list[tuple[ClinicalEnv, Task]]:
    """30 generated tasks of each split, one case of every knowledge-base condition, the bundled real-format cases
    and the imported OSCE samples (their exams come from an overlay), each with the env that plays it."""
    out = []
    env = rubricgym.make(ENV)
    out += [(env, t) for t in _generated()]
    out += [(env, env.task_for(generate_case(kb, 5, c))) for c in kb.conditions]
    real = rubricgym.make(ENV, cases=str(EXAMPLE_CASES))
    out += [(real, real.task_for(c, split)) for c in real.cases for split in ("train", "test")]
    cases, overlay, _ = import_osce(MESSY, kb)
    osce = rubricgym.make(ENV, cases=str(write_cases(tmp_path / "osce.jsonl", cases, overlay)))
    out += [(osce, osce.task_for(c)) for c in osce.cases]
    return out


def _named(kb, task: Task) -> Scanner:
    """A scanner for the task's secrets plus every catalogue name and alias of its key exams (a hint must not
    name a key exam in any spelling, not only its id)."""
    names = [(f"name:{k}", n) for k in task.hidden["key_exams"] for n in (kb.exams[k].name, *kb.exams[k].aliases)]
    return Scanner(make_secrets([*ClinicalEnv.secrets(task), *names]))


def test_every_level_hints_on_every_source_and_none_beyond(kb, tmp_path):
    assert ClinicalEnv.guidance_levels == 3
    for env, task in _every_case(kb, tmp_path):
        hints = [env.guidance(task, level) for level in (1, 2, 3)]
        assert all(h and h.strip() for h in hints), (task.hidden["case_id"], hints)
        assert env.guidance(task, 0) is None and env.guidance(task, 4) is None


def test_each_level_keeps_the_one_below_and_adds_more(kb, tmp_path):
    for env, task in _every_case(kb, tmp_path):
        one, two, three = (env.guidance(task, level) or "" for level in (1, 2, 3))
        assert two.startswith(one) and len(two) > len(one), task.hidden["case_id"]
        assert three.startswith(two) and len(three) > len(two), task.hidden["case_id"]


def test_hints_are_deterministic_and_need_no_episode(kb):
    tasks = _generated(5)
    first = [[rubricgym.make(ENV).guidance(t, level) for level in (1, 2, 3)] for t in tasks]
    env = rubricgym.make(ENV)
    env.reset(seed=0, options={"task": tasks[0]})  # an episode of another task changes nothing
    assert first == [[env.guidance(t, level) for level in (1, 2, 3)] for t in tasks]


def test_no_hint_names_the_diagnosis_or_a_key_exam(kb, tmp_path):
    checked = 0
    for env, task in _every_case(kb, tmp_path):
        scanner = _named(kb, task)
        for level in (1, 2, 3):
            text = env.guidance(task, level) or ""
            found = scanner.find(text)
            assert not found, (task.hidden["case_id"], level, [(s.path, s.value) for s in found], text)
            checked += 1
    assert checked > 3 * 150


def test_the_scanner_catches_a_hint_that_names_the_answer(kb):
    task = rubricgym.make(ENV).task_for(generate_case(kb, 1, "pulmonary_embolism"))
    scanner = _named(kb, task)
    hint = rubricgym.make(ENV).guidance(task, 3)
    assert hint and not scanner.find(hint)
    assert scanner.find(hint + " It is a pulmonary embolism.")
    assert scanner.find(hint + " Order a CT pulmonary angiogram.")  # a key exam by its catalogue name
    assert Scanner(make_secrets(ClinicalEnv.secrets(task))).find("order ctpa")  # and by its id


def test_level_one_names_specialty_and_organ_system_level_two_the_key_exam_category(kb):
    task = rubricgym.make(ENV).task_for(generate_case(kb, 2, "pulmonary_embolism"))
    one, two = rubricgym.make(ENV).guidance(task, 1), rubricgym.make(ENV).guidance(task, 2)
    cond = kb.conditions["pulmonary_embolism"]
    assert cond.specialty in one and "circulatory system" in one  # I26: a disease of the pulmonary circulation
    first = kb.exams[task.hidden["key_exams"][0]]
    assert CATEGORIES[(first.kind, first.invasiveness)] in two and first.name not in two


def test_every_exam_category_covers_several_exams(kb):
    """A category with one member would name its exam: each covers at least two orderable catalogue exams."""
    members: dict[str, set[str]] = {}
    for exam in kb.orderable:
        members.setdefault(category(exam), set()).add(exam.id)
    assert all(len(ids) >= 2 for ids in members.values()), {c: ids for c, ids in members.items() if len(ids) < 2}


@pytest.mark.parametrize(
    ("code", "words"),
    [("J18.9", "respiratory"), ("D50.0", "blood"), ("D48.1", "neoplasm"), ("T78.2", "injury"), ("H60.1", "ear")],
)
def test_icd10_chapters(code, words):
    assert words in organ_system(code)


@pytest.mark.parametrize("code", ["R55", "U07.1", "Z00.0", "Y01", "", None, "12.3"])
def test_codes_without_an_organ_system_say_nothing(code):
    assert organ_system(code) == ""


def test_a_case_without_specialty_or_code_still_gets_a_hint(kb):
    env = rubricgym.make(ENV, cases=str(EXAMPLE_CASES))
    case = env.cases[0].model_copy(update={"condition": None})
    case = case.model_copy(update={"diagnosis": case.diagnosis.model_copy(update={"icd10": None})})
    text = env.guidance(env.task_for(case), 1)
    assert text and "organ system" in text


# ---- the specialty knob -------------------------------------------------------------------------------------


def test_specialty_restricts_generated_cases_to_its_conditions(kb):
    pool = {c.id for c in kb.conditions.values() if c.specialty == "pulmonology"}
    assert 1 < len(pool) < len(kb.conditions) / 5
    env = rubricgym.make(ENV, specialty="Pulmonology")  # any case
    tasks = env.task_set(40, seed=0)
    assert env.specialty == "pulmonology" and {t.hidden["condition"] for t in tasks} <= pool
    assert len({t.hidden["condition"] for t in tasks}) > 1  # a pool, not one condition
    assert [t.id for t in tasks] == [t.id for t in rubricgym.make(ENV, specialty="pulmonology").task_set(40, seed=0)]
    assert not {t.hidden["condition"] for t in rubricgym.make(ENV).task_set(40, seed=0)} <= pool  # the default: all


def test_specialty_filters_a_cases_file_and_says_what_is_wrong(kb):
    env = rubricgym.make(ENV, cases=str(EXAMPLE_CASES), specialty="pulmonology")
    assert env.cases and all(kb.conditions[c.condition].specialty == "pulmonology" for c in env.cases)
    with pytest.raises(ValueError, match="the knowledge base has: cardiology"):
        rubricgym.make(ENV, specialty="dermatology")
    with pytest.raises(ValueError, match="drop condition= or specialty="):
        rubricgym.make(ENV, specialty="cardiology", condition="pulmonary_embolism")
    assert rubricgym.make(ENV, specialty="pulmonology", condition="pulmonary_embolism").condition


def test_leak_audit_passes_with_the_specialty_knob_and_the_hints():
    kw = {"specialty": "infectious disease"}
    report = asyncio.run(audit_leaks(ENV, env_kwargs=kw, n_tasks=2))
    assert report.ok, report.line()
