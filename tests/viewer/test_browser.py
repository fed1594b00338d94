"""The viewer in the real Chromium: a training run, a scored run and an arena, clicked through as a user would
(leaderboard -> match -> a step's verdict; filter to failed episodes), asserting the text on the page and keeping a
screenshot of every page (``$RUBRICGYM_ARTIFACTS/viewer`` when set, else the test's tmp dir)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.viewer.conftest import SECRET

CHROMIUM = "/usr/bin/chromium"


def _browser_or_skip() -> str:
    exe = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    try:
        import playwright  # noqa: F401
    except ImportError:
        exe = None
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("CI must have Debian chromium and playwright")
        pytest.skip("needs Debian chromium (`apt-get install chromium`) and playwright")
    return exe


class Server:
    """``create_app`` served by uvicorn on a free loopback port in a thread."""

    def __init__(self, path: Path, show_hidden: bool = False):
        import uvicorn

        from rubricgym.viewer.app import create_app

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(create_app(path, show_hidden), port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "viewer did not start in 20 s"
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    base = os.environ.get("RUBRICGYM_ARTIFACTS")
    out = Path(base) / "viewer" if base else tmp_path / "shots"
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture
def page() -> Iterator:
    exe = _browser_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe)
        try:
            yield browser.new_page(viewport={"width": 1300, "height": 900})
        finally:
            browser.close()


@pytest.mark.slow
def test_arena_leaderboard_to_match_to_a_step_s_verdict(arena_run, page, shots):
    with Server(arena_run) as url:
        page.goto(url + "/")
        page.click("#to-leaderboard")
        rows = page.locator("#leaderboard tr")
        assert rows.nth(1).inner_text().split("\t")[1] == "oracle"
        assert "Why Bradley-Terry and Elo differ" in page.inner_text("#why-bt-elo")
        page.screenshot(path=shots / "arena-leaderboard.png", full_page=True)
        page.locator("#matches a.match-link", has_text="oracle vs random").first.click()
        assert "Winner: oracle" in page.inner_text("#match-result")
        assert page.locator(".order h3").all_inner_texts() == [
            "Order 1: oracle shown first, random second",
            "Order 2: random shown first, oracle second",
        ]
        page.screenshot(path=shots / "arena-match.png", full_page=True)
        page.locator("#side-b a.open-episode").click()
        verdict = page.locator("#step-0 .verdict").first
        verdict.wait_for(state="visible", timeout=10000)
        assert verdict.locator(".badge").inner_text() in ("met", "unmet", "n/a", "error", "partial")
        assert "judged by" in verdict.inner_text()
        page.screenshot(path=shots / "arena-episode.png", full_page=True)


@pytest.mark.slow
def test_the_export_opens_from_files_and_its_links_work(arena_run, page, shots, tmp_path):
    from rubricgym.viewer.export import export
    from rubricgym.viewer.site import Site

    counts = export(Site(arena_run), tmp_path / "site")
    assert counts["matches"] == 3
    requests: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    page.goto((tmp_path / "site" / "index.html").as_uri())
    page.click("#to-leaderboard")
    assert page.locator("#leaderboard tr").count() == 3
    page.locator("#matches a.match-link").first.click()
    assert "Winner: oracle" in page.inner_text("#match-result")
    page.locator("#side-a a.open-episode").click()
    page.locator("#step-0 .verdict").first.wait_for(state="visible", timeout=10000)
    page.go_back()
    page.go_back()
    page.click("text=random")  # the leaderboard's agent name jumps to its matches
    assert all(u.startswith("file://") for u in requests), [u for u in requests if not u.startswith("file://")]
    page.screenshot(path=shots / "export-arena.png", full_page=True)


@pytest.mark.slow
def test_scored_run_filter_to_failed_episodes_and_read_verdicts(runs, page, shots):
    with Server(runs) as url:
        page.goto(url + "/")
        assert page.locator("#runs tr").count() == 3
        page.click("text=random")
        page.click("text=Episodes (12)")
        page.select_option("#f-outcome", "unsolved")
        page.click("#apply")
        assert "12 episode(s) match" in page.inner_text("#count")
        outcomes = page.locator("#episodes tbody .badge").all_inner_texts()
        assert outcomes and set(outcomes) <= {"failed", "truncated", "unfinished"}
        page.screenshot(path=shots / "episodes-failed.png", full_page=True)
        page.locator("#episodes tbody a").first.click()
        body = page.inner_text("body")
        assert "Trajectory-level criteria" in body and "correct" in body and "Aggregation" in body
        assert "stored verdicts (scores.jsonl)" in body
        assert SECRET not in page.content()
        assert "expected ‹hidden›" in body
        page.set_viewport_size({"width": 1300, "height": 820})
        page.screenshot(path=shots / "episode.png")
        page.goto(url + "/r/oracle/episodes?outcome=unsolved")
        assert "0 episode(s) match" in page.inner_text("#count")
        page.goto(url + "/r/oracle/episodes?outcome=won")
        assert "outcome must be one of" in page.inner_text("body")


@pytest.mark.slow
def test_training_dashboard_group_and_diff(train_run, page, shots):
    with Server(train_run) as url:
        page.goto(url + "/")
        page.click("text=Training dashboard")
        panels = page.locator(".panel").evaluate_all("els => els.map(e => e.dataset.panel)")
        assert "reward" in panels and "solve" in panels
        assert "kl" not in panels  # KL is off (beta 0): no flat panel
        assert "KL to reference" in page.inner_text("#panels-off")
        ticks = page.locator("#chart-reward text.xtick").all_text_contents()
        assert ticks and all(t.lstrip("-").isdigit() for t in ticks)  # integer steps
        page.screenshot(path=shots / "dashboard.png", full_page=True)
        # the run goes on: the open page follows the run directory without a reload
        assert "3 steps read" in page.inner_text("#updated")
        last = json.loads((train_run / "metrics.jsonl").read_text().splitlines()[-1])
        last = last if last.get("kind") == "train" else {"kind": "train", "reward_mean": 0.0}
        with (train_run / "metrics.jsonl").open("a") as f:
            f.write(json.dumps({**last, "step": 4, "monitor/alarm": "planted alarm"}) + "\n")
        page.wait_for_function("document.getElementById('updated').innerText.includes('4 steps read')", timeout=20000)
        assert "planted alarm" in page.inner_text("#alarms")
        assert page.locator("#chart-reward line.alarm").count() == 1
        page.goto(url + "/r/run/episodes")
        page.locator("#episodes tbody a").first.click()
        page.click("#to-group")
        assert page.locator("#group tr").count() == 1 + 3
        advantages = [float(t) for t in page.locator("#group tr td:nth-child(4)").all_inner_texts()]
        assert abs(sum(advantages)) < 1e-6  # group-relative: they sum to zero
        assert "step" in page.inner_text("#diverged") or "same actions" in page.inner_text("#diverged")
        page.screenshot(path=shots / "group.png", full_page=True)
