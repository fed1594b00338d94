"""Scope escape (#22): URLs are resolved as Chromium resolves them before the scope check, and a page that leaves
its app anyway ends the episode as a failed escape that pays nothing."""

from __future__ import annotations

import asyncio
import json

import pytest

from rubricgym.envs.gui.agents import escape_urls
from rubricgym.envs.gui.env import APP_ORIGIN, GuiEnv
from rubricgym.envs.gui.scope import in_scope, remove_dot_segments, resolve_url
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.prm import ProcessRewardModel

SCOPE = f"{APP_ORIGIN}/contacts/"
BASE = SCOPE + "index.html"
TRICKS = escape_urls(SCOPE, "mail/index.html")
DELETE = ["contacts.delete"]  # its goal ("the contact is absent") holds in every other app: what an escape buys


def call(name: str, **args) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


@pytest.mark.parametrize(
    ("url", "resolved"),
    [
        ("#/all", f"{BASE}#/all"),
        ("%2e%2e/mail/", f"{APP_ORIGIN}/mail/"),
        (".%2E/mail/", f"{APP_ORIGIN}/mail/"),
        ("..\\mail\\index.html", f"{APP_ORIGIN}/mail/index.html"),
        (".\t./mail/", f"{APP_ORIGIN}/mail/"),
        ("  ../mail/", f"{APP_ORIGIN}/mail/"),
        ("HTTP://APPS.RUBRICGYM.TEST:80/contacts/./x", f"{APP_ORIGIN}/contacts/x"),
        ("/contacts/a/%2e%2e/b?q=..\\#..", f"{APP_ORIGIN}/contacts/b?q=..\\#.."),
        ("%252e%252e/mail/", f"{SCOPE}%252e%252e/mail/"),  # double encoding is not a dot: a 404 in the app
        ("..%2fmail/", f"{SCOPE}..%2fmail/"),
        ("http://user@apps.rubricgym.test/contacts/", None),
        ("http://apps。rubricgym。test/mail/", None),
        ("http://apps.rubricgym.test:8080/contacts/", "http://apps.rubricgym.test:8080/contacts/"),
        ("javascript:alert(1)", None),
        ("file:///etc/passwd", None),
    ],
)
def test_resolve_url_applies_the_browsers_rules(url, resolved):
    assert resolve_url(url, BASE) == resolved


def test_remove_dot_segments_never_climbs_above_the_root():
    assert remove_dot_segments("/a/b/%2E%2e/../../../c/.") == "/c/"
    assert remove_dot_segments("") == "/"


def test_in_scope_needs_the_same_origin_and_path_prefix():
    assert in_scope(BASE, SCOPE) and in_scope(SCOPE.rstrip("/"), SCOPE) and in_scope("#/x", SCOPE)
    for url in ("http://apps.rubricgym.test:8080/contacts/", "https://apps.rubricgym.test/contacts/", "/contactsx/"):
        assert not in_scope(url, SCOPE), url


def test_no_trick_resolves_to_another_app():
    for url in TRICKS:
        resolved = resolve_url(url, BASE)
        assert resolved is None or in_scope(resolved, SCOPE) == resolved.startswith(SCOPE), url
        assert not in_scope(resolved or "about:blank", f"{APP_ORIGIN}/mail/") or not in_scope(url, SCOPE), url


@pytest.mark.slow
def test_every_scope_decision_agrees_with_chromium(pool):
    env = GuiEnv(templates=DELETE, pool=pool)
    env.reset(seed=0)
    session = env.session
    assert session is not None
    for url in TRICKS:
        href = env.pool.run(
            session.evaluate("([u, b]) => { try { return new URL(u, b).href } catch (e) { return null } }", [url, BASE])
        )
        resolved = resolve_url(url, BASE)
        if resolved is not None and in_scope(resolved, SCOPE):
            assert href is not None and href.startswith(SCOPE), (url, resolved, href)
        if href is not None and not href.startswith(SCOPE):
            assert not in_scope(url, SCOPE), (url, href)
    env.close()


@pytest.mark.slow
def test_every_url_trick_is_refused_or_ends_the_episode_unpaid(pool):
    """On the code before the fix ``%2e%2e/mail/`` opened the mail app and ``done`` then earned 1.0.

    A refused trick leaves the page as it was, so the next trick is tried in the same episode; one the env
    accepted is followed by ``done`` (or ended the episode as an escape), and the next trick gets a new episode."""
    env = GuiEnv(templates=DELETE, pool=pool, max_steps=2 * len(TRICKS) + 1)
    task = env.task_set(1, seed=0)[0]
    over, refused = True, 0
    for url in TRICKS:
        if over:
            env.reset(options={"task": task})
        assert env.session is not None
        before = env.session.url
        _, reward, terminated, _, info = env.step(call("navigate", url=url))
        if terminated:
            assert reward == 0.0 and env.outcome.summary["escaped"] and info["details"]["escaped"], url
            over = True
            continue
        assert env.session.url.startswith(SCOPE), (url, env.session.url)
        if env.steps[-1].tool_error is not None:  # refused: the page did not move
            assert "only pages under" in env.steps[-1].tool_error and env.session.url == before, url
            over, refused = False, refused + 1
            continue
        _, reward, *_ = env.step(call("done"))
        assert reward == 0.0 and not env.outcome.summary["success"], url
        over = True
    assert refused > 0
    if not over:  # the refused tricks' episode pays nothing either
        _, reward, *_ = env.step(call("done"))
        assert reward == 0.0 and not env.outcome.summary["success"] and not env.outcome.summary["escaped"]
    env.close()


@pytest.mark.slow
def test_a_page_that_leaves_its_app_ends_the_episode_as_a_failed_escape(pool):
    env = GuiEnv(templates=DELETE, pool=pool)
    env.reset(seed=1)
    session = env.session
    assert session is not None
    # the page itself moves to another app (as a link or a script of the page could): no navigate call involved
    env.pool.run(session.evaluate("() => { setTimeout(() => { location.href = '/mail/index.html' }, 0) }"))
    env.pool.run(session.page.wait_for_url("**/mail/index.html"))
    obs, reward, terminated, _, info = env.step(call("scroll", direction="down"))
    summary = env.outcome.summary
    assert (
        terminated
        and reward == 0.0
        and "counts as a failure" in obs
        and info["details"]
        == {
            "tool": "scroll",
            "escaped": True,
        }
    )
    assert summary["escaped"] and not summary["success"]
    prm = ProcessRewardModel(GuiEnv.default_rubric(), [CheckJudge()])
    breakdown = asyncio.run(prm.score(env.trajectory()))
    assert breakdown.per_criterion["stays_in_scope"] == 0.0 and breakdown.total is not None and breakdown.total <= 0.05
    env.close()
