"""The virtual patient: fixed-on-first-draw, internally consistent results; history questions matched to findings."""

import pytest

from rubricgym.envs.clinical.case import generate_case
from rubricgym.envs.clinical.matching import concepts
from rubricgym.envs.clinical.patient import VirtualPatient, resolve_system


def _patient(kb, condition, seed=0):
    return VirtualPatient(kb, generate_case(kb, seed, condition))


def test_case_generation_is_deterministic_and_follows_the_prior(kb):
    assert generate_case(kb, 7) == generate_case(kb, 7)
    cases = [generate_case(kb, s) for s in range(400)]
    assert len({c.condition for c in cases}) > 40
    pregnancy = [c for c in cases if c.condition in ("ectopic_pregnancy", "miscarriage", "pre_eclampsia")]
    assert pregnancy and all(c.profile.sex == "F" and c.profile.age < 65 for c in pregnancy)
    assert all(any(v for v in c.history.values()) for c in cases)


def test_results_are_fixed_on_first_draw_and_agree_across_instances(kb):
    a, b = _patient(kb, "iron_deficiency_anaemia", 3), _patient(kb, "iron_deficiency_anaemia", 3)
    first = [ln.text for ln in a.report("cbc")]
    assert [ln.text for ln in a.report("cbc")] == first
    assert [ln.text for ln in b.report("cbc")] == first  # another env instance draws the same numbers
    assert a.report("hemoglobin")[0].text in first  # a panel and its member agree


def test_anaemia_shows_in_haemoglobin_and_haematocrit(kb):
    for seed in range(20):
        p = _patient(kb, "iron_deficiency_anaemia", seed)
        hb, hct = p.value("hemoglobin"), p.value("hematocrit")
        lo_hb = p.kb.exams["hemoglobin"].ref_for(p.case.profile.sex)[0]
        assert hb < lo_hb and hct == pytest.approx(3 * hb, rel=0.05)
        assert p.line("hemoglobin").abnormal and p.line("mcv").abnormal


def test_unrelated_exams_are_normal_with_noise(kb):
    values = []
    for seed in range(30):
        p = _patient(kb, "migraine", seed)
        lines = p.report("cmp") + p.report("cbc")
        assert not any(ln.abnormal for ln in lines), [ln.text for ln in lines if ln.abnormal]
        assert not p.line("ct_head").abnormal
        values.append(p.value("sodium"))
    assert len(set(values)) > 3  # realistic noise, not a constant


def test_condition_shifts_key_results_with_flags_and_units(kb):
    p = _patient(kb, "stemi", 1)
    line = p.line("troponin_i")
    assert line.abnormal and line.text.startswith("Troponin I ") and "ng/mL (H, ref < 0.04)" in line.text
    assert "ST elevation" in p.line("ecg").text
    assert p.line("inr").text.startswith("INR ") and not p.line("inr").abnormal


def test_history_questions_match_findings_through_synonyms(kb):
    p = _patient(kb, "heart_failure", 0)
    p.case.history.update({"breathless on lying flat": True, "swollen ankles": True, "weight gain": False})
    answer, matched = p.answer("Do you get short of breath when you lie down flat?")
    assert matched == ["breathless on lying flat"] and answer.startswith("Yes")
    assert p.answer("Any swelling of your ankles?")[1] == ["swollen ankles"]
    no, which = p.answer("Have you put on weight?")
    assert no.startswith("No") and which == ["weight gain"]
    assert p.answer("Have you coughed up blood?")[0].startswith("No")  # a finding of other conditions: absent
    assert p.answer("Do you take any medicines?")[0]  # a generic topic gets an answer
    q = "Have you had crushing central chest pain?"
    assert p.answer(q) == p.answer(q)
    assert "not sure" in p.answer("xyzzy plugh")[0]


def test_matching_folds_spelling_and_synonyms():
    assert concepts("breathlessness") == concepts("dyspnoea") == concepts("short of breath") - {"short"} | {"breath"}
    assert resolve_system("heart") == "cardiovascular" and resolve_system("obs") == "vital signs"
    assert resolve_system("spleen") is None


def test_did_you_mean_suggestions_skip_only_matches_that_cannot_reach_the_cut(kb):
    """``suggest`` skips the quadratic spelling match where the lengths alone keep it under 0.4: the suggestions
    equal the full computation's, and an agent's 100,000-character text no longer takes ~40 s per exam order."""
    import difflib

    from rubricgym.envs.clinical.matching import fold
    from rubricgym.envs.clinical.patient import exam_index

    index = exam_index(kb)

    def reference(text: str) -> list[str]:
        folded = fold(text)
        words, compact = set(folded.split()), folded.replace(" ", "")
        best: dict[str, float] = {}
        for name, id_ in index.names.items():
            nwords = set(name.split())
            score = max(
                difflib.SequenceMatcher(None, folded, name).ratio(),
                difflib.SequenceMatcher(None, compact, name.replace(" ", "")).ratio(),
                len(words & nwords) / len(words | nwords) + 0.1 if words & nwords else 0.0,
            )
            best[id_] = max(best.get(id_, 0.0), score)
        ranked = sorted((i for i, sc in best.items() if sc >= 0.4), key=lambda i: -best[i])
        return [index.display[i] for i in ranked[:5]]

    queries = ["troponn", "chest xray", "ecg", "ful blood count", "a very long request for a " * 12 + "troponin"]
    for q in queries:
        assert index.suggest(q) == reference(q), q
    assert index.suggest("troponn")  # a typo still gets its suggestion
    assert index.suggest("x" * 100_000) == []
