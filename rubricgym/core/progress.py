"""Progress of long work, shown to whoever watches it: a rich bar (what is being done, counts, elapsed, ETA) in a
terminal, and one plain line per step or phase when output is not a terminal (a log file, CI, ``nohup``), with a
heartbeat line while a long phase makes no countable progress, so a log shows life every few seconds.

>>> from rich.console import Console
>>> with progress(Console(), "evaluating", total=3) as p:
...     for _ in range(3):
...         p.advance()

``Tracker.phase`` starts the next phase in the same display (the trainer's base evaluation, steps, final
evaluation); ``expected_s`` gives an ETA before the first count arrives (the last evaluation's duration).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console, RenderableType
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TaskID, TextColumn
from rich.text import Text

__all__ = ["Tracker", "fmt_duration", "progress"]

HEARTBEAT_S = 15.0
"""Seconds without a plain line after which a log gets a "still ..." line."""


def fmt_duration(seconds: float | None) -> str:
    """``65`` -> ``1:05``, ``3723`` -> ``1:02:03``; ``-`` when unknown."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "-"
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def eta_s(done: float, total: float | None, elapsed: float, expected_s: float | None = None) -> float | None:
    """Seconds left: from the rate so far once something is done, else from ``expected_s`` (the phase's expected
    duration, e.g. the previous evaluation's); ``None`` when there is no basis for a guess."""
    if total and done > 0:
        return max(elapsed / done * (total - done), 0.0)
    if expected_s is not None:
        return max(expected_s - elapsed, 0.0)
    return None


class _ElapsedColumn(ProgressColumn):
    """Time since the phase began."""

    def render(self, task: Task) -> Text:
        return Text(fmt_duration(task.elapsed or 0.0), style="progress.elapsed")


class _EtaColumn(ProgressColumn):
    """ETA from the rate so far, else from the task's ``expected_s`` field (shown with ``~``)."""

    max_refresh = 0.5

    def render(self, task: Task) -> Text:
        if task.total is not None and task.completed >= task.total:
            return Text("")
        expected, start = task.fields.get("expected_s"), task.fields.get("counted_from", 0)
        total = None if task.total is None else task.total - start
        left = eta_s(task.completed - start, total, task.elapsed or 0.0, expected)
        if left is None:
            return Text("ETA -", style="progress.remaining")
        guess = "~" if task.completed == start and expected is not None else ""
        return Text(f"ETA {guess}{fmt_duration(left)}", style="progress.remaining")


class Tracker:
    """One display of progress: counts of the current phase, elapsed time, ETA and a status text.

    In a terminal it is a rich ``Progress`` (``renderable`` lets a caller embed it in its own ``Live``); elsewhere it
    prints one plain line per ``advance`` (at most one per ``min_interval_s``, and always the last), one per
    ``phase`` and ``line``, and a heartbeat after ``heartbeat_s`` of silence.
    """

    def __init__(
        self,
        console: Console,
        description: str,
        total: int | None = None,
        *,
        enabled: bool = True,
        embedded: bool = False,
        unit: str = "",
        expected_s: float | None = None,
        min_interval_s: float = 0.0,
        heartbeat_s: float = HEARTBEAT_S,
        announce: bool = True,
    ):
        self.console = console
        self.enabled = enabled
        self.terminal = enabled and console.is_terminal
        self.embedded = embedded
        self.unit = unit
        self.min_interval_s = min_interval_s
        self.heartbeat_s = heartbeat_s
        self.announce = announce
        self.description, self.total, self.expected_s = description, total, expected_s
        self.done = self.start = 0
        self.status_text = ""
        self.started = self.last_line = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        if self.terminal:
            self._bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(bar_width=24),
                MofNCompleteColumn(),
                TextColumn("{task.fields[unit]}"),
                _ElapsedColumn(),
                _EtaColumn(),
                TextColumn("{task.fields[status]}"),
                console=console,
                transient=False,
                auto_refresh=not embedded,
            )
            self._task = self._bar.add_task(escape(description), total=total, **self._fields())

    # ---- lifecycle --------------------------------------------------------------------------------------------

    def __enter__(self) -> Tracker:
        if self._bar is not None and not self.embedded:
            self._bar.start()
        elif self.enabled and not self.terminal:
            if self.announce:
                self._plain(self._phase_line())
            if self.heartbeat_s > 0:
                self._thread = threading.Thread(target=self._heartbeat, name="rubricgym-progress", daemon=True)
                self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None
        if self._bar is not None and not self.embedded:
            self._bar.stop()

    @property
    def renderable(self) -> RenderableType:
        """The bar, for a caller's own ``Live`` (``embedded=True``); empty outside a terminal."""
        return self._bar if self._bar is not None else Text("")

    # ---- updates ----------------------------------------------------------------------------------------------

    def phase(
        self,
        description: str,
        total: int | None = None,
        *,
        done: int = 0,
        unit: str | None = None,
        expected_s: float | None = None,
        announce: bool = True,
        started: float | None = None,
    ) -> None:
        """Start the next phase: counts restart at ``done`` of ``total`` (a resumed run's steps); the ETA counts
        only what this phase did, else ``expected_s``; a plain line announces it unless ``announce`` is false;
        ``started``: when it began (``time.monotonic()``), if before now; ``unit``: what is counted, if it changed."""
        with self._lock:
            self.unit = self.unit if unit is None else unit
            self.description, self.total, self.expected_s = description, total, expected_s
            self.done, self.start, self.status_text = done, done, ""
            self.started = time.monotonic() if started is None else started
        if self._bar is not None and self._task is not None:
            self._bar.reset(self._task, total=total, completed=done, description=escape(description), **self._fields())
            if started is not None:  # the bar's clock is time.monotonic too
                for task in self._bar.tasks:
                    task.start_time = started if task.id == self._task else task.start_time
        elif self.enabled and announce:
            self._plain(self._phase_line())

    def advance(self, n: int = 1, status: str | None = None) -> None:
        """``n`` more done (``status``: a short text shown beside the counts, e.g. the latest metrics)."""
        with self._lock:
            self.done += n
            if status is not None:
                self.status_text = status
            due = time.monotonic() - self.last_line >= self.min_interval_s or (
                self.total is not None and self.done >= self.total
            )
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, advance=n, **self._fields())
        elif self.enabled and due:
            self._plain(self._count_line())

    def status(self, text: str) -> None:
        """Change the status text without counting anything (shown at the next line or refresh)."""
        with self._lock:
            self.status_text = text
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, **self._fields())

    def line(self, text: str) -> None:
        """A message of its own (a result, a warning): printed above the bar, or as a plain line."""
        if not self.enabled:
            return
        if self._bar is not None and not self.embedded:
            self._bar.console.print(text, highlight=False, soft_wrap=True, markup=False)
        else:
            self._plain(text)

    # ---- text -------------------------------------------------------------------------------------------------

    def _fields(self) -> dict[str, Any]:
        return {
            "status": escape(self.status_text),
            "unit": self.unit,
            "expected_s": self.expected_s,
            "counted_from": self.start,
        }

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    def _counts(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.done}/{self.total}{unit}" if self.total is not None else f"{self.done}{unit}"

    def _timing(self) -> str:
        elapsed = self._elapsed()
        total = None if self.total is None else self.total - self.start
        left = eta_s(self.done - self.start, total, elapsed, self.expected_s)
        text = f"{fmt_duration(elapsed)} elapsed"
        if left is not None and not (self.total is not None and self.done >= self.total):
            guess = "~" if self.done == self.start and self.expected_s is not None else ""
            text += f", ETA {guess}{fmt_duration(left)}"
        return text

    def _phase_line(self) -> str:
        total = f" ({self.total}{' ' + self.unit if self.unit else ''})" if self.total is not None else ""
        eta = f", ETA ~{fmt_duration(self.expected_s)}" if self.expected_s is not None else ""
        return f"{self.description}{total}{eta}"

    def _count_line(self) -> str:
        status = f" · {self.status_text}" if self.status_text else ""
        return f"{self.description}: {self._counts()} · {self._timing()}{status}"

    def _plain(self, text: str) -> None:
        with self._lock:
            self.last_line = time.monotonic()
        self.console.print(text, highlight=False, soft_wrap=True, markup=False)

    def _heartbeat(self) -> None:
        while not self._stop.wait(min(self.heartbeat_s, 1.0)):
            with self._lock:
                quiet = time.monotonic() - self.last_line
            if quiet >= self.heartbeat_s:
                self._plain(f"... still {self.description}: {self._counts()} · {self._timing()}")


@contextmanager
def progress(
    console: Console | None,
    description: str,
    total: int | None = None,
    *,
    enabled: bool = True,
    unit: str = "",
    expected_s: float | None = None,
    min_interval_s: float = 0.0,
    heartbeat_s: float = HEARTBEAT_S,
) -> Iterator[Tracker]:
    """Show the progress of ``description`` (``total`` steps, or uncounted): a rich bar in a terminal, plain lines
    elsewhere, nothing when ``enabled`` is false. ``min_interval_s`` thins the plain lines of many fast steps."""
    tracker = Tracker(
        console or Console(),
        description,
        total,
        enabled=enabled,
        unit=unit,
        expected_s=expected_s,
        min_interval_s=min_interval_s,
        heartbeat_s=heartbeat_s,
    )
    with tracker:
        yield tracker
