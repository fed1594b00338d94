"""No page shows a task's hidden data unless the viewer is started with --show-hidden: a secret planted in every
task's ``hidden`` appears in no exported page, and a judge's rationale stating the expected answer is masked."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from rubricgym.viewer.cli import register
from rubricgym.viewer.episode import MASK, Redactor
from tests.viewer.conftest import SECRET


def _app():
    import typer

    app = typer.Typer()
    register(app)
    app.command("noop", hidden=True)(lambda: None)  # two commands: `view` is then named on the command line
    return app


def _export(path, out, *extra):
    r = CliRunner().invoke(_app(), ["view", str(path), "--export", str(out), *extra])
    assert r.exit_code == 0, r.output
    return {p: p.read_text() for p in out.rglob("*.html")}


def test_no_exported_page_shows_hidden_values_without_show_hidden(runs, arena_run, tmp_path):
    pages = _export(runs, tmp_path / "plain")
    assert len(pages) > 20
    leaks = [str(p) for p, text in pages.items() if SECRET in text]
    assert not leaks, f"hidden value shown on {leaks[:3]}"
    answers = {
        str(json.loads(line)["task"]["hidden"]["answer"])
        for line in (runs / "oracle" / "trajectories.jsonl").read_text().splitlines()
    }
    episode = next(t for p, t in pages.items() if "/r/random/ep-" in str(p) and "expected" in t)
    assert f"expected {MASK}" in episode  # the check's rationale names the answer: masked
    assert not any(f"expected {a}" in episode for a in answers)
    assert "--show-hidden" in episode  # the page says how to see it
    arena_pages = _export(arena_run, tmp_path / "arena")
    for text in arena_pages.values():
        assert "expected " + MASK in text or "expected" not in text


def test_show_hidden_shows_them(runs, tmp_path):
    pages = _export(runs, tmp_path / "shown", "--show-hidden")
    assert any(SECRET in text for text in pages.values())


def test_redactor_masks_hidden_values_in_what_a_judge_wrote():
    red = Redactor({"answer": 68, "city": "Montevideo", "steps": ["7 * 11"]})
    assert red.text("I think Montevideo, 68") == "I think Montevideo, 68"  # the agent's own words
    assert red.judged("expected 68, got 680; city Montevideo") == f"expected {MASK}, got 680; city {MASK}"
    assert Redactor({"answer": 68}, show=True).judged("expected 68") == "expected 68"
