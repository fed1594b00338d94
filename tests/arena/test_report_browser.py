"""The arena's HTML report opened in the real Chromium: every section renders, and a screenshot is taken."""

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubricgym.cli import app

CHROMIUM = "/usr/bin/chromium"


def _browser_or_skip() -> None:
    missing = []
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        missing.append("Debian chromium (`apt-get install chromium`)")
    try:
        import playwright  # noqa: F401
    except ImportError:
        missing.append("playwright (`pip install playwright`)")
    if missing:
        if os.environ.get("CI"):
            pytest.fail("CI must have " + " and ".join(missing))
        pytest.skip("needs " + " and ".join(missing))


@pytest.mark.slow
def test_arena_report_renders_in_chromium(tmp_path, small_suite_file, agents_file):
    _browser_or_skip()
    from playwright.sync_api import sync_playwright

    agents = agents_file(
        {"name": "oracle", "kind": "scripted", "agent": "oracle"},
        {"name": "random", "kind": "scripted", "agent": "random"},
        {"name": "random7", "kind": "scripted", "agent": "random", "seed": 7},
    )
    out = tmp_path / "arena"
    r = CliRunner().invoke(
        app,
        ["arena", "--suite", str(small_suite_file), "--agents", str(agents), "--out", str(out), "--resamples", "50"],
    )
    assert r.exit_code == 0, r.output
    rep = json.loads((out / "arena.json").read_text())
    shot = tmp_path / "arena.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium"))
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            requests: list[str] = []
            page.on("request", lambda req: requests.append(req.url))
            page.goto((out / "arena.html").resolve().as_uri())
            assert page.locator("#leaderboard tr").count() == 1 + len(rep["agents"])
            assert page.locator("#leaderboard tr").nth(1).inner_text().split("\t")[1] == "oracle"
            assert page.locator("svg#ratings circle").count() == len(rep["agents"])
            assert page.locator("svg#ratings line").first.bounding_box()["width"] >= 0
            assert page.locator("#heatmap td").count() == len(rep["agents"]) ** 2
            assert page.locator("#per-entry th").all_inner_texts()[1:] == ["toy", "ds"]
            example = page.locator("#example .traj")
            assert example.count() == 2 and example.first.is_visible()
            assert "winner" in page.locator("#example").inner_text()
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert requests == [(out / "arena.html").resolve().as_uri()]  # self-contained: nothing else is fetched
    assert shot.stat().st_size > 20_000
