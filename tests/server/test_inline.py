"""Inline steps (``rubricgym.server.inline``): a session whose env steps (or resets) are short runs them on the
event loop, a slow env never does, and an inline step that overruns sends its session back to threads.

Whether a step held the loop is read from what another session could do meanwhile, never from a clock: a step
that waits for another session's step to open a gate is released only if the loop was free to serve that step.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rubricgym.core.types import Action, Message, Observation
from rubricgym.envs.toy.calculator import CalculatorEnv
from rubricgym.server.inline import InlineSteps
from tests.server.conftest import call, open_ws

REPO = Path(__file__).parents[2]

CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "2 + 2"}}</tool_call>'


class Gated(CalculatorEnv):
    """The calculator, where a step sent as ``WAIT`` first waits (blocking, as I/O does) for a step sent as ``OPEN``
    (from another session), records whether it came, and then sleeps ``slow_s``; every step then makes the same
    calculator call."""

    gate = threading.Event()
    entered = threading.Event()
    waits: list[bool] = []
    wait_s = 10.0
    slow_s = 0.0

    def __init__(self) -> None:
        super().__init__(max_steps=1000)

    def step_typed(self, action: Action | str | Message) -> Observation:
        text = action if isinstance(action, str) else getattr(action, "text", "")
        if text == "WAIT":
            self.entered.set()
            self.waits.append(self.gate.wait(self.wait_s))
            self.gate.clear()
            time.sleep(self.slow_s)
        elif text == "OPEN":
            self.gate.set()
        return super().step_typed(CALL)


def gated(wait_s: float, slow_s: float = 0.0) -> type[Gated]:
    fresh = {"gate": threading.Event(), "entered": threading.Event(), "waits": [], "wait_s": wait_s, "slow_s": slow_s}
    return type("Gated", (Gated,), fresh)


def _wait_opened_by(ws, other, env: type[Gated]) -> None:
    """``ws`` sends ``WAIT``; once its step is waiting, ``other`` sends ``OPEN``; both replies are read."""
    env.entered.clear()
    ws.send('{"type": "step", "data": {"text": "WAIT"}}')
    assert env.entered.wait(30)
    assert call(other, "step", {"text": "OPEN"})["type"] == "observation"
    assert '"observation"' in ws.recv(timeout=30)


def test_a_short_step_session_moves_onto_the_loop_with_the_same_replies(serve):
    inline, threaded = serve(), serve(inline_steps=False)
    replies = []
    for server in (inline, threaded):
        with open_ws(server) as ws:
            out = [call(ws, "reset", {"seed": 7})["data"]]
            for _ in range(40):
                reply = call(ws, "step", {"text": CALL})["data"]
                out.append(reply)
                if reply["done"]:
                    out.append(call(ws, "reset", {"seed": len(out)})["data"])
            for r in out:
                r["observation"]["info"].pop("episode_id")
            replies.append(out)
    assert replies[0] == replies[1]
    assert inline.app.state.server.inline.inline_steps > 0
    assert threaded.app.state.server.inline is None


def test_short_resets_move_onto_the_loop_with_the_same_observations(serve):
    inline, threaded = serve(), serve(inline_steps=False)
    replies = []
    for server in (inline, threaded):
        with open_ws(server) as ws:
            out = [call(ws, "reset", {"seed": seed})["data"] for seed in range(40)]
            for r in out:
                r["observation"]["info"].pop("episode_id")
            replies.append(out)
            resets = next(iter(server.app.state.server.sessions.values())).runner.resets
            assert (resets is not None and resets.on_loop()) == (server is inline)
    assert replies[0] == replies[1]


def test_a_slow_env_never_steps_on_the_loop(serve):
    """Every step of one session is slow (it waits for another session's step, then sleeps 5 ms, five times the
    budget): each is released (the loop was free to serve the other session), through more steps than a session
    of short steps needs to move onto the loop."""
    env = gated(wait_s=10.0, slow_s=0.005)
    server = serve(factory=env)
    rule = server.app.state.server.inline
    with open_ws(server) as ws, open_ws(server) as other:
        call(ws, "reset", {"seed": 1})
        call(other, "reset", {"seed": 2})
        for _ in range(rule.warmup + 4):
            _wait_opened_by(ws, other, env)
    assert env.waits == [True] * (rule.warmup + 4)
    assert rule.trips == 0


def test_an_inline_step_that_waits_sends_its_session_back_to_threads(serve):
    """After a streak of short steps a session steps on the loop; the first step that then blocks holds the loop
    once (the other session's ``OPEN`` waits behind it, so the gate times out), and the session is back on
    threads: its next blocking step is released by the other session."""
    env = gated(wait_s=1.0)
    server = serve(factory=env)
    rule = server.app.state.server.inline
    with open_ws(server) as ws, open_ws(server) as other:
        call(ws, "reset", {"seed": 1})
        call(other, "reset", {"seed": 2})
        for _ in range(rule.warmup):
            assert call(ws, "step", {"text": CALL})["type"] == "observation"
        mine = [s.runner.steps for s in server.app.state.server.sessions.values() if s.runner.steps.inline]
        assert len(mine) == 1 and mine[0].on_loop()
        _wait_opened_by(ws, other, env)  # inline: the loop is held, OPEN is served only after the wait timed out
        assert env.waits == [False] and rule.trips == 1 and not mine[0].inline
        env.gate.clear()  # the late OPEN left it set
        env.wait_s = 10.0
        _wait_opened_by(ws, other, env)  # on a thread again
    assert env.waits == [False, True]


def test_the_rule_moves_a_session_after_a_streak_and_backs_off_after_each_overrun():
    rule = InlineSteps(budget_s=0.001, warmup=3, max_trips=2)
    steps = rule.session()
    for wall_s in (0.0001, 0.0001, 0.5, 0.0001, 0.0001):  # a long step restarts the streak
        steps.ran_on_thread(wall_s)
    assert not steps.on_loop()
    steps.ran_on_thread(0.0001)
    assert steps.on_loop()
    assert steps.run_inline(pow, 2, 10) == 1024 and steps.on_loop()

    steps.run_inline(time.sleep, 0.01)  # a wait: back to threads, and the next streak is twice as long
    assert rule.trips == 1 and not steps.on_loop()
    for _ in range(5):
        steps.ran_on_thread(0.0001)
    assert not steps.on_loop()
    steps.ran_on_thread(0.0001)
    assert steps.on_loop()

    def compute() -> None:  # more CPU than the budget, no wait
        end = time.thread_time() + 0.005
        while time.thread_time() < end:
            pass

    steps.run_inline(compute)
    assert rule.trips == 2 and not rule.open  # max_trips reached: every session steps on threads for good
    for _ in range(100):
        steps.ran_on_thread(0.0001)
    assert not steps.on_loop()


def test_an_inline_step_that_raises_still_counts():
    rule = InlineSteps(warmup=1)
    steps = rule.session()
    steps.ran_on_thread(0.0)

    def fail() -> None:
        time.sleep(0.01)
        raise ValueError("env bug")

    with pytest.raises(ValueError, match="env bug"):
        steps.run_inline(fail)
    assert rule.trips == 1 and rule.inline_steps == 1 and not steps.on_loop()


@pytest.mark.parametrize("bad", [{"budget_s": 0}, {"warmup": 0}, {"max_trips": 0}])
def test_the_rule_refuses_settings_that_mean_nothing(bad):
    with pytest.raises(ValueError, match="budget_s must be positive"):
        InlineSteps(**bad)


def test_no_step_runs_on_the_loop_while_an_env_call_runs_on_a_thread():
    """A thread that takes the interpreter lock from an inline step would look like a wait and trip the rule."""
    busy = [True]
    rule = InlineSteps(warmup=1, threads_busy=lambda: busy[0])
    steps = rule.session()
    steps.ran_on_thread(0.0)
    assert not steps.on_loop()
    busy[0] = False
    assert steps.on_loop()


GC_IS_NOT_THE_STEPS_COST = """
import gc, time
from rubricgym.server.inline import InlineSteps

rule = InlineSteps(budget_s=0.001, warmup=1)
steps = rule.session()
steps.ran_on_thread(0.0)
garbage = [[i] for i in range(300_000)]  # a full collection walks every one of them
cpu_s = time.thread_time()
gc.collect()
assert time.thread_time() - cpu_s > rule.budget_s, "the test needs a collection longer than the budget"
steps.run_inline(gc.collect)
assert rule.trips == 0 and steps.on_loop(), rule.trips
steps.run_inline(sum, range(3_000_000))  # as long, without a collection: an overrun
assert rule.trips == 1, rule.trips
"""


def test_garbage_collection_during_an_inline_step_is_not_the_steps_cost():
    # in a fresh interpreter: a thread an earlier test left behind that wakes for the interpreter lock during the
    # collection makes the step wait, rightly a trip, but not what this test is about (a CI failure in the full run)
    done = subprocess.run(
        [sys.executable, "-c", GC_IS_NOT_THE_STEPS_COST], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
