"""``rubricgym clinical import`` never writes over its input and names file and line on bad input (issue 40,
item 10): ``--report`` pointed at the input used to overwrite it, and wrong field types or very deep nesting ended
in tracebacks (or, for a list where the diagnosis goes, in a case diagnosed "['MI']")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.envs.clinical.osce import MAX_DEPTH, import_osce, shape_problem
from rubricgym.envs.clinical.schema import load_kb

runner = CliRunner()
GOOD = {
    "OSCE_Examination": {
        "Objective_for_Doctor": "Assess the chest pain.",
        "Patient_Actor": {
            "Demographics": "58-year-old man",
            "History": "Crushing chest pain for two hours.",
            "Symptoms": {"Primary_Symptom": "Chest pain", "Secondary_Symptoms": ["Sweating"]},
        },
        "Physical_Examination_Findings": {"Vital_Signs": {"Heart_Rate": "104 bpm"}},
        "Test_Results": {"ECG": {"Findings": "ST elevation in II, III and aVF"}},
        "Correct_Diagnosis": "Inferior myocardial infarction",
    }
}


def _flat(result) -> str:
    return " ".join(result.output.replace("│", " ").split())


def _with(**changes) -> dict:
    """``GOOD`` with ``Patient_Actor`` fields (``actor_*``) or OSCE fields replaced."""
    osce = json.loads(json.dumps(GOOD["OSCE_Examination"]))
    for key, value in changes.items():
        if key.startswith("actor_"):
            osce["Patient_Actor"][key.removeprefix("actor_")] = value
        else:
            osce[key] = value
    return {"OSCE_Examination": osce}


def _jsonl(path: Path, *records: dict | str) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize("through_link", [False, True], ids=["same-path", "symlink"])
def test_report_never_overwrites_the_input(tmp_path, through_link):
    source = _jsonl(tmp_path / "osce.jsonl", GOOD)
    before = source.read_bytes()
    report = source
    if through_link:
        report = tmp_path / "report.json"
        report.symlink_to(source)
    r = runner.invoke(
        app, ["clinical", "import", str(source), "--out", str(tmp_path / "cases.jsonl"), "--report", str(report)]
    )
    assert r.exit_code == 2 and "is the input file" in _flat(r), r.output
    assert source.read_bytes() == before  # the old import wrote its JSON report over the cases it read
    assert not (tmp_path / "cases.jsonl").exists()


def test_report_is_not_out_and_an_existing_report_needs_force(tmp_path):
    source = _jsonl(tmp_path / "osce.jsonl", GOOD)
    out = tmp_path / "cases.jsonl"
    r = runner.invoke(app, ["clinical", "import", str(source), "--out", str(out), "--report", str(out)])
    assert r.exit_code == 2 and "is also --out" in _flat(r)
    kept = tmp_path / "notes.json"
    kept.write_text("mine", encoding="utf-8")
    r = runner.invoke(app, ["clinical", "import", str(source), "--out", str(out), "--report", str(kept)])
    assert r.exit_code == 2 and "pass --force" in _flat(r) and kept.read_text() == "mine"
    r = runner.invoke(app, ["clinical", "import", str(source), "--out", str(out), "--report", str(kept), "--force"])
    assert r.exit_code == 0, r.output
    assert json.loads(kept.read_text())[0]["error"] is None


@pytest.mark.parametrize(
    "record, said",
    [
        (_with(Patient_Actor=["58-year-old man"]), "Patient_Actor must be an object"),
        (_with(Correct_Diagnosis=["Inferior MI"]), "Correct_Diagnosis must be text"),
        (_with(Correct_Diagnosis=42), "Correct_Diagnosis must be text"),
        (_with(actor_History={"onset": ["2 h"]}), "Patient_Actor.History must be text"),
        (_with(actor_Symptoms={"Primary_Symptom": ["pain"]}), "Patient_Actor.Symptoms.Primary_Symptom must be text"),
        (_with(actor_Symptoms=7), "Patient_Actor.Symptoms must be"),
        (_with(actor_Demographics=True), "Patient_Actor.Demographics must be"),
        (_with(Test_Results={"ECG": "[" * 40 + "]" * 40}), None),  # deep-looking text is only text
    ],
)
def test_a_record_of_the_wrong_shape_is_named_by_file_and_line(tmp_path, record, said):
    source = _jsonl(tmp_path / "osce.jsonl", GOOD, record, GOOD)
    out = tmp_path / "cases.jsonl"
    r = runner.invoke(app, ["clinical", "import", str(source), "--out", str(out), "--force"], env={"COLUMNS": "250"})
    assert "Traceback" not in r.output and (r.exception is None or isinstance(r.exception, SystemExit)), r.output
    if said is None:
        assert r.exit_code == 0, r.output
        return
    assert r.exit_code == 1 and f"{source}:2: {said}" in _flat(r), r.output
    assert len(out.read_text().splitlines()) == 2  # the good records around it are imported


def test_deep_nesting_is_an_error_of_its_line_not_a_traceback(tmp_path):
    very_deep = "[" * 100_000 + "]" * 100_000  # past the JSON reader's recursion limit
    deep_record = _with(Test_Results={"Panel": json.loads("[" * 40 + '"x"' + "]" * 40)})  # readable, too deep
    source = _jsonl(tmp_path / "osce.jsonl", GOOD, very_deep, deep_record)
    out = tmp_path / "cases.jsonl"
    r = runner.invoke(app, ["clinical", "import", str(source), "--out", str(out)], env={"COLUMNS": "250"})
    text = _flat(r)
    assert r.exit_code == 1 and (r.exception is None or isinstance(r.exception, SystemExit)), r.output
    assert f"{source}:2: nested too deeply to read" in text and f"{source}:3: nested more than {MAX_DEPTH}" in text
    assert len(out.read_text().splitlines()) == 1
    whole = tmp_path / "list.json"
    whole.write_text(very_deep, encoding="utf-8")
    r = runner.invoke(app, ["clinical", "import", str(whole), "--out", str(tmp_path / "c2.jsonl")])
    assert r.exit_code == 1 and f"{whole}:1: nested too deeply" in _flat(r), r.output


def test_a_json_list_names_the_record(tmp_path):
    source = tmp_path / "osce.json"
    source.write_text(json.dumps([GOOD, _with(Correct_Diagnosis=["x"])]), encoding="utf-8")
    _, _, reports = import_osce(source, load_kb())
    assert reports[1].where == f"{source} record 2" and "Correct_Diagnosis must be text" in (reports[1].error or "")
    assert shape_problem(GOOD["OSCE_Examination"]) is None
