"""The browser pool and sessions against the real Chromium: isolation, recycling, crash and hang recovery."""

from __future__ import annotations

import time

import pytest

from rubricgym.envs.gui import pool as pool_module
from rubricgym.envs.gui.pool import BrowserUnavailable, find_chromium
from rubricgym.envs.gui.session import ActionFailed, Session, Site

PAGE = """<!doctype html><title>Probe</title>
<button onclick="document.getElementById('out').textContent = 'clicked'">Go</button>
<button onclick="window.open('http://apps.test.local/popup.html')">Popup</button>
<button onclick="while (true) {}">Freeze</button>
<a href="/file.bin" download>Download</a>
<p id="out"></p><img src="http://example.com/pixel.png">
<script>fetch('http://example.com/beacon').catch(() => {}); fetch('https://8.8.8.8/').catch(() => {});</script>
"""


@pytest.fixture
def site(tmp_path):
    (tmp_path / "index.html").write_text(PAGE)
    (tmp_path / "file.bin").write_bytes(b"\0" * 100)
    return Site("http://apps.test.local", tmp_path)


def test_missing_chromium_says_how_to_install(monkeypatch):
    monkeypatch.setattr(pool_module, "DEFAULT_CHROMIUM", "/nonexistent/chromium")
    monkeypatch.delenv("RUBRICGYM_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(BrowserUnavailable, match="apt-get install chromium"):
        find_chromium()


def test_site_serves_only_its_files(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    s = Site("http://apps.test.local", tmp_path)
    assert s.file("http://apps.test.local/a.txt")[0] == b"x"
    assert s.file("http://apps.test.local/../../etc/passwd") is None
    assert not s.owns("http://apps.test.local.evil.com/")
    with pytest.raises(ValueError, match="loopback"):
        Site("http://example.com")


@pytest.mark.slow
def test_requests_to_other_origins_popups_and_downloads_are_refused(pool, site):
    s = Session(pool, site)
    pool.run(s.open(site.origin + "/"))
    pool.run(s.snapshot())
    blocked = " ".join(s.blocked)
    assert "example.com/pixel.png" in blocked and "example.com/beacon" in blocked and "8.8.8.8" in blocked
    pool.run(s.act("click", ref=_ref(pool, s, "Popup")))
    pool.run(s.act("click", ref=_ref(pool, s, "Download")))
    deadline = time.monotonic() + 10
    while "popup" not in s.blocked and time.monotonic() < deadline:  # popups are closed as they open
        time.sleep(0.05)
    assert "popup" in s.blocked
    while any(p not in pool.owners for p in s.context.pages) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(p in pool.owners for p in s.context.pages), "the popup page was closed"
    pool.run(s.close())


@pytest.mark.slow
def test_sessions_do_not_share_storage_and_recycling_wipes_it(pool, site):
    a, b = Session(pool, site), Session(pool, site)
    for s in (a, b):
        pool.run(s.open(site.origin + "/"))
    pool.run(a.evaluate("() => { localStorage.setItem('k', 'secret'); document.cookie = 'c=1'; }"))
    assert pool.run(b.evaluate("() => localStorage.getItem('k') + '|' + document.cookie")) == "null|"
    pool.run(a.open(site.origin + "/"))  # the next episode in the same session
    assert a.recycled == 1
    assert pool.run(a.evaluate("() => localStorage.getItem('k') + '|' + document.cookie")) == "null|"
    for s in (a, b):
        pool.run(s.close())


@pytest.mark.slow
def test_stale_and_unknown_refs_are_reported(pool, site):
    s = Session(pool, site)
    pool.run(s.open(site.origin + "/"))
    pool.run(s.snapshot())
    with pytest.raises(ActionFailed, match="not in the current snapshot"):
        pool.run(s.act("click", ref="e999"))
    with pytest.raises(ActionFailed, match="not an element ref"):
        pool.run(s.act("click", ref="Go button"))
    pool.run(s.close())


@pytest.mark.slow
def test_a_killed_browser_is_relaunched_and_sessions_restored(pool, site):
    a, b = Session(pool, site), Session(pool, site)
    restored = []

    async def restore(s: Session) -> None:
        restored.append(s)
        await s.page.evaluate("() => { document.getElementById('out').textContent = 'restored'; }")

    for s in (a, b):
        s.restore = restore
        pool.run(s.open(site.origin + "/"))
    launches = pool.launches
    pool.kill_processes()
    assert pool.run(a.evaluate("() => document.getElementById('out').textContent")) == "restored"
    assert pool.run(b.evaluate("() => document.getElementById('out').textContent")) == "restored"
    assert pool.launches == launches + 1 and restored == [a, b]
    for s in (a, b):
        pool.run(s.close())


@pytest.mark.slow
def test_a_hung_page_times_out_and_is_reopened(pool, site):
    s = Session(pool, site, action_timeout=2)
    pool.run(s.open(site.origin + "/"))
    pool.run(s.snapshot())
    with pytest.raises(ActionFailed, match="stopped responding|timed out"):
        pool.run(s.act("click", ref=_ref(pool, s, "Freeze")))
    pool.run(s.snapshot())
    pool.run(s.act("click", ref=_ref(pool, s, "Go")))  # the page works again
    assert pool.run(s.evaluate("() => document.getElementById('out').textContent")) == "clicked"
    pool.run(s.close())


def _ref(pool, s: Session, name: str) -> str:
    from rubricgym.envs.gui.agents import elements

    snap = pool.run(s.snapshot())
    return next(ref for _, n, ref in elements(snap) if n == name)
