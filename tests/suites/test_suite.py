"""Suites: built-ins load, bad files name the entry and field, `suites` and `suite show` print them."""

import json

import pytest
import yaml
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.suites.suite import SuiteError, builtin_suites, load_suite

runner = CliRunner()


def test_builtin_suites_load_with_deterministic_tasks():
    assert {"toy", "deepsearch", "swe", "clinical", "gui", "mixed"} <= set(builtin_suites())
    toy = load_suite("toy")
    assert [e.name for e in toy.entries] == ["toy-expression", "toy-word"]
    first = [t.id for t in toy.tasks("toy-expression")]
    assert len(first) == 12 and first == [t.id for t in load_suite("toy").tasks("toy-expression")]
    assert toy.tasks("toy-expression")[0].prompt.startswith("Compute")
    mixed = load_suite("mixed")
    assert {e.env for e in mixed.entries} == {"toy-calculator-v0", "deepsearch-v0", "swe-v0", "clinical-v0"}
    assert mixed.weights["swe"] == pytest.approx(0.5 / 3.5)


def test_a_small_task_space_yields_unique_tasks():
    swe = load_suite("swe")
    ids = [t.id for t in swe.tasks("swe")]
    assert len(ids) == len(set(ids)) >= 2


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"env": "toy-calculator-v0", "taks": 3}, "entries[0].taks"),
        ({"env": "toy-calculater-v0"}, "toy-calculator-v0"),
        ({"env": "toy-calculator-v0", "weight": 0}, "entries[0].weight"),
    ],
)
def test_bad_suite_files_name_the_entry_and_field(tmp_path, entry, message):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"name": "bad", "entries": [entry]}))
    with pytest.raises(SuiteError) as e:
        load_suite(path)
    assert str(path) in str(e.value) and message in str(e.value) and "entries[0]" in str(e.value)


def test_duplicate_entry_names_and_unknown_suites_fail(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text(yaml.safe_dump({"name": "d", "entries": [{"env": "toy-calculator-v0"}] * 2}))
    with pytest.raises(SuiteError, match="unique 'name'"):
        load_suite(path)
    with pytest.raises(SuiteError, match="not a built-in suite"):
        load_suite("nope")


def test_suites_and_suite_show_commands():
    listed = runner.invoke(app, ["suites", "--json"])
    assert listed.exit_code == 0, listed.output
    assert {r["name"] for r in json.loads(listed.output)} >= {"toy", "mixed"}
    shown = runner.invoke(app, ["suite", "show", "toy", "--json"])
    assert shown.exit_code == 0, shown.output
    assert [e["kwargs"]["style"] for e in json.loads(shown.output)["entries"]] == ["expression", "word"]
    assert runner.invoke(app, ["suite", "show", "toy"]).exit_code == 0
    bad = runner.invoke(app, ["suite", "show", "nope"])
    assert bad.exit_code == 2 and "not a built-in suite" in bad.output


def test_the_levels_suite_holds_each_family_at_graded_difficulty():
    """Entries of one env at different levels (what the curriculum moves across): each entry's tasks are at its
    level, and no task id is shared between entries (tasks are routed to their entry's env by id)."""
    from rubricgym.envs.clinical.schema import load_kb

    levels = load_suite("levels")
    ops = {
        n: {
            t.prompt.count(" + ") + t.prompt.count(" - ") + t.prompt.count(" * ") + t.prompt.count(" / ")
            for t in levels.tasks(n)
        }
        for n in ("toy-1op", "toy-2op", "toy-3op")
    }
    assert ops == {"toy-1op": {1}, "toy-2op": {2}, "toy-3op": {3}}
    assert {n: {t.params["hops"] for t in levels.tasks(n)} for n in ("deepsearch-1hop", "deepsearch-3hop")} == {
        "deepsearch-1hop": {1},
        "deepsearch-3hop": {3},
    }
    kb = load_kb()
    assert {kb.conditions[t.hidden["condition"]].specialty for t in levels.tasks("clinical-cardiology")} == {
        "cardiology"
    }
    ids = [t.id for e in levels.entries for t in levels.tasks(e.name)]
    assert len(ids) == len(set(ids))
