"""The collective weight push of a Ray rollout pool (``generation.ray_weight_sync: collective``).

``CollectivePush`` is the learner's side: a ``WeightSync`` group (``trainers/engine/weight_sync.py``: manifest check,
gloo broadcast in buckets, timeouts) of the learner (rank 0) and the pool's actors (ranks 1..N), built when the
pool starts on a free TCP port of the driver's node, and the push over it. A gloo group cannot take a new member,
so when an actor is replaced the group is dropped (``close``) and the next push rebuilds it for the new membership
(every survivor re-joins on a new port) before sending. An actor lost before or during a push is handed back to
the pool to replace, and the push is resent. ``RayBackend`` (``trainers/engine/ray_backend.py``) holds one and owns the
actors.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from rubricgym.trainers.engine.weight_sync import WeightSync, WeightSyncError, WeightSyncMismatch, WeightSyncTimeout

Lost = list[tuple[int, BaseException]]
"""The actors a collective step found dead: (index, what its call raised)."""


def _lost() -> tuple[type[Exception], ...]:
    """What a call raises when its actor is gone: died, unreachable, or killed by Ray's memory monitor (an
    ``OutOfMemoryError`` is not a ``RayActorError``)."""
    import ray

    return (ray.exceptions.RayActorError, ray.exceptions.OutOfMemoryError)


def _free_port() -> int:
    """A TCP port free on this machine now (the sync group's store binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        port: int = s.getsockname()[1]
        return port


def _first_line(e: BaseException) -> str:
    """The first line of what ``e`` says (of its cause, for an error an actor's call raised)."""
    cause = getattr(e, "cause", None)
    lines = str(cause if isinstance(cause, BaseException) else e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


class CollectivePush:
    """The learner's side of a pool's weight-sync group.

    ``workers``: the pool's current actors (read on every use: replacements change the list). ``started``: waits
    for actor ``i`` to be scheduled and load its model; raises the pool's error past its start timeout, and what
    ``_lost()`` names when the actor is gone. ``respawn``: replaces actor ``i`` after it died (its ``failures``-th
    death in this call; the pool raises once there were too many) and calls ``close``. ``timeout_s`` bounds the
    rendezvous and every bucket's broadcast.
    """

    def __init__(
        self,
        workers: Callable[[], list[Any]],
        started: Callable[[int], Any],
        respawn: Callable[[int, BaseException, int], Any],
        timeout_s: float,
    ):
        self._workers = workers
        self._started = started
        self._respawn = respawn
        self.timeout_s = timeout_s
        self.version = 0
        """Pushes sent."""
        self.pushed: Any = None
        """The model last pushed, whose current weights a replacement loads before the next push rebuilds the group
        (the pushed ones: the trainer collects only between a push and the next update)."""
        self._sync: WeightSync | None = None  # the learner's side of the group; None: to be rebuilt

    def join(self) -> None:
        """Build the group if there is none, replacing actors found dead meanwhile."""
        self._replace_lost(lambda: self._build_sync() if self._sync is None else [])

    def push(self, model: Any) -> None:
        """Broadcast ``model``'s weights over the sync group: the actors' ``receive_weights`` calls go first, then
        the learner's ``send``. Actors lost before or during it are replaced, the group rebuilt and the push
        resent (survivors take the same weights again)."""
        self.version += 1
        self._replace_lost(lambda: (self._build_sync() if self._sync is None else []) or self._send(model))
        self.pushed = model

    def close(self) -> None:
        """Leave the learner's side of the sync group (the actors leave theirs when they join the next one)."""
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    def _replace_lost(self, attempt: Callable[[], Lost]) -> None:
        """Run ``attempt`` until it finds no lost actor, replacing those it found (``max_restarts`` each)."""
        failures = [0] * len(self._workers())
        while lost := attempt():
            for i, cause in lost:
                failures[i] += 1
                self._respawn(i, cause, failures[i])

    def _send(self, model: Any) -> Lost:
        assert self._sync is not None
        calls = [w.receive_weights.remote(self.timeout_s) for w in self._workers()]
        error: WeightSyncError | None = None
        try:
            self._sync.send(model, self.version)
        except WeightSyncError as e:
            error = e
            self.close()  # the actors still in a collective see the learner's side close, and stop
        outcomes = self._outcomes(calls)
        lost: Lost = [(i, e) for i, e in outcomes if isinstance(e, _lost())]
        if lost:
            self.close()
            return lost
        if error is not None or any(e is not None for _, e in outcomes):
            self.close()
            raise _failed(f"push v{self.version}", error, outcomes)
        return []

    def _build_sync(self) -> Lost:
        """A new sync group of the learner and the current actors on a fresh port of the driver's node; returns
        the actors found dead meanwhile (the caller replaces them and builds again)."""
        import ray

        workers = self._workers()
        lost: Lost = []
        for i in range(len(workers)):  # every actor loaded its model: the rendezvous clock starts after
            try:
                self._started(i)
            except _lost() as e:
                lost.append((i, e))
        if lost:
            return lost
        address = f"{ray.util.get_node_ip_address()}:{_free_port()}"
        world = len(workers) + 1
        calls = [w.join_sync.remote(address, i + 1, world, self.timeout_s) for i, w in enumerate(workers)]
        error: WeightSyncError | None = None
        try:
            self._sync = WeightSync.connect(address, 0, world, timeout_s=self.timeout_s)
        except WeightSyncError as e:
            error = e
        outcomes = self._outcomes(calls)
        lost = [(i, e) for i, e in outcomes if isinstance(e, _lost())]
        if lost or error is not None or any(e is not None for _, e in outcomes):
            self.close()
        if not lost and (error is not None or any(e is not None for _, e in outcomes)):
            raise _failed(f"joining the sync group at {address}", error, outcomes)
        return lost

    def _outcomes(self, calls: list[Any]) -> list[tuple[int, BaseException | None]]:
        """Each actor's call: ``None`` when it returned, else what it raised (a lost actor, a sync error)."""
        import ray

        out: list[tuple[int, BaseException | None]] = []
        for i, ref in enumerate(calls):
            try:
                ray.get(ref, timeout=self.timeout_s + 30)
                out.append((i, None))
            except ray.exceptions.GetTimeoutError:
                out.append((i, WeightSyncTimeout(f"did not answer within {self.timeout_s + 30:g} s")))
            except Exception as e:  # noqa: BLE001 (reported below, with the learner's side)
                out.append((i, e))
        return out


def _failed(
    what: str, learner: WeightSyncError | None, outcomes: list[tuple[int, BaseException | None]]
) -> WeightSyncError:
    """One error for a failed collective: the learner's side and each actor's, each named."""
    sides = [f"learner: {_first_line(learner)}"] if learner is not None else []
    sides += [f"rollout worker {i} (sync rank {i + 1}): {_first_line(e)}" for i, e in outcomes if e is not None]
    errors = [learner] + [e for _, e in outcomes]
    kind = (
        WeightSyncMismatch
        if any(isinstance(e, WeightSyncMismatch) for e in errors)
        else WeightSyncTimeout
        if any(isinstance(e, WeightSyncTimeout) for e in errors)
        else WeightSyncError
    )
    return kind(
        f"collective weight push (generation.ray_weight_sync 'collective'): {what} failed; "
        + "; ".join(sides)
        + ". Check the rollout workers' logs, or set generation.ray_weight_sync 'object_store'"
    )
