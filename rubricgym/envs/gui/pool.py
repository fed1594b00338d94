"""The browser pool: one Playwright-driven Chromium per process, one context + page per episode.

Playwright objects belong to the event loop that made them, while envs are stepped from plain threads
(Gymnasium), from ``asyncio.run`` in a helper thread, or from a trainer's event loop. So the pool owns a private
event loop in a daemon thread and every browser operation runs there: ``pool.run(coro)`` blocks (the Gymnasium
face) and ``await pool.arun(coro)`` awaits from any other loop (rollouts). Many episodes share the one browser;
an episode is a ``Session`` (a browser context with its own storage, routes and page).

Reset cost: a new page on a fresh origin plus its navigation is most of an episode's start (tens to hundreds of
ms, more with many live pages on two cores). The pool keeps up to ``spare_pages`` pages already opened at a URL
an episode recently started from, each on an origin no episode has used, so the next reset at that URL adopts
one (``Session.open``) and is left with loading the task's state and reading the first observation; the spare is
replaced off the hot path (``Session.settle``). Only envs whose pages are static until an episode sets them up open
pages ahead (``BrowserEnv.open_ahead``).

Failures: a crashed browser (``disconnected``) or page (``crash``) and a hung one (an action past its timeout
whose page no longer answers a probe) are detected; the browser is killed and relaunched and every session
re-opens its page on the new browser from the app state it last read, so other episodes go on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import re
import shutil
import signal
import threading
import uuid
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

CHROMIUM_ENV = "RUBRICGYM_CHROMIUM"
HEADLESS_SHELL = "/usr/lib/chromium/chromium-headless-shell"
"""Debian's ``chromium-headless-shell``: Chromium's headless-only build (the "old headless" that Playwright itself
runs for headless Chromium). Preferred when installed: on Chromium 156 with 8 live episodes it holds ~100 MB less
than the full browser in headless mode (no separate network/storage utility process, a smaller browser process and
renderers), and runs the same pages, routes, ARIA snapshots and screenshots. The binary, not ``/usr/bin``'s
wrapper script, which waits on it in a shell process of its own."""
DEFAULT_CHROMIUM = "/usr/bin/chromium"
PLAYWRIGHT_DISABLED_FEATURES = (
    "AvoidUnnecessaryBeforeUnloadCheckSync",
    "DestroyProfileOnBrowserClose",
    "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable",
    "LensOverlay",
    "MediaRouter",
    "PaintHolding",
    "ThirdPartyStoragePartitioning",
    "AvoidCorsURLLoaderRestartOnRedirect",
    "OptimizationHints",
    "NetworkTimeServiceQuerying",
    "AimEnabled",
    "PreconnectToSearch",
)
"""Playwright's own ``--disable-features`` (1.65, ``chromiumSwitches.ts``). Chromium keeps only the last
``--disable-features`` switch, so ours must repeat them or they are silently enabled again."""
# --no-sandbox: Chromium's own sandbox needs user namespaces that containers and root lack; every page is ours.
# Site isolation off + a renderer-process limit: episodes' pages (each on its own private origin) share a few
# renderer processes, ~13 MB per extra episode instead of ~60 MB for a context with a process of its own.
# Measured on Chromium 156 (bench/gui.py, 8 live episodes, unique pages of the browser's process tree): the WebUI
# omnibox popup a headless browser preloads took a renderer of its own (~35 MB, and one of the renderer slots);
# the GPU (software compositing) and network services in the browser process save ~20 MB more.
# Not used: --disable-threaded-compositing (~7 MB per extra live page instead of ~13 on the headless shell) leaves
# actions timing out: the oracle failed the shop templates, and the run took minutes instead of seconds.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-dev-shm-usage",
    "--disable-gpu",
    "--in-process-gpu",
    "--disable-extensions",
    "--no-first-run",
    "--mute-audio",
    "--disable-background-networking",
    "--disable-sync",
    "--disable-site-isolation-trials",
    "--disable-features="
    + ",".join(
        (
            *PLAYWRIGHT_DISABLED_FEATURES,
            "IsolateOrigins",
            "site-per-process",
            "WebUIOmniboxPopup",
            "WebUIOmniboxAimPopup",
            "WebUIOmniboxFullPopup",
        )
    ),
    "--enable-features=CDPScreenshotNewSurface,SkipListAccountsWithoutGaiaCookies,NetworkServiceInProcess2",
)
DRIVER_NODE_OPTIONS = "--max-semi-space-size=1"
"""V8 option for Playwright's Node driver: a 1 MB young generation instead of up to 16 MB semi-spaces (~25 MB
less resident; the driver's allocations are small protocol messages)."""
BUNDLED_NODE_OPTIONS = "--jitless"
"""Added for the Node that Playwright bundles (not one named by ``$PLAYWRIGHT_NODEJS_PATH``: Node 20's built-in
``fetch`` needs WebAssembly, which ``--jitless`` removes): no JIT compilers, ~12 MB less resident (no compiled
code, fewer of the binary's pages mapped) for ~20 % more driver CPU, ~2 % of the browser side's (the driver relays
protocol messages; Chromium does the work)."""


class BrowserUnavailable(RuntimeError):
    """Chromium or Playwright is missing; the message says how to install it."""


def find_chromium(path: str | None = None) -> str:
    """The Chromium executable to drive: ``path``, ``$RUBRICGYM_CHROMIUM``, the headless shell (``HEADLESS_SHELL``),
    ``/usr/bin/chromium`` or on PATH."""
    for cand in (
        path,
        os.environ.get(CHROMIUM_ENV),
        HEADLESS_SHELL,
        DEFAULT_CHROMIUM,
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    raise BrowserUnavailable(
        f"Chromium not found (looked at $RUBRICGYM_CHROMIUM, {HEADLESS_SHELL}, {DEFAULT_CHROMIUM} and PATH). Install "
        "Debian's browser with `sudo apt-get install chromium-headless-shell` (lighter) or `sudo apt-get install "
        "chromium` (`make apt`), or point RUBRICGYM_CHROMIUM at a Chromium binary. `playwright install` "
        "is not needed: rubricgym drives the system Chromium."
    )


def _playwright() -> Any:
    try:
        from playwright.async_api import async_playwright  # lazy: playwright only when a browser starts
    except ImportError as e:
        raise BrowserUnavailable("the GUI env needs Playwright for Python: pip install 'rubricgym[gui]'") from e
    return async_playwright


def browser_available() -> str | None:
    """``None`` when Chromium and Playwright are both installed, else why not (for test skips)."""
    try:
        find_chromium()
        _playwright()
    except BrowserUnavailable as e:
        return str(e)
    return None


class BrowserPool:
    """One Chromium, launched lazily, shared by every session of this pool; relaunched after a crash or hang."""

    _shared: BrowserPool | None = None
    _shared_lock = threading.Lock()

    def __init__(
        self,
        executable: str | None = None,
        *,
        launch_timeout: float = 60.0,
        renderer_processes: int | None = None,
        spare_pages: int = 1,
    ):
        """``spare_pages``: how many pages the pool keeps opened ahead at the URLs episodes recently started from
        (0: none; each costs one live page's memory, ~13 MB)."""
        if spare_pages < 0:
            raise ValueError(f"spare_pages must be 0 (no pages opened ahead) or more, got {spare_pages}")
        self.executable = find_chromium(executable)
        self._async_playwright = _playwright()
        self.launch_timeout = launch_timeout
        self.renderer_processes = renderer_processes or max(2, os.cpu_count() or 2)
        self.spare_pages = spare_pages
        self.spares: dict[Any, list[Any]] = {}  # key (site, URL, viewport) -> opened sessions no episode has used
        self.warming: dict[Any, list[asyncio.Task[Any]]] = {}  # key -> spares being opened
        self.spare_hits = 0
        self.spare_misses = 0
        self._background: set[asyncio.Future[Any]] = set()
        self.owners: dict[Any, Any] = {}  # page -> its Session (routes and popups are decided per page)
        self._context: Any = None
        self._serial = 0
        self.token = uuid.uuid4().hex[:16]  # marks our Chromium processes on their command line (for kill)
        self.generation = 0  # bumped at every (re)launch; a session on an older generation re-opens its page
        self.launches = 0
        self._pw: Any = None
        self._browser: Any = None
        self._launching: asyncio.Lock | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rubricgym-browser", daemon=True)
        self._thread.start()
        self._closed = False

    @classmethod
    def shared(cls) -> BrowserPool:
        """The process-wide pool every GUI env uses unless given its own (one browser per process)."""
        with cls._shared_lock:
            if cls._shared is None or cls._shared._closed:
                cls._shared = cls()
            return cls._shared

    # ---- running coroutines on the pool's loop ---------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The pool's event loop (every browser object lives on it): a GUI env's ``tool_loop``."""
        if self._closed:
            raise RuntimeError("the browser pool is closed: make a new env (or pass it a new BrowserPool)")
        return self._loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self._closed:
            coro.close()
            raise RuntimeError("the browser pool is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the pool's loop and wait for it (from synchronous code; never from the pool loop)."""
        return self.submit(coro).result(timeout)

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` running on the pool's loop, from any event loop."""
        return await asyncio.wrap_future(self.submit(coro))

    # ---- the browser ------------------------------------------------------------------------------------

    async def browser(self) -> Any:
        """The live browser, launched or relaunched as needed (pool loop only)."""
        if self._browser is not None and self._browser.is_connected():
            return self._browser
        self._launching = self._launching or asyncio.Lock()
        async with self._launching:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            await self._discard()
            if self._pw is None:
                self._pw = await self._start_driver()
            self._browser = await self._pw.chromium.launch(
                executable_path=self.executable,
                args=[
                    *CHROMIUM_ARGS,
                    f"--renderer-process-limit={self.renderer_processes}",
                    f"--rubricgym-pool={self.token}",
                ],
                timeout=self.launch_timeout * 1000,
            )
            self.generation += 1
            self.launches += 1
            return self._browser

    async def _start_driver(self) -> Any:
        """Start Playwright's Node driver with ``DRIVER_NODE_OPTIONS`` (and ``BUNDLED_NODE_OPTIONS`` for the bundled
        Node): the driver reads ``NODE_OPTIONS`` from this process's environment when it starts; a caller's own
        ``NODE_OPTIONS`` is kept and put back."""
        before = os.environ.get("NODE_OPTIONS")
        ours = (
            DRIVER_NODE_OPTIONS
            if os.environ.get("PLAYWRIGHT_NODEJS_PATH")
            else f"{DRIVER_NODE_OPTIONS} {BUNDLED_NODE_OPTIONS}"
        )
        os.environ["NODE_OPTIONS"] = f"{before} {ours}" if before else ours
        try:
            return await self._async_playwright().start()
        finally:
            if before is None:
                os.environ.pop("NODE_OPTIONS", None)
            else:
                os.environ["NODE_OPTIONS"] = before

    def background(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` on the pool's loop without waiting for it (pool loop only); its errors are dropped."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(_forget(self._background))

    async def shared_context(self) -> Any:
        """The context of every file-served session (pool loop): no downloads, no service workers, routes by page."""
        browser = await self.browser()
        if self._context is None:
            self._context = await browser.new_context(accept_downloads=False, service_workers="block")
            await self._context.route("**/*", self._route)
            await self._context.route_web_socket(re.compile(".*"), self._route_ws)
            self._context.on("page", lambda page: asyncio.ensure_future(self.refuse_popup(page, None)))
        return self._context

    def private_origin(self, session: Any) -> str:
        """A fresh origin on a registrable domain of its own: storage, cookies and site are the session's alone."""
        self._serial += 1
        host = session.site.origin.split("://", 1)[1].split(":")[0].replace(".", "-")
        return f"http://{host}-{self.token[:6]}{self._serial}.test"

    async def _route(self, route: Any) -> None:
        try:
            owner = self.owners.get(route.request.frame.page)
        except Exception:  # noqa: BLE001 - a request without a page (a worker): nobody's
            owner = None
        if owner is None:
            await route.abort("blockedbyclient")
        else:
            await owner.route(route)

    async def _route_ws(self, ws: Any) -> None:
        owner = next(
            (
                s
                for s in self.owners.values()
                if ws.url.split("//", 1)[-1].startswith(s.origin.split("//", 1)[-1] + "/")
            ),
            None,
        )
        if owner is None:
            await ws.close()
        else:
            await owner.route_ws(ws)

    async def refuse_popup(self, page: Any, session: Any) -> None:
        """Close ``page`` if it is a popup (``window.open``, ``target=_blank``); sessions open pages themselves."""
        opener = await page.opener()
        if opener is not None:
            owner = self.owners.get(opener, session)
            if owner is not None:
                owner.blocked.append("popup")
            with contextlib.suppress(Exception):
                await page.close()

    async def relaunch(self, reason: str) -> None:
        """Kill the browser (crashed or hung) so that the next use launches a fresh one."""
        await self._discard()

    async def _discard(self) -> None:
        browser, self._browser = self._browser, None
        self._context = None
        self.owners.clear()
        self.spares.clear()  # their pages die with the browser
        for tasks in self.warming.values():
            for task in tasks:
                task.cancel()
        self.warming.clear()
        self.kill_processes()
        if browser is not None:
            with contextlib.suppress(Exception):  # it is dead or dying; the processes were killed above
                await asyncio.wait_for(browser.close(), 5)

    def processes(self) -> list[int]:
        """Pids of this pool's Chromium processes (the browser and its renderers and helpers)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if f"--rubricgym-pool={self.token}".encode() in cmd:
                pids.append(int(entry.name))
        return pids

    def kill_processes(self) -> None:
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                continue

    def close(self) -> None:
        """Close the browser and stop the loop thread."""
        if self._closed:
            return

        async def shutdown() -> None:
            await self._discard()
            if self._pw is not None:
                pw, self._pw = self._pw, None
                with contextlib.suppress(Exception):  # the driver may already be gone
                    await asyncio.wait_for(pw.stop(), 10)

        try:
            self.run(shutdown(), timeout=30)
        finally:
            self._closed = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)


def _forget(tasks: set[asyncio.Future[Any]]) -> Any:
    def done(task: asyncio.Future[Any]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a background failure (a page closed under it) is not an error

    return done
