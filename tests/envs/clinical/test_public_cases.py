"""Public case collections in (issue #28, items 1-6): the OSCE importer on messy samples, every error at once,
lenient loading, knowledge-base overlays, confident exam matching, what a case says kept as said, file order."""

import json
import shutil
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rubricgym
from rubricgym.cli import app
from rubricgym.core.tools import ToolError
from rubricgym.envs.clinical.cases import EXAMPLE_CASES, CaseFileError, load_cases, read_cases
from rubricgym.envs.clinical.osce import import_osce, parse_demographics, write_cases
from rubricgym.envs.clinical.overlay import kb_with_overlay
from rubricgym.envs.clinical.patient import resolve_exam
from rubricgym.envs.clinical.schema import load_kb

from .conftest import call

MESSY = Path(__file__).with_name("data") / "osce_messy.jsonl"


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("34-year-old female", (34, "years", "F")),
        ("8-month-old boy", (8, "months", "M")),
        ("3-week-old female", (21, "days", "F")),
        ("newborn girl", (0, "days", "F")),
        ({"Age": "58", "Gender": "Female"}, (58, "years", "F")),
        ("45 year old", (45, "years", "U")),
        ("adult, sex not stated", (None, "years", "U")),
    ],
)
def test_demographics_keep_infant_units_and_unknown_sex(text, want):
    assert parse_demographics(text) == want


def test_osce_import_reports_and_loses_nothing_silently(tmp_path):
    out = tmp_path / "cases.jsonl"
    result = CliRunner().invoke(
        app, ["clinical", "import", str(MESSY), "--out", str(out), "--report", str(tmp_path / "r.json")]
    )
    assert result.exit_code == 1  # two records cannot become cases: said, not skipped silently
    reports = json.loads((tmp_path / "r.json").read_text())
    assert [r["error"] is None for r in reports] == [True, True, False, False, True]
    assert "gives no age" in reports[2]["error"] and "Correct_Diagnosis" in reports[3]["error"]
    assert any("Extra_Notes" in d for d in reports[1]["dropped"]) and any("empty" in d for d in reports[1]["dropped"])
    cases = [json.loads(line) for line in out.read_text().splitlines()]
    overlay = cases.pop(0)["kb_overlay"]["exams"]
    assert {e["name"] for e in overlay} == {"Leukocyte esterase", "CA-125", "Rectal biopsy"}  # never Calcium/Renal
    infant, adult, af = cases
    assert infant["profile"] == {**infant["profile"], "age": 8, "age_unit": "months", "sex": "M"}
    assert infant["examination"]["vital signs"].startswith("Temperature: 39.2°C; Heart rate: 168 bpm")
    assert infant["results"]["wbc"] == 18.5  # 18,500 /µL converted to the catalogue's 10^9/L
    assert adult["results"]["osce_ca_125"] == "412 U/mL" and adult["results"]["hemoglobin"] == 11.1
    assert af["condition"] == "atrial_fibrillation" and af["key_exams"]
    assert len(rubricgym.make("clinical-v0", cases=str(out)).cases) == 3


def test_imported_cases_play_as_the_case_says(tmp_path):
    cases, overlay, _ = import_osce(MESSY, load_kb())
    out = write_cases(tmp_path / "cases.jsonl", cases, overlay)
    env = rubricgym.make("clinical-v0", cases=str(out))
    infant = env.task_for(env.cases[0])
    assert infant.prompt.startswith("An 8-month-old boy presents with fever.")
    env.reset(options={"task": infant})
    vitals, *_ = env.step(call("examine", system="vital signs"))
    assert "168 bpm" in vitals and "39.2°C" in vitals  # as given, not drawn
    section, *_ = env.step(call("examine", system="fontanelle"))
    assert "Anterior fontanelle flat" in section  # a section with no system of ours, by its own name
    cbc, *_ = env.step(call("order", exam="CBC", impression="urinary tract infection", reason="look for infection"))
    assert "18.5" in cbc and "adult reference range only" in cbc and "(H" not in cbc  # no adult flags on an infant
    le, *_ = env.step(call("order", exam="Leukocyte esterase", impression="UTI", reason="check the urine"))
    assert le.endswith("Leukocyte esterase: Positive")  # an overlay exam, orderable by name


@pytest.mark.parametrize(
    ("text", "want"), [("Troponin I level", "troponin_i"), ("please get a chest x ray", "chest_xray")]
)
def test_exam_names_resolve_with_filler_words(text, want):
    assert resolve_exam(load_kb(), text) == want


@pytest.mark.parametrize("text", ["CA-125", "Rectal biopsy", "xray of chest"])
def test_uncertain_exam_names_are_refused_with_the_closest_names(text):
    with pytest.raises(ToolError, match="not in the exam catalogue. Closest catalogue names"):
        resolve_exam(load_kb(), text)


def _broken_file(tmp_path: Path) -> Path:
    lines = EXAMPLE_CASES.read_text().splitlines()
    a, b = json.loads(lines[1]), json.loads(lines[4])
    a["results"]["Serum unobtainium"] = 3
    a["key_exams"].append("scan")
    b["profile"]["sex"] = "X"
    del b["diagnosis"]
    lines[1], lines[4] = json.dumps(a), json.dumps(b)
    p = tmp_path / "cases.jsonl"
    p.write_text("\n".join(lines) + "\n{not json\n")
    return p


def test_every_error_of_every_case_in_one_run_and_lenient_loading(tmp_path):
    p = _broken_file(tmp_path)
    with pytest.raises(CaseFileError) as e:
        load_cases(p, load_kb())
    text = str(e.value)
    for expected in (
        "unknown exam 'Serum unobtainium'",
        "unknown exam 'scan'",
        "field 'profile.sex'",
        "field 'diagnosis'",
        "cases.jsonl:21: not valid JSON",
    ):
        assert expected in text, expected
    assert len(e.value.problems) == 5
    # the way out is spelled in the syntax of the command line too (issue #44 item 12), and it works there
    assert "`--env-arg lenient=true` on the command line" in text
    from typer.testing import CliRunner

    from rubricgym.cli import app

    out = CliRunner().invoke(
        app,
        [
            "run",
            "clinical-v0",
            "--env-arg",
            f"cases={p}",
            "--env-arg",
            "lenient=true",
            "--agent",
            "oracle",
            "--tasks",
            "1",
            "--out",
            str(tmp_path / "run"),
        ],
    )
    assert out.exit_code == 0, out.output
    load = read_cases(p, load_kb())
    assert len(load.cases) == 18 and len(load.skipped) == 3
    with pytest.warns(UserWarning, match="18 case"):
        env = rubricgym.make("clinical-v0", cases=str(p), lenient=True)
    assert len(env.cases) == 18
    # messages to the file's owner (check's advice, the leak audit) name a case by its id and line, not the hash
    first = env.task_set(1)[0]
    assert env.task_origin(first) == f"case {env.cases[0].id!r} at {p}:{load.lines[env.cases[0].id]}"
    assert first.id not in env.task_origin(first) and load.lines[env.cases[0].id] == 1


def test_an_overlay_extends_the_catalogue_and_reports_clashes(tmp_path):
    folder = tmp_path / "extra"
    folder.mkdir()
    (folder / "exams.yaml").write_text(
        "exams:\n"
        "  - {id: ca125, name: CA-125, aliases: [cancer antigen 125], kind: serology, unit: U/mL, ref: [0, 35],"
        " cost: 40, invasiveness: 1, turnaround_h: 24}\n"
        "  - {id: cbc_copy, name: Complete blood count, kind: lab, normal: Normal., cost: 1, invasiveness: 1,"
        " turnaround_h: 1}\n"
    )
    kb = kb_with_overlay(None, folder)
    assert "ca125" in kb.exams and "ca125" not in load_kb().exams  # the bundled catalogue is not copied or changed
    assert any("'cbc_copy': name 'Complete blood count' is already the bundled exam 'cbc'" in n for n in kb.notes)
    assert resolve_exam(kb, "CA-125") == "ca125"
    with pytest.warns(UserWarning, match="knowledge-base overlay"):
        env = rubricgym.make("clinical-v0", kb_overlay=str(folder))
    env.reset(seed=0)
    obs, *_ = env.step(call("order", exam="cancer antigen 125", impression="ovarian cancer", reason="mass"))
    assert obs.startswith("Here is the result: CA-125")


def test_a_cases_file_plays_each_case_once_in_file_order(tmp_path):
    env = rubricgym.make("clinical-v0", cases=str(EXAMPLE_CASES))
    tasks = env.task_set(20)
    assert [t.hidden["case_id"] for t in tasks] == [c.id for c in env.cases] and len({t.id for t in tasks}) == 20
    with pytest.raises(ValueError, match="has 20 case"):
        env.task_set(21)


def test_cases_whose_key_exams_cannot_fit_the_turns_are_reported(tmp_path):
    p = tmp_path / "cases.jsonl"
    shutil.copy(EXAMPLE_CASES, p)
    with pytest.warns(UserWarning, match="need more turns than max_steps=2"):
        env = rubricgym.make("clinical-v0", cases=str(p), max_steps=2)
    assert env.too_long and all(len(c.key_exams) + 1 > 2 for c in env.cases if c.id in env.too_long)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not rubricgym.make("clinical-v0", cases=str(p)).too_long


def test_imported_cases_pass_the_leak_audit_and_the_shortcut_battery(tmp_path):
    import asyncio

    from rubricgym.rewards.leaks import audit_leaks
    from rubricgym.rewards.shortcuts import run_battery

    cases, overlay, _ = import_osce(MESSY, load_kb())
    out = str(write_cases(tmp_path / "cases.jsonl", cases, overlay))
    env = rubricgym.make("clinical-v0", cases=out)
    tasks = env.task_set(3)
    leaks = asyncio.run(audit_leaks("clinical-v0", env_kwargs={"cases": out}, tasks=tasks))
    assert leaks.ok, leaks.line()
    battery = asyncio.run(run_battery("clinical-v0", env_kwargs={"cases": out}, tasks=tasks))
    assert battery.ok and battery.oracle is not None and battery.oracle.total == 1.0, battery.problems()
