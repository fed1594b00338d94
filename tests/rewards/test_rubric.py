"""Rubric schema: env default rubrics load, files round-trip, hashes track content, errors say where."""

import json

import pytest

from rubricgym.rewards.rubric import Criterion, Rubric, RubricError, load_rubric


def test_env_default_rubric_loads(toy_rubric):
    r = load_rubric(toy_rubric)
    assert r.id == "toy-calculator" and len(r.criteria) == 6
    assert {c.judged_by for c in r.criteria} == {"check"}
    assert [c.id for c in r.step_criteria] == ["valid_step", "progress"]
    assert r.criterion("correct").resolved_weight == 1.0
    assert r.criterion("used_calculator").resolved_weight == 0.3


@pytest.mark.parametrize("suffix", [".yaml", ".json", ".toml"])
def test_round_trip_every_format(tmp_path, toy_rubric, suffix):
    data = dict(toy_rubric)
    data["criteria"] = [
        *toy_rubric["criteria"],
        {
            "id": "explains",
            "text": "Explains each step.",
            "judge": "Look for a reason per step.",
            "weight": -0.5,
            "scope": "step",
            "entities": ["E0", "E1"],
        },
    ]
    data["aggregation"] = {"method": "swe_trace", "gamma": 0.8, "outcome_check": "final_answer_correct"}
    r = Rubric.from_dict(data)
    back = Rubric.load(r.save(tmp_path / f"r{suffix}"))
    assert back == r
    assert back.hash == r.hash


def test_hash_tracks_content_not_description(toy_rubric):
    r = load_rubric(toy_rubric)
    assert r.model_copy(update={"description": "notes"}).hash == r.hash
    edited = dict(
        toy_rubric,
        criteria=[dict(toy_rubric["criteria"][0], text="Correct final answer.")] + toy_rubric["criteria"][1:],
    )
    assert load_rubric(edited).hash != r.hash
    assert load_rubric(dict(toy_rubric, version="next")).hash != r.hash


def test_errors_name_file_criterion_and_field(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps(
            {
                "id": "r",
                "criteria": [
                    {"id": "ok", "text": "fine"},
                    {"id": "broken", "text": "x", "level": "critical"},
                ],
            }
        )
    )
    with pytest.raises(RubricError) as e:
        Rubric.load(path)
    msg = str(e.value)
    assert str(path) in msg and "'broken'" in msg and "'level'" in msg


def test_error_for_criterion_without_id_uses_position(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("id: r\ncriteria:\n  - text: no id here\n")
    with pytest.raises(RubricError, match=r"criterion #1, field 'id'"):
        Rubric.load(path)


@pytest.mark.parametrize(
    "criteria, aggregation, match",
    [
        ([{"id": "a", "text": "t", "check": "c", "judge": "j"}], None, "not both"),
        ([{"id": "a", "text": "t"}, {"id": "a", "text": "u"}], None, "twice"),
        ([{"id": "a", "text": "t", "weight": -1}], None, "signed"),
        ([{"id": "a", "text": "t"}], {"method": "swe_trace", "gamma": 0.4}, "gamma"),
        ([{"id": "a", "text": "t"}], {"method": "carr"}, "entities"),
        ([{"id": "a", "text": "t"}], {"method": "bogus"}, "method"),
    ],
)
def test_invalid_rubrics_are_refused(criteria, aggregation, match):
    data = {"id": "r", "criteria": criteria}
    if aggregation:
        data["aggregation"] = aggregation
    with pytest.raises(RubricError, match=match):
        Rubric.from_dict(data)


def test_unknown_fields_and_formats_are_refused(tmp_path):
    with pytest.raises(RubricError, match="field .wieght.: Extra inputs"):
        Rubric.from_dict({"id": "r", "criteria": [{"id": "a", "text": "t", "wieght": 1}]})
    (tmp_path / "r.ini").write_text("x")
    with pytest.raises(RubricError, match="unknown rubric format"):
        Rubric.load(tmp_path / "r.ini")
    (tmp_path / "r.yaml").write_text("id: [unclosed")
    with pytest.raises(RubricError, match="not valid YAML"):
        Rubric.load(tmp_path / "r.yaml")


def test_criterion_weights():
    assert Criterion(id="p", text="Avoids X", level="pitfall").resolved_weight == 0.9
    assert Criterion(id="p", text="Claims X", level="pitfall", weight=-0.9).resolved_weight == -0.9
    assert Criterion(id="d", text="default").level == "important"
