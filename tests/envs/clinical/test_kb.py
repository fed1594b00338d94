"""The built-in knowledge base is complete and consistent; a broken file names the file, record and field."""

import shutil
from pathlib import Path

import pytest
import yaml

from rubricgym.envs.clinical.schema import DEFAULT_KB, KnowledgeBaseError, load_kb


def test_builtin_kb_size_and_coverage():
    kb = load_kb()
    assert len(kb.conditions) >= 60 and len(kb.specialties) >= 10
    assert len(kb.orderable) >= 80
    for c in kb.conditions.values():
        assert c.sources and c.icd10 and c.complaints and c.history
        assert set(c.cant_miss) <= set(c.differential)


def test_every_key_exam_and_differential_refers_to_a_catalogue_entry():
    kb = load_kb()
    for c in kb.conditions.values():
        assert all(e in kb.exams and kb.exams[e].orderable for e in c.key_exams), c.id
        assert all(d in kb.conditions for d in c.differential), c.id
        assert all(e in kb.exams for e in c.effects), c.id


def test_every_reference_range_has_a_unit_and_panels_expand_to_analytes():
    kb = load_kb()
    for e in kb.exams.values():
        if e.ref is not None:
            assert e.unit and e.ref[0] <= e.ref[1], e.id
        assert e.cost >= 0 and 0 <= e.invasiveness <= 3 and e.turnaround_h >= 0
    assert kb.analytes_of("cmp")[:8] == kb.analytes_of("bmp")
    assert {"hemoglobin", "hematocrit", "platelets"} <= set(kb.analytes_of("cbc"))


def _copy_kb(tmp_path: Path) -> Path:
    dst = tmp_path / "kb"
    shutil.copytree(DEFAULT_KB, dst)
    return dst


def test_bad_condition_field_names_file_record_and_field(tmp_path):
    kb = _copy_kb(tmp_path)
    path = kb / "conditions" / "cardiology.yaml"
    data = yaml.safe_load(path.read_text())
    data[0]["history"] = {"chest pain": 1.5}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(KnowledgeBaseError) as e:
        load_kb(kb)
    assert "cardiology.yaml" in str(e.value) and "'stemi'" in str(e.value) and "history" in str(e.value)


def test_unknown_key_exam_and_differential_fail_early(tmp_path):
    kb = _copy_kb(tmp_path)
    path = kb / "conditions" / "neurology.yaml"
    data = yaml.safe_load(path.read_text())
    data[0]["key_exams"] = ["ct_hed"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(KnowledgeBaseError, match=r"neurology.yaml: condition 'ischaemic_stroke', field 'key_exams'"):
        load_kb(kb)
    data[0]["key_exams"] = ["ct_head"]
    data[0]["differential"], data[0]["cant_miss"] = ["no_such_condition"], []
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(KnowledgeBaseError, match="field 'differential': unknown condition 'no_such_condition'"):
        load_kb(kb)


def test_range_without_unit_is_rejected(tmp_path):
    kb = _copy_kb(tmp_path)
    path = kb / "exams.yaml"
    data = yaml.safe_load(path.read_text())
    rec = next(r for r in data["exams"] if r["id"] == "sodium")
    del rec["unit"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(KnowledgeBaseError, match=r"exams.yaml: exam 'sodium'.*needs a 'unit'"):
        load_kb(kb)


def test_env_runs_on_a_user_knowledge_base_folder(tmp_path):
    import rubricgym

    kb = _copy_kb(tmp_path)
    for extra in (kb / "conditions").glob("*.yaml"):
        if extra.name not in ("cardiology.yaml", "pulmonology.yaml", "gastroenterology.yaml"):
            extra.unlink()
    path = kb / "conditions" / "cardiology.yaml"
    data = yaml.safe_load(path.read_text())
    for rec in data:  # keep references inside the smaller knowledge base
        rec["differential"] = [
            d
            for d in rec["differential"]
            if d in {"stemi", "nstemi", "acute_pericarditis", "aortic_dissection", "gerd"}
        ]
        rec["cant_miss"] = [d for d in rec["cant_miss"] if d in rec["differential"]]
    path.write_text(yaml.safe_dump(data))
    for name in ("pulmonology.yaml", "gastroenterology.yaml"):
        p = kb / "conditions" / name
        recs = yaml.safe_load(p.read_text())
        for rec in recs:
            rec["differential"], rec["cant_miss"] = [], []
        p.write_text(yaml.safe_dump(recs))
    env = rubricgym.make("clinical-v0", kb=str(kb))
    tasks = env.task_set(20, seed=0)
    assert {t.hidden["condition"] for t in tasks} <= set(env.kb.conditions) and len(env.kb.conditions) < 30
    assert all(t.params["kb"] == str(kb.resolve()) for t in tasks)
    env.reset(options={"task": tasks[0]})
