"""Every layout of the agent-clinic collections (issue #44, clinical items 1-4): NEJM and NEJM-extended records
import (layout detected per record, listed in ``--help``), a layout the importer does not know says which exist;
an exam report given in parts is one exam; a gestational age is not the patient's age and bounds keep the unit;
the import report says per case whether the diagnosis is a knowledge-base condition, an alias or neither, and what
the env's oracle scores on it. Samples are written here in the public layouts, with the mess real records have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from rich.console import Console
from typer.testing import CliRunner

import rubricgym
from rubricgym.cli import app
from rubricgym.core.tools import ToolError
from rubricgym.envs.clinical.case import Profile
from rubricgym.envs.clinical.cases import load_cases
from rubricgym.envs.clinical.cli import _diagnosis_table
from rubricgym.envs.clinical.diagnosis import map_diagnosis
from rubricgym.envs.clinical.layouts import detect_layout, import_file, layout_format
from rubricgym.envs.clinical.nejm import first_person
from rubricgym.envs.clinical.osce import CaseReport, gestational_age, parse_demographics, write_cases
from rubricgym.envs.clinical.patient import resolve_exam
from rubricgym.envs.clinical.schema import load_kb

from .conftest import call

DATA = Path(__file__).with_name("data")
NEJM = DATA / "nejm_messy.jsonl"
NESTED = DATA / "osce_nested_reports.jsonl"
MIMIC = DATA / "mimic_style.jsonl"
OSCE = DATA / "osce_messy.jsonl"
runner = CliRunner()


def _flat(result) -> str:
    return " ".join(result.output.replace("│", " ").split())


def _imported(tmp_path: Path, source: Path) -> tuple[str, list[CaseReport]]:
    cases, overlay, reports = import_file(source, load_kb())
    return str(write_cases(tmp_path / f"{source.stem}.cases.jsonl", cases, overlay)), reports


# ---- item 1: every layout, detected per record -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "layout", "imported", "of"),
    [(NEJM, "nejm", 4, 5), (NESTED, "osce", 3, 3), (MIMIC, "osce", 2, 2), (OSCE, "osce", 3, 5)],
)
def test_each_layout_is_detected_imported_and_loads_back(tmp_path, source, layout, imported, of):
    records = [json.loads(line) for line in source.read_text(encoding="utf-8-sig").splitlines() if line.strip()]
    assert {detect_layout(r) for r in records} == {layout}
    out = tmp_path / "cases.jsonl"
    r = runner.invoke(app, ["clinical", "import", str(source), "--out", str(out), "--no-oracle"])
    assert f"{imported} of {of} record(s) imported" in _flat(r), r.output
    assert r.exit_code == (0 if imported == of else 1), r.output
    assert len(rubricgym.make("clinical-v0", cases=str(out)).cases) == imported


def test_a_nejm_record_becomes_a_playable_case_that_never_shows_the_question_or_options(tmp_path):
    out, reports = _imported(tmp_path, NEJM)
    assert "exactly one (the diagnosis)" in (reports[4].error or "")  # two options marked correct: said, not guessed
    env = rubricgym.make("clinical-v0", cases=out)
    dvt, mono, rash, infant = (env.task_for(c) for c in env.cases)
    assert dvt.prompt.startswith("A 41-year-old man presents with a 4-day history of a painful, swollen right leg")
    visible = json.dumps([dvt.prompt, dvt.params]) + json.dumps([mono.prompt, mono.params])
    for secret in ("Ruptured Baker", "Calf muscle tear", "Streptococcal pharyngitis", "most likely diagnosis"):
        assert secret not in visible, secret  # wrong options and the question stay out of what the agent sees
    assert "Calf muscle tear" in dvt.hidden["differential"]  # the options are the case's hidden differential
    env.reset(options={"task": dvt})
    answer, *_ = env.step(call("ask", question="Have you been on a flight?"))
    assert "I flew back from Singapore" in answer  # the actor's second person, said by the patient
    vitals, *_ = env.step(call("examine", system="vital signs"))
    assert "132/80 mmHg" in vitals
    ddimer, *_ = env.step(call("order", exam="D-dimer", impression="DVT", reason="long flight, swollen calf"))
    assert "3400" in ddimer
    us, *_ = env.step(call("order", exam="Compression ultrasonography", impression="DVT", reason="confirm a clot"))
    assert "non-compressible right popliteal vein" in us
    env.reset(options={"task": mono})
    answer, *_ = env.step(call("ask", question="Have you had a blood test?"))
    assert "don't know" not in answer  # "you don't know the results" was an instruction to the actor, dropped
    assert "aware" not in json.dumps(mono.params)


def test_first_person_keeps_objects_and_capitals():
    assert first_person("You've had fevers; the doctor told you your scan was fine.") == (
        "I've had fevers; the doctor told me my scan was fine."
    )


def test_a_record_of_another_layout_or_of_none_says_which_layouts_exist(tmp_path):
    nejm_line = NEJM.read_text(encoding="utf-8").splitlines()[0]
    source = tmp_path / "mixed.jsonl"
    source.write_text(
        OSCE.read_text(encoding="utf-8-sig").splitlines()[0] + "\n" + nejm_line + "\n"
        '{"case_text": "A 50-year-old man with chest pain.", "label": "STEMI"}\n',
        encoding="utf-8",
    )
    r = runner.invoke(
        app,
        ["clinical", "import", str(source), "--out", str(tmp_path / "c.jsonl"), "--format", "osce", "--no-oracle"],
        env={"COLUMNS": "300"},
    )
    text = _flat(r)
    assert r.exit_code == 1, r.output
    assert f"{source}:2: the record is in the nejm layout (NEJM, NEJM-extended), not osce: pass --format nejm" in text
    assert f"{source}:3: not in the osce layout (the record has keys 'case_text', 'label')" in text
    assert "Known layouts: osce (MedQA, MedQA-extended, MIMIC-IV)" in text and "nejm (NEJM, NEJM-extended)" in text
    r = runner.invoke(app, ["clinical", "import", str(source), "--out", str(tmp_path / "d.jsonl"), "--no-oracle"])
    assert "2 of 3 record(s) imported" in _flat(r)  # auto: each record in its own layout, the unknown one reported


def test_format_values_and_help_list_every_layout(tmp_path):
    assert layout_format("NEJM-extended") == "nejm" and layout_format("mimiciv") == "osce"
    r = runner.invoke(app, ["clinical", "import", "--help"], env={"COLUMNS": "300"})
    assert "auto (detected per record" in _flat(r) and "nejm (NEJM, NEJM-extended)" in _flat(r)
    r = runner.invoke(
        app,
        ["clinical", "import", str(NEJM), "--out", str(tmp_path / "c.jsonl"), "--format", "agentclinic"],
        env={"COLUMNS": "300"},
    )
    assert r.exit_code == 2 and "unknown format 'agentclinic'" in _flat(r) and "nejm-extended" in _flat(r)


# ---- item 2: a report in parts is one exam ---------------------------------------------------------------------


def test_a_report_given_in_parts_is_one_exam_with_its_parts_in_order(tmp_path):
    out, reports = _imported(tmp_path, NESTED)
    overlay_names = {
        e["name"].lower() for e in json.loads(Path(out).read_text().splitlines()[0])["kb_overlay"]["exams"]
    }
    assert not overlay_names & {"findings", "comments", "technique", "impression", "conclusion", "result"}
    assert any("Imaging.Comments: a note on 'Imaging', not a test" in d for d in reports[0].dropped)
    env = rubricgym.make("clinical-v0", cases=out)
    env.reset(options={"task": env.task_for(env.cases[0])})
    mri, *_ = env.step(call("order", exam="MRI brain", impression="stroke", reason="weakness"))
    parts = ["Findings: Restricted diffusion", "Comments: Consistent with an acute infarct", "Technique: DWI/ADC"]
    assert all(p in mri for p in parts) and [mri.index(p) for p in parts] == sorted(mri.index(p) for p in parts)
    echo, *_ = env.step(call("order", exam="Echocardiogram", impression="stroke", reason="embolic source"))
    assert "Impression: Dilated left atrium; Conclusion: No thrombus seen" in echo
    with pytest.raises(ToolError, match="not in the exam catalogue"):
        resolve_exam(env.kb, "Findings")  # never an orderable exam of the file
    with pytest.raises(ToolError, match="not in the exam catalogue"):
        resolve_exam(env.kb, "Comments")


def test_a_panel_member_named_like_another_test_is_not_that_test(tmp_path):
    out, _ = _imported(tmp_path, MIMIC)
    flank = next(c for c in load_cases(out, rubricgym.make("clinical-v0", cases=out).kb) if c.id == "osce-0002")
    urine = flank.results["urinalysis"]
    assert isinstance(urine, dict) and "wbc" not in urine  # urine "Leukocytes" is not the blood count's WBC
    assert urine["osce_urinalysis_leukocytes"] == "Negative" and flank.results["wbc"] == 9.8  # "9.8 K/uL"


# ---- item 3: units travel with every age and bound -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "age", "gestation"),
    [
        ("Preterm male infant, born at 33 weeks' gestation, now 10 days old", (10, "days", "M"), "33 weeks"),
        ("Preterm male newborn, born at 33 weeks gestation", (0, "days", "M"), "33 weeks"),
        ("31-year-old woman at 34 weeks of gestation", (31, "years", "F"), "34 weeks"),
        ("23-year-old pregnant woman, 22 weeks' gestation", (23, "years", "F"), "22 weeks"),
        ("1.5-year-old boy", (18, "months", "M"), None),
        ("6-hour-old girl", (0, "days", "F"), None),
    ],
)
def test_a_gestational_age_is_not_the_patient_s_age(text, age, gestation):
    assert parse_demographics(text) == age and gestational_age(text) == gestation


def test_imported_gestational_ages_are_history_and_the_bound_respects_the_unit(tmp_path):
    out, reports = _imported(tmp_path, NESTED)
    env = rubricgym.make("clinical-v0", cases=out)
    infant, pregnant = env.cases[1], env.cases[2]
    assert (infant.profile.age, infant.profile.age_unit) == (10, "days")  # not 231 days (33 weeks)
    assert infant.history["birth"] == "Born at 33 weeks' gestation."
    assert (pregnant.profile.age, pregnant.profile.age_unit) == (31, "years")
    assert pregnant.history["pregnancy"] == "I am 34 weeks pregnant."
    assert any("gestational age 33 weeks" in m and "not the patient's age" in m for m in reports[1].mapped)
    assert Profile(age=231, age_unit="days", sex="M").years < 1  # a 7-month-old, in days, loads
    assert Profile(age=1400, age_unit="months", sex="F").years < 120
    for age, unit in ((121, "years"), (1441, "months"), (43801, "days")):
        with pytest.raises(ValidationError, match=f"age {age} {unit} is over 120 years"):
            Profile(age=age, age_unit=unit, sex="M")


# ---- item 4: the diagnosis, per case: knowledge base, alias or neither, and the oracle on it -------------------


def test_map_diagnosis_names_knowledge_base_alias_and_neither():
    kb = load_kb()
    assert (m := map_diagnosis(kb, "Deep vein thrombosis")).maps_to == "knowledge base" and m.condition == "dvt"
    assert (m := map_diagnosis(kb, "Glandular fever")).maps_to == "alias" and m.condition == "infectious_mononucleosis"
    assert (m := map_diagnosis(kb, "Chronic obstructive pulmonary disease (COPD)")).maps_to == "alias"
    assert m.via == "COPD"
    assert (m := map_diagnosis(kb, "Erythema ab igne")).maps_to == "neither" and not m.near
    m = map_diagnosis(kb, "Right lower lobe pneumonia")  # the matcher reads it as pneumonia; the case is not linked
    assert m.maps_to == "neither" and m.near == ["pneumonia"] and "not credited" in m.describe()


def test_the_import_report_lists_per_case_the_mapping_and_the_oracle_s_score(tmp_path):
    source = tmp_path / "nejm.jsonl"
    lines = NEJM.read_text(encoding="utf-8").splitlines()[:3]
    pneumonia = json.loads(lines[0])
    pneumonia["answers"] = [
        {"text": "Right lower lobe pneumonia", "correct": True},
        {"text": "Asthma", "correct": False},
    ]
    source.write_text("\n".join([*lines, json.dumps(pneumonia)]) + "\n", encoding="utf-8")
    report = tmp_path / "report.json"
    r = runner.invoke(
        app,
        ["clinical", "import", str(source), "--out", str(tmp_path / "c.jsonl"), "--report", str(report)],
        env={"COLUMNS": "300"},
    )
    assert r.exit_code == 0, r.output
    rows = {x["case_id"]: x for x in json.loads(report.read_text())}
    assert [rows[c]["maps_to"] for c in sorted(rows)] == ["knowledge base", "alias", "neither", "neither"]
    assert rows["nejm-0002"]["maps_via"] == "infectious_mononucleosis (Glandular fever)"
    assert "reads as pneumonia (not linked: an answer naming it is not credited)" in rows["nejm-0004"]["maps_via"]
    for row in rows.values():  # the env's own oracle, played on the written file and scored by the task's rubric
        assert row["oracle"] == {"correct": True, "reward": 1.0, "total": 1.0}, row
    text = _flat(r)
    assert "nejm-0002 Glandular fever alias infectious_mononucleosis (Glandular fever) yes 1.000 1.000" in text


def test_cases_the_matcher_does_not_credit_are_named(tmp_path):
    console = Console(record=True, width=300)
    ok = CaseReport(1, "osce-0001", diagnosis="Migraine", maps_to="knowledge base", maps_via="migraine (Migraine)")
    ok.oracle = {"correct": True, "reward": 1.0, "total": 1.0}
    missed = CaseReport(2, "osce-0002", diagnosis="?", maps_to="neither")
    missed.oracle = {"correct": False, "reward": 0.0, "total": 0.0}
    _diagnosis_table(console, [ok, missed])
    text = " ".join(console.export_text().replace("│", " ").split())
    assert "does not credit the oracle's diagnosis (the case's own) on 1 case(s): osce-0002" in text
    source = tmp_path / "q.jsonl"
    record = json.loads(OSCE.read_text(encoding="utf-8-sig").splitlines()[4])
    record["OSCE_Examination"]["Correct_Diagnosis"] = "?"
    source.write_text(json.dumps(record) + "\n", encoding="utf-8")
    _, _, reports = import_file(source, load_kb())
    assert "names no condition" in (reports[0].error or "")  # refused at import, not left for the matcher to miss


# ---- the guide's commands, as written -------------------------------------------------------------------------

GUIDE = Path(__file__).parents[3] / "docs" / "guides" / "public-data-2.md"


def test_the_guide_s_clinical_commands_run_as_written(tmp_path, monkeypatch):
    import re
    import shlex
    import shutil

    from rubricgym.core.store import TrajectoryStore

    monkeypatch.chdir(tmp_path)
    shutil.copy(NEJM, "nejm_cases.jsonl")
    shutil.copy(NESTED, "osce_cases.jsonl")
    block = re.findall(r"```bash\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)[0]
    lines = [shlex.split(line)[1:] for line in block.splitlines() if line.startswith("rubricgym ")]
    assert [line[:2] for line in lines] == [["clinical", "import"], ["clinical", "import"], ["run", "clinical-v0"]]
    nejm, osce, play = (runner.invoke(app, line) for line in lines)
    assert nejm.exit_code == 1 and "4 of 5 record(s) imported" in _flat(nejm)  # the two-answer record is reported
    assert osce.exit_code == 0, osce.output
    assert play.exit_code == 0, play.output
    assert [r["maps_to"] for r in json.loads(Path("nejm_report.json").read_text())][:4] == [
        "knowledge base",
        "alias",
        "neither",
        "neither",
    ]
    trajs = TrajectoryStore(Path("runs/nejm-oracle")).load()
    assert len(trajs) == 2 and all(t.outcome.reward == 1.0 for t in trajs)


def test_the_import_shows_its_progress_as_plain_lines_in_a_log(tmp_path):
    r = runner.invoke(
        app, ["clinical", "import", str(NEJM), "--out", str(tmp_path / "c.jsonl")], env={"COLUMNS": "300"}
    )
    lines = r.output.splitlines()
    assert "importing nejm_messy.jsonl (5 records)" in lines  # the phase, announced before any record is read
    assert any(line.startswith("importing nejm_messy.jsonl: 5/5 records ·") for line in lines)
    assert "playing the oracle (4 cases)" in lines
    assert any(line.startswith("playing the oracle: 4/4 cases ·") for line in lines)


def test_imported_nejm_cases_pass_the_leak_audit_and_the_shortcut_battery(tmp_path):
    import asyncio

    from rubricgym.rewards.leaks import audit_leaks
    from rubricgym.rewards.shortcuts import run_battery

    out, _ = _imported(tmp_path, NEJM)
    tasks = rubricgym.make("clinical-v0", cases=out).task_set(4)
    leaks = asyncio.run(audit_leaks("clinical-v0", env_kwargs={"cases": out}, tasks=tasks))
    assert leaks.ok, leaks.line()  # the hidden differential (the wrong options) never reaches a channel
    battery = asyncio.run(run_battery("clinical-v0", env_kwargs={"cases": out}, tasks=tasks))
    assert battery.ok and battery.oracle is not None and battery.oracle.total == 1.0, battery.problems()
