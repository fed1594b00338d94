"""clinical-v0: tools, stages, chart-style observations, bad input as observations, DiagGym reward."""

import gymnasium
import pytest

import rubricgym
from rubricgym.envs.clinical.rewards import exam_f1

from .conftest import call, start


def test_registered_in_rubricgym_and_gymnasium():
    env = gymnasium.make("rubricgym/Clinical-v0")
    obs, info = env.reset(seed=0)
    assert "presents with" in obs and info["stage"] == "history"
    assert [t.name for t in env.unwrapped.tools()] == ["ask", "examine", "order", "diagnose"]
    assert env.unwrapped.max_steps == 12
    assert {"oracle", "shotgun", "guesser", "random"} <= set(rubricgym.spec("clinical-v0").load().agents())


def test_a_work_up_reads_like_a_chart_with_stages(env, kb):
    start(env, kb, "stemi", seed=2)
    obs, _, _, _, info = env.step(call("ask", question="Does the pain spread to your arm or jaw?"))
    assert obs.startswith('Patient: "') and info["stage"] == "history"
    obs, *_, info = env.step(call("examine", system="heart"))
    assert obs.startswith("Examination (cardiovascular):") and info["stage"] == "examination"
    obs, *_, info = env.step(call("order", exam="troponin", impression="ACS", reason="chest pain"))
    assert obs.startswith("Here is the result: Troponin I ") and "(H, ref < 0.04)" in obs and info["stage"] == "testing"
    obs, *_ = env.step(call("order", exam="CBC", impression="ACS", reason="baseline"))
    assert obs.startswith("Here is the result: Complete blood count\n  Haemoglobin ")
    obs, *_ = env.step(call("order", exam="Troponin I", impression="ACS", reason="repeat"))
    assert obs.startswith("Already resulted at turn 3.") and env.steps[-1].info["repeat"]
    obs, reward, terminated, truncated, info = env.step(
        call("diagnose", diagnosis="Acute STEMI (I21.3)", reason="raised troponin", differential=["aortic dissection"])
    )
    assert terminated and not truncated and info["stage"] == "diagnosis"
    last = env.steps[-1].info
    assert last["correct"] and last["considered"] == ["aortic_dissection"]
    # DiagGym: 0.1 + 1 + 0.5 * F1 over its maximum 1.6; two distinct orders, one covers a key exam (troponin)
    p, r, f1 = exam_f1([["troponin_i"], []], ["ecg", "troponin_i"])
    assert (p, r) == (0.5, 0.5) and reward == pytest.approx((1.1 + 0.5 * f1) / 1.6)
    assert last["diaggym"] == pytest.approx(1.1 + 0.5 * f1)  # the paper's own value stays in the record


def test_bad_input_becomes_explanatory_observations(env, kb):
    start(env, kb, "pneumonia")
    obs, *_ = env.step(call("order", exam="please get a chest x ray", impression="x", reason="y"))
    assert obs.startswith("Here is the result: Chest X-ray:")  # a contained alias resolves
    obs, *_ = env.step(call("order", exam="xray of chest", impression="x", reason="y"))
    assert "not in the exam catalogue. Closest catalogue names: Chest X-ray" in obs
    obs, *_, info = env.step(call("order", exam="tropomyosin", impression="x", reason="y"))
    assert "not in the exam catalogue" in obs and "Troponin I" in obs and info["tool_error"]
    obs, *_ = env.step(call("order", exam="CBC and CRP", impression="x", reason="y"))
    assert "one exam per turn" in obs
    obs, *_ = env.step(call("examine", system="spleen"))
    assert "unknown system" in obs and "cardiovascular" in obs
    obs, *_ = env.step(call("ask", question="   "))
    assert "question is empty" in obs
    obs, _, terminated, _, info = env.step("I think it is pneumonia")
    assert "Invalid action" in obs and not terminated and info["parse_error"]
    obs, _, terminated, *_ = env.step(call("diagnose", diagnosis="x", differential={"bad": 1}))
    assert "differential must be a list" in obs and not terminated


@pytest.mark.parametrize(
    "text",
    [
        "Pneumonia",
        "community acquired pneumonia",
        "CAP",
        "J18.9",
        "pnuemonia",
        "Right lower lobe community-acquired pneumonia",
    ],
)
def test_diagnosis_matching_is_alias_and_icd_aware(env, kb, text):
    start(env, kb, "pneumonia")
    _, reward, terminated, *_ = env.step(call("diagnose", diagnosis=text))
    assert terminated and env.steps[-1].info["correct"] and reward == pytest.approx(1.1 / 1.6)


def test_wrong_or_hedged_diagnosis_is_not_credited(env, kb):
    start(env, kb, "nstemi")
    env.step(call("diagnose", diagnosis="STEMI"))
    assert not env.steps[-1].info["correct"] and env.steps[-1].info["matched"] == "stemi"


def test_turn_limit_truncates_without_a_diagnosis(kb):
    env = rubricgym.make("clinical-v0", max_steps=2)
    start(env, kb, "migraine")
    env.step(call("ask", question="Where is the headache?"))
    _, reward, terminated, truncated, _ = env.step(call("examine", system="neuro"))
    assert truncated and not terminated and reward == 0.0


def test_unknown_condition_and_kb_folder_fail_early(tmp_path):
    with pytest.raises(ValueError, match="unknown condition 'stemmi'.*ST-elevation"):
        rubricgym.make("clinical-v0", condition="stemmi")
    with pytest.raises(ValueError, match="needs exams.yaml"):
        rubricgym.make("clinical-v0", kb=str(tmp_path))


def test_exam_f1_worked_examples():
    assert exam_f1([], []) == (1.0, 1.0, 1.0)
    assert exam_f1([[]], []) == (0.0, 1.0, 0.0)
    assert exam_f1([], ["ecg"]) == (0.0, 0.0, 0.0)
    assert exam_f1([["ecg"], ["troponin_i"], []], ["ecg", "troponin_i"]) == pytest.approx((2 / 3, 1.0, 0.8))
