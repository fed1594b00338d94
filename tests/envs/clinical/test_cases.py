"""Real cases: the example JSONL loads and scores; a broken file names the file, line, case and field."""

import asyncio
import json
import shutil
from pathlib import Path

import pytest

import rubricgym
from rubricgym.envs.clinical.cases import CaseFileError, load_cases
from rubricgym.rewards import CheckJudge, ProcessRewardModel

from .conftest import EXAMPLES, call


def test_example_cases_load_and_the_oracle_scores_them(kb):
    cases = load_cases(EXAMPLES, kb)
    assert len(cases) == 20 and len({c.id for c in cases}) == 20
    env = rubricgym.make("clinical-v0", cases=EXAMPLES)
    tasks = [env.task_for(c) for c in cases]
    cls = type(env)
    prm = ProcessRewardModel(cls.default_rubric(), [CheckJudge()])
    for name, floor in (("oracle", 0.95), ("guesser", 0.0)):
        res = asyncio.run(
            rubricgym.rollout_many(
                lambda: rubricgym.make("clinical-v0", cases=EXAMPLES), cls.agents()[name](), tasks, progress=False
            )
        )
        totals = [b.total for b in asyncio.run(prm.score_many(res.trajectories))]
        assert min(totals) >= floor, (name, totals)
        if name == "oracle":
            assert all(t.outcome.reward == pytest.approx(1.0) for t in res.trajectories)


def test_given_results_are_served_and_the_rest_come_back_normal(kb):
    env = rubricgym.make("clinical-v0", cases=EXAMPLES)
    task = env.task_for(load_cases(EXAMPLES, kb)[0])  # inferior STEMI, not a knowledge-base condition id
    env.reset(options={"task": task})
    obs, *_ = env.step(call("order", exam="ECG", impression="STEMI", reason="chest pain"))
    assert "3 mm ST elevation in II, III and aVF" in obs
    obs, *_ = env.step(call("order", exam="troponin", impression="STEMI", reason="chest pain"))
    assert "Troponin I 4.20 ng/mL (H" in obs
    obs, *_ = env.step(call("order", exam="CBC", impression="STEMI", reason="baseline"))
    assert "Haemoglobin 14.8 g/dL" in obs and "(H" not in obs.split("Haemoglobin")[1].split("\n")[0]
    obs, *_ = env.step(call("ask", question="Does the pain go anywhere?"))
    assert "jaw" in obs
    _, reward, done, *_ = env.step(call("diagnose", diagnosis="inferior STEMI", reason="ST elevation, troponin"))
    assert done and env.steps[-1].info["correct"]


def _write(tmp_path, mutate):
    lines = Path(EXAMPLES).read_text().splitlines()
    rec = json.loads(lines[2])
    mutate(rec)
    lines[2] = json.dumps(rec)
    p = tmp_path / "cases.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r["results"].update({"Serum unobtainium": 3}), "field 'results.Serum unobtainium': unknown exam"),
        (lambda r: r["results"].update({"ECG": 3.5}), "field 'results.ECG': 12-lead ECG is a report; give its text"),
        (lambda r: r["profile"].update({"sex": "X"}), "field 'profile.sex'"),
        (lambda r: r.pop("diagnosis"), "field 'diagnosis': Field required"),
        (lambda r: r.update({"key_exams": ["CT abdomen", "scan"]}), "field 'key_exams': unknown exam 'scan'"),
    ],
)
def test_broken_case_file_names_file_line_case_and_field(tmp_path, kb, mutate, message):
    p = _write(tmp_path, mutate)
    with pytest.raises(CaseFileError) as e:
        load_cases(p, kb)
    assert f"{p}:3 (case 'ex-03-appendicitis')" in str(e.value) and message in str(e.value)


def test_bad_json_fails_before_any_episode(tmp_path):
    p = tmp_path / "cases.jsonl"
    shutil.copy(EXAMPLES, p)
    p.write_text(p.read_text() + "{not json\n")
    with pytest.raises(CaseFileError, match=r"cases.jsonl:21: not valid JSON"):
        rubricgym.make("clinical-v0", cases=str(p))


def test_free_text_rubric_items_become_llm_criteria(kb, tmp_path):
    p = _write(tmp_path, lambda r: r.update({"rubric": [{"text": "Explains the plan to the patient", "weight": 2}]}))
    env = rubricgym.make("clinical-v0", cases=str(p))
    task = env.task_for(env.cases[2])
    assert task.rubric["criteria"][-1] == {
        "id": "case_item_0",
        "text": "Explains the plan to the patient",
        "weight": 2.0,
        "judge": "Explains the plan to the patient",
    }
    assert env.task_for(env.cases[0]).rubric is None
