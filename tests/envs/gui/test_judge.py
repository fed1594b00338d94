"""State judges: paths into app state, goal predicates, progress and unexpected side effects."""

import pytest

from rubricgym.envs.gui.judge import Goal, changed_paths, check_goals, flatten, progress, resolve, unexpected_changes

STATE = {
    "notes": [
        {"id": "n1", "title": "Groceries", "body": "eggs", "folder": "Work"},
        {"id": "n2", "title": "Trip. to Lisbon", "body": "tickets", "folder": "Work"},
    ],
    "settings": {"wifi": True},
    "cart": [],
}


def test_resolve_selects_list_items_by_attribute_and_index():
    assert resolve(STATE, "notes[title=Groceries].body") == "eggs"
    assert resolve(STATE, "notes[title=Trip. to Lisbon].body") == "tickets"  # a dot inside a selector is data
    assert [n["id"] for n in resolve(STATE, "notes[*folder=Work]")] == ["n1", "n2"]
    assert resolve(STATE, "notes[1].id") == "n2"
    assert resolve(STATE, "notes[title=Nope].body") is None
    assert resolve(STATE, "settings.missing.deeper") is None


def test_check_goals_rows_and_progress():
    goals = [
        Goal(field="notes[title=Groceries].body", op="ieq", expected=" EGGS "),
        Goal(field="notes[title=Old]", op="absent"),
        Goal(field="notes[*folder=Work]", op="len", expected=3),
        Goal(field="answer.count", expected="2"),
    ]
    rows = check_goals(goals, STATE, {"count": "2"})
    assert [r["passed"] for r in rows] == [True, True, False, True]
    assert rows[2] == {
        "field": "notes[*folder=Work]",
        "op": "len",
        "expected": 3,
        "actual": STATE["notes"],
        "passed": False,
    }
    assert progress(rows) == pytest.approx(0.75)


def test_approx_accepts_money_strings_and_rejects_text():
    assert check_goals([Goal(field="answer.price", op="approx", expected=24.99)], {}, {"price": "$24.99"})[0]["passed"]
    goal = Goal(field="answer.price", op="approx", expected=24.99)
    assert not check_goals([goal], {}, {"price": "cheap"})[0]["passed"]


def test_flatten_keys_items_by_id():
    flat = flatten(STATE)
    assert flat["notes[id=n1].title"] == "Groceries"
    assert flat["cart"] == []


def test_unexpected_changes_are_the_diff_minus_expected_patterns():
    after = {
        **STATE,
        "notes": [
            {**STATE["notes"][0], "body": "milk"},
            STATE["notes"][1],
            {"id": "n3", "title": "New", "body": "", "folder": "Work"},
        ],
        "settings": {"wifi": False},
    }
    assert "settings.wifi" in changed_paths(STATE, after)
    assert unexpected_changes(STATE, after, ["notes[id=n3]*", "notes[id=n1].body"]) == ["settings.wifi"]
    assert unexpected_changes(STATE, after, ["*"]) == []


def test_bad_path_is_an_error():
    with pytest.raises(ValueError, match="bad state path"):
        resolve(STATE, "notes..x[")
