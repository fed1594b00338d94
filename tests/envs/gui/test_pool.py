"""The browser pool and sessions against the real Chromium: isolation, recycling, crash and hang recovery."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from rubricgym.envs.gui import pool as pool_module
from rubricgym.envs.gui.pool import BrowserUnavailable, find_chromium
from rubricgym.envs.gui.session import ActionFailed, Session
from rubricgym.envs.gui.site import Site

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
    monkeypatch.setattr(pool_module, "HEADLESS_SHELL", "/nonexistent/chromium-headless-shell")
    monkeypatch.setattr(pool_module, "DEFAULT_CHROMIUM", "/nonexistent/chromium")
    monkeypatch.delenv("RUBRICGYM_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(BrowserUnavailable, match="apt-get install chromium"):
        find_chromium()


def test_the_headless_shell_is_preferred_over_the_full_browser(monkeypatch, tmp_path):
    shell, full = tmp_path / "chromium-headless-shell", tmp_path / "chromium"
    for exe in (shell, full):
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    monkeypatch.delenv("RUBRICGYM_CHROMIUM", raising=False)
    monkeypatch.setattr(pool_module, "HEADLESS_SHELL", str(shell))
    monkeypatch.setattr(pool_module, "DEFAULT_CHROMIUM", str(full))
    assert find_chromium() == str(shell)
    monkeypatch.setenv("RUBRICGYM_CHROMIUM", str(full))  # an explicit choice still wins
    assert find_chromium() == str(full)
    shell.unlink()
    monkeypatch.delenv("RUBRICGYM_CHROMIUM")
    assert find_chromium() == str(full)


@pytest.mark.slow
def test_the_node_driver_gets_the_memory_options(pool):
    """A 1 MB young generation, and no JIT for the bundled Node (read back from the driver's environment)."""
    pool.run(pool.browser())
    drivers = []
    for entry in Path("/proc").iterdir():
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            exe = (entry / "cmdline").read_bytes().split(b"\0")[0].decode()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and Path(exe).name == "node":
            drivers.append(entry)
    assert drivers, "no Node driver among this process's children"
    env = dict(kv.split(b"=", 1) for kv in (drivers[0] / "environ").read_bytes().split(b"\0") if b"=" in kv)
    options = env[b"NODE_OPTIONS"].decode().split()
    assert "--max-semi-space-size=1" in options
    assert ("--jitless" in options) == (not os.environ.get("PLAYWRIGHT_NODEJS_PATH")), options


def test_site_serves_only_its_files(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    s = Site("http://apps.test.local", tmp_path)
    served = s.file("http://apps.test.local/a.txt")
    assert served is not None and served[0] == b"x"
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


WRITE = """() => { localStorage.setItem('k', 'secret'); sessionStorage.setItem('s', 'secret'); document.cookie = 'c=1';
    document.getElementById('out').textContent = 'secret'; location.hash = '#/mine'; }"""
READ = """() => [localStorage.getItem('k'), sessionStorage.getItem('s'), document.cookie,
    document.getElementById('out').textContent, history.length].map(String).join('|')"""
FRESH = "null|null|||2"  # a new page's history: its first about:blank and the page


@pytest.mark.slow
def test_no_episode_sees_another_episodes_cookies_storage_dom_or_history(pool, site):
    """Every episode's page is new, on an origin no episode used before: opened ahead (a spare, adopted at the next
    reset) or opened then. Neither an episode running beside it nor the session's previous one shows through."""
    a, b = Session(pool, site), Session(pool, site)
    for s in (a, b):
        pool.run(s.open(site.origin + "/"))
    pool.run(a.evaluate(WRITE))
    assert pool.run(b.evaluate(READ)) == FRESH  # the episode beside it
    hits, origin = pool.spare_hits, a.origin
    pool.run(_open_ahead_and_wait(pool, a))
    pool.run(a.open(site.origin + "/"))  # the session's next episode, on the page opened ahead
    assert pool.spare_hits == hits + 1 and a.origin not in (origin, b.origin)
    assert pool.run(a.evaluate(READ)) == FRESH  # no storage, cookie, DOM or history of the last one
    pool.run(a.evaluate(WRITE))
    pool.run(b.open(site.origin + "/"))  # no spare ready: a page opened now, on a fresh origin all the same
    assert pool.run(b.evaluate(READ)) == FRESH and b.origin != a.origin
    for s in (a, b):
        pool.run(s.close())


async def _open_ahead_and_wait(pool, s: Session) -> None:
    s.settle()
    for tasks in list(pool.warming.values()):
        await asyncio.wait(tasks)


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
