"""The episode table reads lazily and filters what a user asks for; bad filter values say what is accepted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubricgym.viewer.index import RunIndex, StoreIndex
from rubricgym.viewer.runs import ViewerError, discover
from rubricgym.viewer.table import Query, QueryError, page, parse_query


def _index(path: Path) -> RunIndex:
    (run,) = discover(path)
    return RunIndex(run)


def test_discover_finds_each_kind_and_says_what_to_pass(runs, arena_run, tmp_path):
    kinds = {r.rid: r.kind for r in discover(runs)}
    assert kinds == {"oracle": "score", "random": "score"}
    (arena,) = discover(arena_run)
    assert arena.kind == "arena" and {s.agent for s in arena.stores} == {"oracle", "random"}
    with pytest.raises(ViewerError, match="holds no run directory"):
        discover(tmp_path)
    with pytest.raises(ViewerError, match="does not exist"):
        discover(tmp_path / "nope")


def test_first_page_reads_only_its_own_lines(runs, tmp_path, monkeypatch):
    big = tmp_path / "big"
    big.mkdir()
    lines = (runs / "random" / "trajectories.jsonl").read_text().splitlines()
    with (big / "trajectories.jsonl").open("w") as f:
        for k in range(400):
            d = json.loads(lines[k % len(lines)])
            d["id"] = f"t{k}"
            f.write(json.dumps(d) + "\n")
    parsed: list[int] = []
    real = StoreIndex._summarise
    monkeypatch.setattr(StoreIndex, "_summarise", lambda self, line: parsed.append(line) or real(self, line))
    index = _index(big)
    first = page(index, Query())
    assert first.total == 400 and first.pages == 8 and len(first.rows) == 50
    assert sorted(parsed) == list(range(50))  # not the other 350
    page(index, parse_query({"outcome": "solved"}))  # a filter needs every summary, once
    assert len(parsed) == 50 + 400


def test_filters_outcome_criterion_range_and_parse_errors(runs):
    index = _index(runs / "random")
    every = page(index, parse_query({"sort": "total", "desc": "1"}))
    assert every.total == 12
    failed = page(index, parse_query({"outcome": "unsolved"}))
    assert failed.total == 12 and all(not s.solved for s in failed.rows)
    assert page(_index(runs / "oracle"), parse_query({"outcome": "unsolved"})).total == 0
    unmet = page(index, parse_query({"criterion": "correct", "state": "unmet"}))
    assert unmet.total == 12 and all("correct" in s.unmet for s in unmet.rows)
    assert page(index, parse_query({"criterion": "correct", "state": "met"})).total == 0
    assert page(index, parse_query({"min_total": "0.5"})).total == 0
    with_errors = page(index, parse_query({"parse_errors": "yes"}))
    assert with_errors.total > 0 and all(s.parse_errors for s in with_errors.rows)
    clean = page(index, parse_query({"parse_errors": "no"}))
    assert with_errors.total + clean.total == 12


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"outcome": "won"}, "outcome must be one of solved"),
        ({"min_total": "abc"}, "min_total must be a number"),
        ({"sort": "colour"}, "sort must be one of"),
        ({"page": "0"}, "page must be a whole number"),
        ({"parse_errors": "maybe"}, "parse_errors must be yes or no"),
    ],
)
def test_bad_filter_values_say_what_is_accepted(params, message):
    with pytest.raises(QueryError, match=message):
        parse_query(params)


def test_a_live_run_s_new_lines_are_picked_up_and_a_torn_tail_waits(runs, tmp_path):
    live = tmp_path / "live"
    live.mkdir()
    lines = (runs / "oracle" / "trajectories.jsonl").read_text().splitlines(keepends=True)
    path = live / "trajectories.jsonl"
    path.write_text("".join(lines[:3]))
    index = _index(live)
    assert page(index, Query()).total == 3
    with path.open("a") as f:
        f.write(lines[3] + lines[4][:40])  # one whole line, one being written
    assert page(index, Query()).total == 4
    with path.open("a") as f:
        f.write(lines[4][40:])
    assert page(index, Query()).total == 5


def test_a_rescored_run_shows_the_new_totals(runs, tmp_path):
    import shutil

    run = tmp_path / "rescored"
    shutil.copytree(runs / "oracle", run)
    index = _index(run)
    assert {s.total for s in page(index, Query()).rows} == {1.0}
    lines = [json.loads(x) for x in (run / "scores.jsonl").read_text().splitlines()]
    for d in lines:
        d["total"] = 0.25
    fresh = run / "scores.new"
    fresh.write_text("".join(json.dumps(d) + "\n" for d in lines))
    fresh.replace(run / "scores.jsonl")  # as `rubricgym score` writes it: a new file in its place
    assert {s.total for s in page(index, Query()).rows} == {0.25}
    assert {s.total for s in page(index, parse_query({"sort": "total"})).rows} == {0.25}


def test_stored_verdicts_are_found_when_scores_are_not_in_trajectory_order(runs, tmp_path):
    import shutil

    run = tmp_path / "shuffled"
    shutil.copytree(runs / "random", run)
    lines = (run / "scores.jsonl").read_text().splitlines()
    (run / "scores.jsonl").write_text("\n".join(reversed(lines)) + "\n")
    rows = page(_index(run), Query()).rows
    ids = [json.loads(x)["id"] for x in (run / "trajectories.jsonl").read_text().splitlines()]
    assert [s.id for s in rows] == ids and all("correct" in s.unmet for s in rows)
