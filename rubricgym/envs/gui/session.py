"""One episode's browser context and page, isolated: its own storage, only its site's origin, no downloads or popups.

Every method is a coroutine for the pool's loop (``BrowserPool.run``/``arun``). Actions take element refs from
the last ARIA snapshot (``page.aria_snapshot(mode="ai")`` labels elements ``[ref=eN]``); an unknown or stale ref
raises ``ActionFailed`` with a message for the agent. A page that crashed, a browser that died and a page that
stopped answering are recovered: the context is re-opened and ``restore`` puts the app back in its last state.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from rubricgym.envs.gui import spares
from rubricgym.envs.gui.pool import BrowserPool
from rubricgym.envs.gui.site import Site

REF = re.compile(r"\[ref=(e\d+)\]")
Restore = Callable[["Session"], Awaitable[None]]


OPTIONS_JS = r"""(el, want) => {
    const select = el.tagName === "SELECT" ? el : el.control;
    if (!select || select.tagName !== "SELECT") return null;
    const norm = (t) => t.replace(/\u200b/g, "").trim().replace(/\s+/g, " ");
    const labels = Array.from(select.options, (o) => o.label);
    return labels.some((l) => l === want || norm(l) === norm(want)) ? [] : labels;
}"""
"""The option labels of a drop-down when none matches ``want`` as Playwright's ``select_option(label=)`` matches
(exactly or with whitespace normalised); ``[]`` when one does; ``null`` for an element that is no drop-down."""
SETTLE_JS = "() => new Promise(r => { requestAnimationFrame(() => setTimeout(r, 0)); setTimeout(r, 100); })"


class ActionFailed(Exception):
    """A browser action could not be done; the message is written for the agent."""


class _Recovered(ActionFailed):
    """The page was lost and has been recovered; the call that saw it fail did not happen."""


class Session:
    """One episode's page on a pool's shared browser.

    A site served from files gets a page in the pool's shared context, on an origin of its own (a private
    registrable domain, so no storage, cookie or site is shared with another episode; the agent sees the site's
    canonical origin). Every episode gets a new page on a new origin: one the pool opened ahead (a spare, never
    shown to an episode) or one opened then; the last episode's page is closed off the hot path. A loopback site,
    whose origin is fixed, gets a context of its own whose page is recycled with its storage wiped.
    """

    def __init__(
        self, pool: BrowserPool, site: Site, *, action_timeout: float = 5.0, viewport: tuple[int, int] = (1024, 720)
    ):
        self.pool, self.site = pool, site
        self.action_timeout = action_timeout
        self.viewport = viewport
        self.context: Any = None
        self.page: Any = None
        self.generation = -1
        self.crashed = False
        self.blocked: list[str] = []  # requests refused (other origins), for isolation tests and the record
        self.refs: set[str] = set()  # refs of the last snapshot
        self.seen_refs: set[str] = set()  # refs of every snapshot since the page opened
        self.restore: Restore | None = None
        self.recoveries = 0
        self.recycled = 0
        self.origin = self.site.origin
        self.opened_url = ""  # the URL the episode's page was opened at (the key of its spares)
        self._finished: list[tuple[Any, str]] = []  # earlier episodes' pages (and origins) still to close

    @property
    def shared(self) -> bool:
        return self.site.root is not None

    def canonical(self, url: str) -> str:
        """``url`` as the agent sees it (on the site's origin)."""
        return self.site.origin + url[len(self.origin) :] if url.startswith(self.origin) else url

    def actual(self, url: str) -> str:
        return self.origin + url[len(self.site.origin) :] if self.site.owns(url) else url

    @property
    def url(self) -> str:
        return self.canonical(self.page.url) if self.page is not None else ""

    # ---- lifecycle --------------------------------------------------------------------------------------

    async def open(self, url: str) -> None:
        """The page at ``url`` (on the site's origin) with no cookies, no storage and no history.

        A file-served site: a fresh page on a fresh origin, adopted from the pool's spares when one was opened
        ahead at ``url``; this session's previous page is closed in the background. A loopback site: a live page
        of this session is recycled (its cookies and storage cleared, a new page on the same context), which is
        cheaper than a new context; after a crash or relaunch everything is made anew.
        """
        if self.site.root is not None and not self.site.owns(url):
            raise ValueError(f"{url!r} is not on the site {self.site.origin}")
        if self.shared:
            await self._open_shared(url)
            return
        if await self._recycle(url):
            return
        await self.close()
        browser = await self.pool.browser()
        self.generation = self.pool.generation
        self.context = await browser.new_context(accept_downloads=False, service_workers="block")
        await self.context.route("**/*", self.route)
        await self.context.route_web_socket(re.compile(".*"), self.route_ws)
        self.context.on("page", lambda page: asyncio.ensure_future(self.pool.refuse_popup(page, self)))
        self.page = await self._new_page()
        await self.page.goto(self.actual(url), wait_until="load")

    # ---- file-served sites: a fresh page and origin per episode, opened ahead when the pool can --------------

    async def _open_shared(self, url: str) -> None:
        self._retire_pages()  # a previous open whose episode never called settle()
        if self.page is not None:
            self.pool.owners.pop(self.page, None)  # from now on every request of the old page is refused
            self._finished.append((self.page, self.origin))
        self.page = None
        self.opened_url = url
        spare = await spares.take(self) if self.pool.spare_pages else None
        if spare is not None:
            spares.adopt(self, spare)
            return
        await self.open_fresh(url)

    async def open_fresh(self, url: str) -> Session:
        """A new page on a new private origin of the shared context, at ``url``."""
        await self.pool.browser()
        self.generation = self.pool.generation
        self.context = await self.pool.shared_context()
        self.origin = self.pool.private_origin(self)
        self.page = await self._new_page()
        await self.page.goto(self.actual(url), wait_until="load")
        return self

    def alive(self) -> bool:
        """Whether this session's page is open and usable on the pool's current browser."""
        browser = self.pool._browser
        return (
            self.page is not None
            and not self.page.is_closed()
            and not self.crashed
            and self.generation == self.pool.generation
            and browser is not None
            and browser.is_connected()
        )

    def _retire_pages(self) -> None:
        """Close finished episodes' pages in the background; their origins are never used again."""
        finished, self._finished = self._finished, []
        for page, origin in finished:
            self.pool.owners.pop(page, None)
            self.pool.background(_retire(page, origin))

    def settle(self, open_ahead: bool = True) -> None:
        """Work an episode start leaves for later (pool loop; call it once the first observation is read): close the
        last episode's page and, with ``open_ahead``, open a spare for the next episode at this session's URL (see
        ``spares.open_ahead``). Only for pages whose start does not depend on when they were loaded (a spare may
        wait minutes before an episode adopts it)."""
        self._retire_pages()
        if open_ahead and self.shared and self.pool.spare_pages > 0 and self.opened_url and self.alive():
            spares.open_ahead(self)

    async def _new_page(self) -> Any:
        """A page with a fresh history (so go_back never reaches another episode's pages)."""
        self.page = None
        self.refs, self.seen_refs = set(), set()
        page = await self.context.new_page()
        self.pool.owners[page] = self
        await page.set_viewport_size(dict(zip(("width", "height"), self.viewport, strict=True)))
        page.set_default_timeout(self.action_timeout * 1000)
        self.crashed = False
        page.on("crash", self.on_crash)
        page.on("dialog", lambda d: asyncio.ensure_future(d.dismiss()))
        return page

    async def _recycle(self, url: str) -> bool:
        page = self.page
        if not self.alive():
            return False
        try:
            await asyncio.wait_for(self._wipe(page, url), self.action_timeout + 5)
        except Exception:  # noqa: BLE001 - an unusable page is replaced by a new context
            return False
        self.recycled += 1
        return True

    async def _wipe(self, page: Any, url: str) -> None:
        """Cookies and local storage cleared, a new page (new history, empty session storage) at ``url``."""
        await self.context.clear_cookies()  # the context is this session's alone
        if page.url.startswith(self.origin):  # every page of the episode is on its origin (others are blocked)
            await page.evaluate("() => { try { localStorage.clear(); } catch (e) {} }")
        await self._close_page(page)
        self.page = await self._new_page()
        await self.page.goto(self.actual(url), wait_until="load")

    async def _close_page(self, page: Any) -> None:
        self.pool.owners.pop(page, None)
        with contextlib.suppress(Exception):  # the browser is gone or hung; the pool relaunches it
            await asyncio.wait_for(page.close(), 5)

    async def close(self) -> None:
        self._retire_pages()
        context, page, self.context, self.page = self.context, self.page, None, None
        if page is not None:
            await self._close_page(page)
        if context is not None and not self.shared:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(context.close(), 5)

    async def route(self, route: Any) -> None:
        """Serve a request of this session's page: the site's files or its loopback server; others aborted."""
        url = route.request.url
        if not url.startswith(self.origin + "/") and url != self.origin:
            self.blocked.append(url)
            await route.abort("blockedbyclient")
        elif self.site.root is None:
            await route.continue_()
        elif (found := self.site.file(self.canonical(url))) is None:
            await route.fulfill(status=404, body="not found", content_type="text/plain")
        else:
            await route.fulfill(status=200, body=found[0], content_type=found[1])

    async def route_ws(self, ws: Any) -> None:
        if not ws.url.replace("ws://", "http://").replace("wss://", "https://").startswith(self.origin + "/"):
            self.blocked.append(ws.url)
            await ws.close()
        else:
            ws.connect_to_server()

    def on_crash(self, page: Any) -> None:
        self.crashed = True

    async def ensure(self) -> None:
        """Re-open the page on a live browser if it crashed or the browser was relaunched."""
        if self.alive():
            return
        self.recoveries += 1
        url = self.url if self.page is not None and not self.crashed else ""
        if self.pool._browser is None or not self.pool._browser.is_connected():
            await self.pool.relaunch("browser disconnected")
        await self.open(url if self.site.owns(url) else self.site.origin + "/")
        if self.restore is not None:
            await self.restore(self)

    async def _unresponsive(self) -> bool:
        try:
            await asyncio.wait_for(self.page.evaluate("1"), 2)
            return False
        except Exception:  # noqa: BLE001 - any failure means the page cannot be used
            return True

    async def guarded(self, what: str, fn: Callable[[Any], Awaitable[Any]], retry: bool = False) -> Any:
        """Run ``fn(page)`` with the per-action timeout; crashes and hangs are recovered, then reported.

        ``retry``: ``fn`` only reads the page, so after a crash it is run once more on the recovered page.
        """
        try:
            return await self._guarded(what, fn)
        except _Recovered as e:
            if retry:
                return await self._guarded(what, fn)
            raise ActionFailed(str(e)) from e

    async def _guarded(self, what: str, fn: Callable[[Any], Awaitable[Any]]) -> Any:
        await self.ensure()
        try:
            return await asyncio.wait_for(fn(self.page), self.action_timeout + 1)
        except ActionFailed:
            raise
        except Exception as e:  # noqa: BLE001 - Playwright errors become observations for the agent
            if isinstance(e, TimeoutError) or type(e).__name__ == "TimeoutError":  # ours or Playwright's
                if self.crashed or await self._unresponsive():
                    await self._recover_hang()
                    raise _Recovered(f"{what}: the page stopped responding and was reloaded from its last state") from e
                raise ActionFailed(f"{what}: timed out after {self.action_timeout:g}s") from e
            if self.crashed or self.page.is_closed() or not self.pool._browser.is_connected():
                await self.ensure()
                raise _Recovered(f"{what}: the page crashed and was reloaded from its last state") from e
            raise ActionFailed(f"{what}: {_first_line(e)}") from e

    async def _recover_hang(self) -> None:
        self.crashed = True
        try:
            await asyncio.wait_for(self.close(), 6)
        except TimeoutError:
            await self.pool.relaunch("hung browser")
        await self.ensure()

    # ---- observation ------------------------------------------------------------------------------------

    async def snapshot(self) -> str:
        """The page's ARIA snapshot with ``[ref=eN]`` labels; remembers which refs exist now."""
        text = await self.guarded("snapshot", lambda p: p.aria_snapshot(mode="ai"), retry=True)
        self.refs = set(REF.findall(text))
        self.seen_refs |= self.refs
        return text

    async def screenshot(self, quality: int = 60) -> str:
        async def shoot(page: Any) -> bytes:
            await page.bring_to_front()  # a screenshot waits for a frame too (see ``act``)
            data: bytes = await page.screenshot(type="jpeg", quality=quality)
            return data

        data = await self.guarded("screenshot", shoot, retry=True)
        return base64.b64encode(data).decode()

    async def evaluate(self, expression: str, arg: Any = None) -> Any:
        return await self.guarded("evaluate", lambda p: p.evaluate(expression, arg), retry=True)

    # ---- actions ----------------------------------------------------------------------------------------

    async def locate(self, ref: str) -> Any:
        """The element ``ref`` names, or ``ActionFailed`` saying the ref is unknown or stale."""
        ref = ref.strip().strip("[]").removeprefix("ref=")
        if not REF.fullmatch(f"[ref={ref}]"):
            raise ActionFailed(f"{ref!r} is not an element ref; refs look like e12 (from [ref=e12] in the snapshot)")
        loc = self.page.locator(f"aria-ref={ref}")
        if await self.guarded("locate", lambda p: loc.count()) == 0:
            if ref in self.seen_refs:
                raise ActionFailed(
                    f"ref {ref} is stale: that element is no longer on the page; use a ref from the current page below"
                )
            raise ActionFailed(f"ref {ref} is not in the current snapshot")
        return loc

    async def locate_text(self, text: str, index: int = 0) -> Any:
        """The ``index``-th visible element (page order) whose own text is exactly ``text`` (spaces collapsed),
        for text the snapshot shows without a ref, such as a link-like span inside a paragraph."""
        loc = self.page.get_by_text(text, exact=True).filter(visible=True)
        count = await self.guarded("locate", lambda p: loc.count())
        if count == 0:
            raise ActionFailed(
                f"no visible element shows exactly the text {text!r}; copy a whole text as the page snapshot shows it"
            )
        if index >= count:
            raise ActionFailed(f"{count} visible element(s) show {text!r}: index must be 0 to {count - 1}")
        return loc.nth(index)

    async def act(self, name: str, **args: Any) -> None:
        """Do one browser action (click, click_text, fill, type, press, select, scroll, hover, go_back, navigate)."""
        ms = self.action_timeout * 1000
        if name in ("click", "fill", "select", "hover"):
            loc = await self.locate(args["ref"])
            run = {
                "click": lambda p: loc.click(timeout=ms),
                "fill": lambda p: loc.fill(args["text"], timeout=ms),
                "select": lambda p: _select(loc, args["option"], ms),
                "hover": lambda p: loc.hover(timeout=ms),
            }[name]
        elif name == "click_text":
            target = await self.locate_text(args["text"], args.get("index", 0))
            run = lambda p: target.click(timeout=ms)  # noqa: E731
        elif name == "type":
            run = lambda p: p.keyboard.type(args["text"])  # noqa: E731
        elif name == "press":
            run = lambda p: p.keyboard.press(args["key"])  # noqa: E731
        elif name == "scroll":
            dy = {"down": 400, "up": -400}.get(args["direction"], 0)
            dx = {"right": 400, "left": -400}.get(args["direction"], 0)
            run = lambda p: p.mouse.wheel(dx, dy)  # noqa: E731
        elif name == "go_back":
            run = lambda p: p.go_back(timeout=ms)  # noqa: E731
        elif name == "navigate":
            if not self.site.owns(args["url"]):
                raise ActionFailed(f"navigate: only pages of this app ({self.site.origin}/...) can be opened")
            run = lambda p: p.goto(self.actual(args["url"]), timeout=ms)  # noqa: E731
        else:
            raise ActionFailed(f"unknown action {name!r}")

        async def run_and_settle(page: Any) -> None:
            # the acting page becomes the browser's front tab: a tab behind a later-opened one (a spare, another
            # episode's page) can stop getting animation frames, and Playwright's actionability wait ("stable":
            # the same box over two frames) then took ~2 s per click instead of ~30 ms (~5 ms for this call)
            await page.bring_to_front()
            await run(page)
            # let the page react before it is observed: a hash route renders on 'hashchange', a task queued after
            # the click returns; one animation frame plus one macrotask drains it
            await page.evaluate(SETTLE_JS)

        await self.guarded(name, run_and_settle)


async def _select(loc: Any, option: str, ms: float) -> None:
    """Choose ``option`` of the drop-down ``loc``; an option it lacks fails at once, naming those it has
    (Playwright's ``select_option`` would wait the whole action timeout for the option to appear)."""
    labels = await loc.evaluate(OPTIONS_JS, option, timeout=ms)
    if labels:
        shown = ", ".join(repr(label) for label in labels[:20]) + (", ..." if len(labels) > 20 else "")
        raise ActionFailed(f"select: the drop-down has no option {option[:100]!r}; its options are {shown}")
    await loc.select_option(label=option, timeout=ms)


async def _retire(page: Any, origin: str) -> None:
    """Close a finished episode's page, then drop its origin's cookies from the shared context."""
    with contextlib.suppress(Exception):  # the browser may be gone or relaunched
        await asyncio.wait_for(page.close(), 5)
        await page.context.clear_cookies(domain=urlsplit(origin).hostname)


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
