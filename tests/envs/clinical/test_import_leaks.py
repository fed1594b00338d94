"""A public case whose patient-visible text names its diagnosis (issue #39): the importer names case and field and
refuses it unless told to allow it, and the leak audit, through an agent that asks every history topic, reports it."""

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rubricgym
from rubricgym.cli import app
from rubricgym.envs.clinical.env import ClinicalEnv
from rubricgym.envs.clinical.osce import diagnosis_mentions, import_osce, write_cases
from rubricgym.envs.clinical.records import RECORDS, Ask
from rubricgym.envs.clinical.schema import load_kb
from rubricgym.rewards.leaks import audit_leaks

DATA = Path(__file__).with_name("data")
REAL = DATA / "osce_real_mess.jsonl"
SAMPLE = Path("/work/shared/samples/osce_layout_example.jsonl")


def _gp_said_so(tmp_path: Path) -> Path:
    """The real file's appendicitis record, its history now saying what the GP thought."""
    record = json.loads(REAL.read_text().splitlines()[7])
    assert record["OSCE_Examination"]["Correct_Diagnosis"] == "Acute appendicitis"
    record["OSCE_Examination"]["Patient_Actor"]["History"] += " My GP said it is appendicitis."
    path = tmp_path / "gp.jsonl"
    path.write_text(json.dumps(record) + "\n")
    return path


def test_the_import_refuses_a_history_that_names_the_diagnosis(tmp_path):
    out = tmp_path / "cases.jsonl"
    result = CliRunner().invoke(app, ["clinical", "import", str(_gp_said_so(tmp_path)), "--out", str(out)])
    text = " ".join(result.output.split())
    assert result.exit_code == 1 and not out.exists(), text
    assert "osce-0001" in text and "history 'abdominal pain' names the diagnosis ('appendicitis')" in text
    assert "--allow-diagnosis-in-history" in text
    allowed = CliRunner().invoke(
        app, ["clinical", "import", str(_gp_said_so(tmp_path)), "--out", str(out), "--allow-diagnosis-in-history"]
    )
    assert allowed.exit_code == 0 and out.exists() and "warning" in allowed.output


def test_clean_files_import_without_a_warning(tmp_path):
    kb = load_kb()
    for path in (REAL, DATA / "osce_messy.jsonl", *([SAMPLE] if SAMPLE.exists() else [])):
        _, _, reports = import_osce(path, kb)
        assert not [r.leaks for r in reports if r.leaks], path


def test_mentions_name_the_field_and_spare_units_and_negations():
    kb = load_kb()
    case = {
        "diagnosis": {"name": "Pulmonary embolism"},
        "complaint": "sudden breathlessness",
        "profile": {"history": ["COPD"], "social": "Goes to a weekly pe class; 20 pack-years"},
        "history": {"breathlessness": "Started an hour ago; not a pulmonary embolism, I hope.", "pain": "Sharp."},
        "examination": {"respiratory": "RR 26; PE suspected by the paramedic."},
        "results": {"ctpa": "Filling defect consistent with pulmonary embolism."},
    }
    leaks, disclosed = diagnosis_mentions(kb, {**case, "condition": "pulmonary_embolism"})
    assert leaks == ["examination 'respiratory' names the diagnosis ('pe')"]  # capitals: the abbreviation counts
    assert disclosed == ["result 'ctpa' names the diagnosis ('pulmonary embolism')"]  # a test may say it


def test_results_are_not_public_and_the_leak_audit_reports_what_the_patient_says(tmp_path):
    cases, overlay, _ = import_osce(_gp_said_so(tmp_path), load_kb())
    out = str(write_cases(tmp_path / "cases.jsonl", cases, overlay))
    env = rubricgym.make("clinical-v0", cases=out)
    task = env.task_set(1)[0]
    assert "results" not in task.params["case"] and task.hidden["case_record"]["results"]
    report = asyncio.run(audit_leaks("clinical-v0", env_kwargs={"cases": out}, tasks=[task]))
    said = [
        lk for lk in report.leaks if lk.value == "appendicitis" and lk.agent == "thorough" and "(ask)" in lk.channel
    ]
    assert not report.ok and said


@pytest.mark.parametrize("index", range(9))
def test_the_thorough_agent_asks_every_history_topic(tmp_path, index):
    cases, overlay, _ = import_osce(REAL, load_kb())
    out = str(write_cases(tmp_path / "cases.jsonl", cases, overlay))
    env = rubricgym.make("clinical-v0", cases=out)
    task = env.task_set(9)[index]
    from rubricgym.core.rollout import rollout

    traj = asyncio.run(rollout(env, ClinicalEnv.agents()["thorough"](seed=0), task, seed=0))
    asked = {f for _, a in RECORDS.each(traj.steps, Ask) for f in a.matched}
    assert set(task.params["case"]["history"]) <= asked
    assert traj.steps[-1].info["tool"] == "diagnose"
