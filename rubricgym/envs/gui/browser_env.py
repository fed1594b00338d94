"""``BrowserEnv``: the part every browser env shares: a session on the pool, the browser tools, observations.

Tools are ``async def`` ``@tool`` methods and the env's ``tool_loop`` is the pool's loop, so the env contract runs
them there: the Gymnasium face blocks on them, and ``astep_typed`` awaits them while the caller's event loop keeps
serving other episodes.
A subclass says where the episode's page is (``open_episode``), what a step did (``judge_step``) and what it
earned (``step_reward``); ``answer`` and ``done`` are its too.

Reward integrity: a step's ``info`` is the private record, typed in ``records.py`` (goal rows with expected
values stay there; only ``public_info_keys`` reach the agent); answers are final (a written field cannot be
changed) and count only once the episode ends, so the per-step reward is no answer oracle; and every page the
episode shows must stay in ``scope``: ``navigate`` resolves the URL as the browser will before checking it, and a
page found outside the scope after any action ends the episode as a failed escape (reward 0, ``escaped`` in the
summary).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import weakref
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, Literal

from rubricgym.core.env import RubricEnv, ToolError, ToolOutput
from rubricgym.core.tools import tool
from rubricgym.core.types import Task, ToolCall
from rubricgym.envs.gui.pool import BrowserPool
from rubricgym.envs.gui.records import RECORDS, Judged, recorded
from rubricgym.envs.gui.scope import in_scope, resolve_url
from rubricgym.envs.gui.session import ActionFailed, Session
from rubricgym.envs.gui.site import Site

STAGES = ("navigate", "act", "finish")


MAX_URL_CHARS = 2048
MAX_TEXT_CHARS = 500
MAX_TYPE_CHARS = 1000
"""``type`` presses one key per character, ~200-400 a second on a loaded 2-core machine: longer text would run
into the action timeout half typed. ``fill`` sets a long text at once."""


class BrowserEnv(RubricEnv):
    """A browser episode on the shared pool: ARIA-snapshot observations, browser actions as tools."""

    stages = STAGES
    default_max_steps = 15
    max_observation_chars = 12_000
    public_info_keys: ClassVar[frozenset[str]] = frozenset({"tool", "screenshot_jpeg_b64", "timeout", "escaped"})
    step_records = RECORDS
    open_ahead: ClassVar[bool] = False
    """Whether the pool opens the next episode's start page ahead (``Session.settle``): only for pages that do
    nothing until ``open_episode`` sets them up (no timers, no clock read at load), since a spare may wait a while."""
    shortcut_agents: ClassVar[Mapping[str, str]] = {
        "shotgun": "rubricgym.envs.gui.agents:Shotgun",
        "wrong_submit": "rubricgym.envs.gui.agents:WrongSubmit",
        "escape": "rubricgym.envs.gui.agents:Escape",
    }

    def __init__(
        self,
        *,
        screenshot: bool = False,
        action_timeout: float = 5.0,
        episode_timeout: float = 600.0,
        pool: BrowserPool | None = None,
        max_steps: int | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        self._max_steps_arg = max_steps
        self.screenshot = screenshot
        self.action_timeout = action_timeout
        self.episode_timeout = episode_timeout
        self._pool = pool
        self.session: Session | None = None
        self._started = 0.0
        self._changed_last = False
        self.answer_sheet: dict[str, str] = {}
        self.scope: str | None = None
        """The URL prefix the episode's pages must stay under (a subclass sets it per episode); ``None``: the
        site's origin."""
        self.escaped: str | None = None
        """The out-of-scope URL the page reached, which ended the episode as a failure (``None``: it never left)."""

    @property
    def pool(self) -> BrowserPool:
        if self._pool is None:
            self._pool = BrowserPool.shared()
        return self._pool

    # ---- hooks --------------------------------------------------------------------------------------------

    @abstractmethod
    def site(self, task: Task) -> Site:
        """Where ``task``'s pages come from."""

    @abstractmethod
    async def open_episode(self, session: Session, task: Task) -> None:
        """Open ``task``'s start page in ``session`` and put it in the task's initial state (pool loop)."""

    @abstractmethod
    async def judge_step(self, session: Session, tool: str) -> tuple[bool, dict[str, Any]]:
        """After an action (or a failed one): ``(whether the state changed, the step's private info)``."""

    @abstractmethod
    def step_reward(self, info: dict[str, Any], final: bool) -> float:
        """The reward of a judged step: on the episode's ``final`` step its outcome, before that a shaping signal
        that must reveal nothing the agent could not see (never whether an answer is right)."""

    # ---- episode --------------------------------------------------------------------------------------------

    @property
    def tool_loop(self) -> asyncio.AbstractEventLoop:
        """The pool's loop: every browser object lives there, so the tools run there."""
        return self.pool.loop

    def begin(self, task: Task) -> None:
        self.run_async(self._begin_episode(task))

    async def _begin_episode(self, task: Task) -> None:
        if self.session is None or self.session.pool is not self.pool:
            self.session = Session(self.pool, self.site(task), action_timeout=self.action_timeout)
        else:
            self.session.site = self.site(task)
        self.session.restore = _restorer(self)
        self.session.blocked.clear()
        self.answer_sheet = {}
        self.escaped = None
        self._started = time.monotonic()
        await self.open_episode(self.session, task)
        page = await self.page_text()
        self._task = task.model_copy(update={"prompt": f"{await self.episode_prompt(task)}\n\n{page}"})
        self.session.settle(self.open_ahead)  # the next episode's page opens while the agent reads this one

    async def restore_page(self, session: Session) -> None:
        """Put a re-opened page (after a crash or hang) back in the episode's last state; default: leave it fresh."""

    async def episode_prompt(self, task: Task) -> str:
        """The task text shown above the first page (a subclass may read it from the page)."""
        return task.prompt

    async def page_text(self) -> str:
        """URL, title and the ARIA snapshot with element refs."""
        s = self.session
        assert s is not None, "page_text() needs an open episode: call reset() first"
        snapshot = await s.snapshot()
        title = await s.guarded("title", lambda p: p.title(), retry=True)
        return f"URL: {s.url}\nTitle: {title}\nPage (elements have [ref=eN]; pass N's ref to tools):\n{snapshot}"

    def __del__(self) -> None:
        """An env dropped without ``close`` (rollouts make one per episode) still gives its page back."""
        session, pool = getattr(self, "session", None), getattr(self, "_pool", None)
        if session is not None and pool is not None and not pool._closed:
            with contextlib.suppress(Exception):
                pool.submit(session.close())

    def close(self) -> None:
        if self.session is not None and self._pool is not None and not self._pool._closed:
            self.pool.run(self.session.close(), timeout=30)
        self.session = None
        super().close()

    def stage_of(self, call: ToolCall | None) -> str:
        if call is None:
            return self._stage or "navigate"
        if call.name in ("answer", "done"):
            return "finish"
        return "act" if self._changed_last else "navigate"

    # ---- running a tool -------------------------------------------------------------------------------------

    def episode_scope(self) -> str:
        """The URL prefix this episode's pages must stay under."""
        assert self.session is not None, "episode_scope() needs an open episode: call reset() first"
        return self.scope or self.session.site.origin + "/"

    def timed_out(self) -> bool:
        """Whether the episode's time limit ended it (its last step's record says so)."""
        last = RECORDS.of(self.last_step()[0]) if self._records else None
        return isinstance(last, Judged) and last.timeout

    def _last_step(self) -> bool:
        """Whether the step being run is the episode's last (the base class truncates after it)."""
        return len(self._records) + 1 >= self.max_steps

    async def _abrowse(self, name: str, args: dict[str, Any]) -> ToolOutput:
        if self.session is None:
            return ToolOutput(text="No page is open: call reset() to start an episode.", error="no episode")
        if not in_scope(self.session.url, self.episode_scope()):  # left between steps (a timer of the page)
            return self._escape(name, None)
        if time.monotonic() - self._started > self.episode_timeout:
            _, info = await self.judge_step(self.session, name)
            return ToolOutput(
                text=f"The episode's time limit ({self.episode_timeout:g}s) is up.",
                done=True,
                reward=self.step_reward(info, final=True),
                info=recorded(name, {**info, "tool": name, "timeout": True}),
            )
        error = None
        if name not in ("answer", "done"):
            try:
                await self.session.act(name, **args)
                head = _did(name, args)
            except ActionFailed as e:
                error = str(e)
                head = f"Error: {error}. Current page:"
        elif name == "answer":
            self.answer_sheet.update(args["fields"])
            head = "Answer sheet: " + json.dumps(self.answer_sheet, ensure_ascii=False) + ". Call done() when finished."
        else:
            head = ""
        if not in_scope(self.session.url, self.episode_scope()):
            return self._escape(name, error)
        changed, info = await self.judge_step(self.session, name)
        self._changed_last = changed
        final = name == "done" or bool(info.get("episode_over")) or self._last_step()
        reward = self.step_reward(info, final)
        if name == "done":
            return ToolOutput(
                text="Episode finished.", done=True, reward=reward, info=recorded(name, {**info, "tool": name})
            )
        if info.get("episode_over"):  # the page itself says the episode is over
            return ToolOutput(
                text=f"{head}\nThe page reports that the episode is over.",
                done=True,
                error=error,
                reward=reward,
                info=recorded(name, {**info, "tool": name}),
            )
        if name == "answer":
            return ToolOutput(text=head, reward=reward, info=recorded(name, {**info, "tool": name}))
        try:
            text = f"{head}\n{await self.page_text()}"
            if self.screenshot:
                info["screenshot_jpeg_b64"] = await self.session.screenshot()
        except ActionFailed as e:
            error = error or str(e)
            text = f"{head}\nThe page cannot be read right now ({e})."
        return ToolOutput(text=text, error=error, reward=reward, info=recorded(name, {**info, "tool": name}))

    def _escape(self, name: str, error: str | None) -> ToolOutput:
        """End the episode as a failed escape: the page left the scope, so no state it shows now is judged."""
        assert self.session is not None
        self.escaped = self.session.url
        scope = self.episode_scope()
        return ToolOutput(
            text=f"The page left this task's app ({scope}); the episode is over and counts as a failure.",
            done=True,
            error=error or "left the task's scope",
            reward=0.0,
            info=recorded(
                name, {"tool": name, "escaped": True, "escaped_to": self.escaped, "changed": False, "unexpected": []}
            ),
        )

    # ---- tools ---------------------------------------------------------------------------------------------

    @tool(examples={"ref": "e12"})
    async def click(self, ref: str) -> ToolOutput:
        """Click an element of the page.

        Args:
            ref: the element's ref from the page snapshot, e.g. e12 for [ref=e12]
        """
        return await self._abrowse("click", {"ref": ref})

    @tool(examples={"text": "ipsum"})
    async def click_text(self, text: str, index: int = 0) -> ToolOutput:
        """Click the element that shows exactly this text: for text the snapshot shows without a ref (a link-like
        word inside a paragraph).

        Args:
            text: the element's whole visible text, as the page snapshot shows it
            index: which of several elements showing this text, in page order (0: the first)
        """
        if not text.strip() or len(text) > MAX_TEXT_CHARS or "\0" in text:
            raise ToolError(f"text must be the visible text of an element: 1 to {MAX_TEXT_CHARS} characters, no NUL")
        if not 0 <= index < 1000:
            raise ToolError(f"index must be 0 (the first element showing the text) or more, below 1000; got {index}")
        return await self._abrowse("click_text", {"text": text, "index": index})

    @tool(examples={"ref": "e7", "text": "Groceries"})
    async def fill(self, ref: str, text: str) -> ToolOutput:
        """Replace the text of an input field or text area.

        Args:
            ref: the field's ref from the page snapshot
            text: the new content of the field
        """
        return await self._abrowse("fill", {"ref": ref, "text": text})

    @tool(examples={"text": "hello"})
    async def type(self, text: str) -> ToolOutput:
        """Type text with the keyboard into the focused element (at most 1000 characters; fill sets longer text).

        Args:
            text: the characters to type
        """
        if len(text) > MAX_TYPE_CHARS:
            raise ToolError(
                f"type takes at most {MAX_TYPE_CHARS} characters (one key press each); got {len(text)}: use "
                "fill(ref, text) to set a long text at once"
            )
        return await self._abrowse("type", {"text": text})

    @tool(examples={"key": "Enter"})
    async def press(self, key: str) -> ToolOutput:
        """Press a key or chord on the focused element (Enter, Tab, Escape, ArrowDown, Control+A, ...).

        Args:
            key: a Playwright key name
        """
        return await self._abrowse("press", {"key": key})

    @tool(examples={"ref": "e9", "option": "Work"})
    async def select(self, ref: str, option: str) -> ToolOutput:
        """Choose an option of a drop-down (combobox) by its label.

        Args:
            ref: the combobox's ref
            option: the option's label as shown in the snapshot
        """
        return await self._abrowse("select", {"ref": ref, "option": option})

    @tool(examples={"direction": "down"})
    async def scroll(self, direction: Literal["up", "down", "left", "right"]) -> ToolOutput:
        """Scroll the page.

        Args:
            direction: up, down, left or right
        """
        return await self._abrowse("scroll", {"direction": direction})

    @tool(examples={"ref": "e4"})
    async def hover(self, ref: str) -> ToolOutput:
        """Move the mouse over an element.

        Args:
            ref: the element's ref
        """
        return await self._abrowse("hover", {"ref": ref})

    @tool
    async def go_back(self) -> ToolOutput:
        """Go back to the previous page (the browser's back button)."""
        return await self._abrowse("go_back", {})

    @tool(examples={"url": "#/inbox"})
    async def navigate(self, url: str) -> ToolOutput:
        """Open a URL of this app (other sites are blocked); relative URLs resolve against the current page.

        Args:
            url: an absolute URL on the app's origin, or a relative one such as #/inbox
        """
        if len(url) > MAX_URL_CHARS or "\0" in url:
            raise ToolError(f"the URL must be at most {MAX_URL_CHARS} characters with no NUL byte")
        if self.session is None:
            return ToolOutput(text="No page is open: call reset() to start an episode.", error="no episode")
        scope = self.episode_scope()
        here = self.session.url
        target = resolve_url(url, here if in_scope(here, scope) else scope)
        if target is None or not in_scope(target, scope):
            raise ToolError(f"only pages under {scope} can be opened; {url!r} resolves to {target or 'no such page'}")
        return await self._abrowse("navigate", {"url": target})

    @tool(examples={"fields": {"phone": "+1 555 123 4567"}})
    async def answer(self, fields: dict) -> ToolOutput:
        """Write the information the task asks for on the answer sheet (final: a field cannot be changed later).

        Args:
            fields: answer field name -> value, e.g. {"phone": "+1 555 123 4567"}
        """
        if not fields:
            raise ToolError('fields is empty; pass the requested fields, e.g. {"count": "3"}')
        sheet = {str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in fields.items()}
        changed = sorted(k for k, v in sheet.items() if self.answer_sheet.get(k, v) != v)
        if changed:
            raise ToolError(f"answers are final: {changed} already hold another value on the answer sheet")
        return await self._abrowse("answer", {"fields": sheet})

    @tool
    async def done(self) -> ToolOutput:
        """Declare the task complete; this ends the episode."""
        return await self._abrowse("done", {})


def _restorer(env: BrowserEnv) -> Callable[[Session], Awaitable[None]]:
    """``env.restore_page`` without a strong reference (the pool keeps sessions; envs must stay collectable)."""
    ref = weakref.ref(env)

    async def restore(session: Session) -> None:
        live = ref()
        if live is not None:
            await live.restore_page(session)

    return restore


def _did(name: str, args: dict[str, Any]) -> str:
    detail = {
        "click": "Clicked {ref}.",
        "click_text": "Clicked the element showing {text!r}.",
        "fill": "Filled {ref}.",
        "type": "Typed the text.",
        "press": "Pressed {key}.",
        "select": "Selected {option!r} in {ref}.",
        "scroll": "Scrolled {direction}.",
        "hover": "Hovering {ref}.",
        "go_back": "Went back.",
        "navigate": "Opened {url}.",
    }[name]
    return detail.format(**args)
