"""``InlineSteps``: when a session's synchronous env step or reset runs on the event loop instead of a server thread.

A thread-isolated session's env calls run on the server's threads (``threads``), so that one session's slow env
never stalls another's turn. For an env whose step takes tens of microseconds, that hop (a queue, a thread
wake-up, the interpreter lock passed twice, the loop woken back) costs the server more than the step itself:
stepping one toy-calculator session in ``bench/server.py``, running its steps and resets on the loop cut the
server's CPU per step by about a third (338 -> 232 us, 10.3 -> 2.1 context switches per step). So a sync env's
``step`` and ``reset`` (never its task set, state, record or close) run on the loop while that session has shown
that they are short, each kind of call on its own record ("step" below stands for either):

- every session starts on threads; after ``warmup`` consecutive steps that each took at most ``budget_s`` there
  (wall clock, so a step that waited counts as long), its next steps run on the loop;
- an inline step that overran (more than ``budget_s`` of CPU, garbage collection aside, or any wait at all: a
  sleep, I/O, a lock, a subprocess, seen as a voluntary context switch of the loop's thread) sends its session
  back to threads, and doubles the streak every session of the server needs before it steps inline again;
- after ``max_trips`` overruns the server steps every session on threads for good;
- while any env call runs on a thread (another session's reset, a session still showing its streak), steps go to
  threads as well: a thread taking the interpreter lock from an inline step would make it look like a wait and
  trip the rule for nothing (64 busy sessions in ``bench/server.py`` did, 1 to 3 times a run, without this).

CPU is read with ``time.thread_time`` (``getrusage``'s CPU times of a running thread lag by up to a scheduler
tick, which tripped short steps), and a collection by the garbage collector inside a step (a full one takes
milliseconds in a large server, wherever it falls) is not counted as the step's.

So an env whose steps are slow never runs a step on the loop; an env whose steps are short but sometimes slow
holds the loop for at most ``max_trips`` steps in the server's life, each after a streak of short ones. The
budget is well under the interpreter's switch interval (5 ms): a step that computes on a thread already keeps the
loop waiting that long at a time. Waits are counted only where a thread's context switches can be read (Linux,
``RUSAGE_THREAD``); elsewhere every step runs on a thread. ``ServerConfig(inline_steps=False)`` (``rubricgym
serve --no-inline-steps``) runs every step on a thread.

Sync env code on an event loop's thread is a context every env already supports: a rollout awaits
``astep_typed``, which runs a sync tool in place, and ``rubricgym.core.aio`` bridges coroutines from there.
"""

from __future__ import annotations

import gc
import resource
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_RUSAGE_THREAD: int | None = getattr(resource, "RUSAGE_THREAD", None)


class InlineSteps:
    """A server's rule for stepping sessions on the event loop (see the module docstring); shared by its sessions."""

    def __init__(
        self,
        budget_s: float = 0.001,
        warmup: int = 16,
        max_trips: int = 4,
        threads_busy: Callable[[], bool] = lambda: False,
    ):
        if budget_s <= 0 or warmup < 1 or max_trips < 1:
            raise ValueError("budget_s must be positive, warmup and max_trips at least 1")
        self.budget_s, self.warmup, self.max_trips = budget_s, warmup, max_trips
        self.threads_busy = threads_busy
        """Whether an env call is running on one of the server's threads (then a step goes to a thread too)."""
        self.trips = 0
        """Inline steps that overran so far (each doubled the streak a session needs)."""
        self.inline_steps = 0
        """Steps run on the loop so far."""

    @property
    def open(self) -> bool:
        """Whether any session may still step on the loop."""
        return _RUSAGE_THREAD is not None and self.trips < self.max_trips

    def session(self) -> SessionSteps:
        return SessionSteps(self)


class SessionSteps:
    """Where one session's next step runs, from how its last ones went."""

    __slots__ = ("rule", "streak", "inline")

    def __init__(self, rule: InlineSteps):
        self.rule = rule
        self.streak = 0
        """Consecutive short steps on threads."""
        self.inline = False

    def on_loop(self) -> bool:
        """Whether the next step runs on the loop: this session's steps are short, and no env call is running on
        a thread (which would take the interpreter lock from an inline step and make it look like a wait)."""
        return self.inline and self.rule.open and not self.rule.threads_busy()

    def ran_on_thread(self, wall_s: float) -> None:
        """Count a step that took ``wall_s`` on a thread (``inf``: it raised)."""
        rule = self.rule
        self.streak = self.streak + 1 if wall_s <= rule.budget_s else 0
        if self.streak >= rule.warmup << rule.trips:
            self.inline = True

    def run_inline(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` here, on the loop's thread; an overrun sends this session back to threads."""
        rule, who = self.rule, _RUSAGE_THREAD
        assert who is not None  # on_loop() is False without it
        waits = resource.getrusage(who).ru_nvcsw
        gc_time = _GCTime()
        gc.callbacks.append(gc_time)
        cpu_s = time.thread_time()  # exact; getrusage's CPU times lag by up to a scheduler tick for a running thread
        try:
            return fn(*args)
        finally:
            cpu_s = time.thread_time() - cpu_s - gc_time.total_s
            waited = resource.getrusage(who).ru_nvcsw != waits
            gc.callbacks.remove(gc_time)
            rule.inline_steps += 1
            if cpu_s > rule.budget_s or waited:
                self.inline, self.streak = False, 0
                rule.trips += 1


class _GCTime:
    """CPU seconds the garbage collector spent while it is in ``gc.callbacks``: a collection that happens to fall in a
    step (a full one takes milliseconds in a large server) is the process's cost, not the step's."""

    __slots__ = ("total_s", "_start")

    def __init__(self) -> None:
        self.total_s = self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.thread_time()
        else:
            self.total_s += time.thread_time() - self._start


def timed(fn: Callable[..., T], *args: Any) -> tuple[T, float]:
    """``fn(*args)`` and the wall-clock seconds it took (run on the thread that the step runs on)."""
    t0 = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - t0
