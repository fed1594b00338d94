"""Judge replies are parsed robustly; replies without a verdict are refused, never read as a zero."""

import pytest

from rubricgym.rewards.parse import JudgeParseError, json_objects, normalise_score, parse_scores, parse_verdict
from rubricgym.rewards.verdict import Verdict


@pytest.mark.parametrize(
    "text, met, score",
    [
        ('{"rationale": "ok", "met": true, "score": 0.9}', True, 0.9),
        ('Sure!\n```json\n{"rationale": "no", "met": false, "score": 0.1}\n```', False, 0.1),
        ('<think>{"met": true}</think>{"met": "no", "score": 2}', False, 0.2),
        ('{"verdict": "yes"}', True, 1.0),
        ('{"score": 7}', True, 0.7),
        ('{"score": 35, "rationale": "partly"}', False, 0.35),
        ('{"irrelevant": 1} then {"met": "pass", "score": "0.8"}', True, 0.8),
        ("Rationale: fine.\nVerdict: NOT MET", False, 0.0),
        ("score: 3/4", True, 0.75),
    ],
)
def test_parse_verdict_variants(text, met, score):
    v = parse_verdict(text)
    assert v["met"] is met
    assert v["score"] == pytest.approx(score)


def test_parse_verdict_keeps_evidence():
    v = parse_verdict(
        '{"rationale": "step 2 computes it", "met": true, "score": 1, "evidence_steps": [2, "3", "x"],'
        ' "quotes": ["17 * 3"]}'
    )
    assert v["rationale"] == "step 2 computes it"
    assert v["evidence_steps"] == [2, 3] and v["quotes"] == ["17 * 3"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "I think it is good.",
        '{"score": 500}',
        '{"met": "maybe"}',
        "{broken",
        '{"met": true, "score": 0}',  # contradictory
        '{"rationale": "x", "met": true or false, "score": 1',  # the template echoed back, cut off
        '{\n "met": false,\n "score": 1,',  # cut off and contradictory
    ],
)
def test_unusable_replies_raise(text):
    with pytest.raises(JudgeParseError):
        parse_verdict(text)


def test_helpers():
    assert json_objects('a {"x": 1} b [1] {"y": {"z": 2}}') == [{"x": 1}, {"y": {"z": 2}}]
    assert normalise_score(-1) is None and normalise_score("abc") is None and normalise_score(5, 10) == 0.5
    assert parse_scores('x {"a": 1} {"a": 1, "b": 2}', ["a", "b"]) == {"a": 1, "b": 2}
    with pytest.raises(JudgeParseError):
        parse_scores('{"a": 1}', ["a", "b"])


def test_failed_verdict_has_no_score():
    v = Verdict.failed("c", "endpoint down")
    assert not v.ok and v.score is None and v.met is None
    with pytest.raises(ValueError, match="never a 0"):
        Verdict(criterion_id="c", error="down", score=0.0, met=False)
    with pytest.raises(ValueError, match="needs both score and met"):
        Verdict(criterion_id="c", score=0.5)
