"""Clients cannot crowd each other out or probe the host (issue 40, item 7): per-client quotas of handed-out tasks,
client-task refusals that do not depend on what exists on the server's disk, and task lists built one at a time
so that several large ``tasks`` requests do not take the interpreter from the event loop."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

import pytest

from rubricgym.core.types import Task
from rubricgym.envs.toy.calculator import CalculatorEnv
from rubricgym.server import ServerConfig
from rubricgym.server.policy import IssuedTasks, host_path_fields, names_host_path
from rubricgym.server.protocol import ProtocolError
from tests.server.conftest import ENV, call, open_ws

ROOT = Path(__file__).resolve().parents[2]


def _code(reply: dict) -> str:
    assert reply["type"] == "error", str(reply)[:500]
    return reply["data"]["code"]


# ---- per-client quotas of handed-out tasks ------------------------------------------------------------------


def test_one_client_cannot_evict_another_clients_tasks(serve):
    """The reported attack: 11 requests of 1000 tasks on one connection (the server remembers 10,000) made the
    server forget a task it had handed to another client, whose reset by task_id then failed."""
    server = serve()
    with open_ws(server) as victim, open_ws(server) as attacker:
        mine = call(victim, "tasks", {"n": 3, "seed": 7})["data"]
        for seed in range(1000, 1011):
            assert len(call(attacker, "tasks", {"n": 1000, "seed": seed})["data"]) == 1000
        for task in mine:
            reply = call(victim, "reset", {"task_id": task["id"]})
            assert reply["type"] == "observation", reply
        reply = call(victim, "reset", {"task": mine[0]})  # the task dict a tasks reply gave is still known too
        assert reply["type"] == "observation", reply


def test_many_sessions_are_refused_before_they_evict_an_open_sessions_tasks(serve):
    server = serve(max_tasks=20, issued_per_client=40, issued_tasks=100)
    with open_ws(server) as victim:
        mine = call(victim, "tasks", {"n": 20, "seed": 7})["data"]
        with contextlib.ExitStack() as stack:
            attackers = [stack.enter_context(open_ws(server)) for _ in range(6)]
            codes = []
            for i, ws in enumerate(attackers):
                for j in range(2):
                    reply = call(ws, "tasks", {"n": 20, "seed": 1000 + 2 * i + j})
                    codes.append(reply["type"] if reply["type"] == "tasks" else _code(reply))
            assert codes.count("tasks") == 4 and set(codes[4:]) == {"LIMIT_EXCEEDED"}, codes  # 20 + 4 x 20 = 100
            refused = call(attackers[-1], "tasks", {"n": 20, "seed": 5000})
            assert "--issued-tasks" in refused["data"]["message"] and refused["data"]["issued_tasks"] == 100
            assert all(call(victim, "reset", {"task_id": t["id"]})["type"] == "observation" for t in mine)
        time.sleep(0.3)  # the closed sessions' tasks become the room a new request may take
        assert len(call(victim, "tasks", {"n": 20, "seed": 9000})["data"]) == 20


def _tasks(prefix: str, n: int) -> list[Task]:
    return [Task(id=f"{prefix}{i}", env_id=ENV, prompt="?") for i in range(n)]


def test_issued_tasks_quota_forgets_only_the_asking_clients_oldest():
    issued = IssuedTasks(capacity=10, per_client=4)
    issued.add(_tasks("a", 3), "alice")
    issued.add(_tasks("b", 4), "bob")
    issued.add(_tasks("c", 4), "bob")  # over bob's quota: bob's own oldest go
    assert all(issued.get(f"a{i}") for i in range(3)) and issued.held_by("bob") == 4
    assert issued.get("b0") is None and issued.get("c3") is not None
    with pytest.raises(ProtocolError, match="over this server's 4 per client"):
        issued.add(_tasks("d", 5), "carol")
    issued.add(_tasks("e", 3), "carol")  # 3 + 4 + 3 = 10: full
    with pytest.raises(ProtocolError, match="cap is 10") as refused:
        issued.add(_tasks("f", 1), "dave")
    assert refused.value.code.value == "LIMIT_EXCEEDED" and len(issued) == 10  # nothing forgotten
    issued.close("bob")
    issued.add(_tasks("f", 2), "dave")  # room from the closed session, first closed first
    assert issued.get("f1") is not None and all(issued.get(f"a{i}") for i in range(3))
    assert issued.get("e2") is not None and len(issued) == 10


def test_shared_tasks_stay_while_any_client_holds_them():
    issued = IssuedTasks(capacity=4, per_client=4)
    issued.add(_tasks("s", 2), "alice")
    issued.add(_tasks("s", 2), "bob")  # the same seed gives the same tasks: no new room taken
    assert len(issued) == 2
    issued.close("alice")
    issued.add(_tasks("x", 2), "carol")
    with pytest.raises(ProtocolError, match="LIMIT|cap is 4"):
        issued.add(_tasks("y", 1), "dave")  # alice's copies were never room: bob holds them
    assert issued.get("s0") is not None and issued.get("s1") is not None


def test_config_keeps_a_reply_within_a_clients_share():
    with pytest.raises(ValueError, match="--issued-per-client"):
        ServerConfig(env_id=ENV, max_tasks=5000)
    with pytest.raises(ValueError, match="--issued-tasks"):
        ServerConfig(env_id=ENV, issued_per_client=20_000)


# ---- client tasks: refusals say nothing about the server's disk ----------------------------------------------


@pytest.mark.parametrize(
    "existing, missing",
    [
        (os.path.relpath(__file__, ROOT), "tests/server/no_such_file.py"),  # relative paths, from the server's cwd
        ("pyproject.toml", "secret.toml"),
        ("./rubricgym", "./no-such-dir"),
    ],
)
def test_a_client_task_gets_the_same_answer_for_existing_and_missing_paths(serve, monkeypatch, existing, missing):
    """The old check looked at the disk: an existing relative path was refused and a missing one played, so a
    client could list the server's working directory by trying names."""
    monkeypatch.chdir(ROOT)
    assert Path(existing).exists() and not Path(missing).exists()
    mine = {"id": "mine", "env_id": ENV, "prompt": "What is 2 + 2?", "hidden": {"answer": 4, "steps": ["2 + 2"]}}
    with open_ws(serve(accept_client_tasks=True)) as ws:
        replies = [call(ws, "reset", {"task": {**mine, "params": {"x": path}}}) for path in (existing, missing)]
    assert [_code(r) for r in replies] == ["TASK_REFUSED", "TASK_REFUSED"], replies
    assert replies[0]["data"]["message"] == replies[1]["data"]["message"]


def test_path_checks_read_the_text_not_the_disk(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Makefile").write_text("all:\n")
    for text in ["Makefile", "x", "2 / 3", "3/4", "3.5", "https://fictopedia.test/wiki/A_B", "e.g.", "answer.sender"]:
        assert not names_host_path(text), text  # bare words, prose, numbers and web pages are no host paths
    for text in ["a/b", "./a", "notes.txt", "data\\x", "../x", "/etc", "~/x", "file:///etc/passwd", "C:\\x"]:
        assert names_host_path(text), text
    task = Task(id="t", env_id="e", prompt="?", rubric={"id": "deepsearch/ds-1", "criteria": [{"id": "k.txt"}]})
    assert host_path_fields(task) == ["rubric.criteria[0].id"]  # a rubric's own id is a name


# ---- task lists built one at a time ---------------------------------------------------------------------------


class CountingTaskSets(CalculatorEnv):
    """A calculator whose task sets take 0.3 s of Python and record how many were being built at once."""

    lock = threading.Lock()
    building = 0
    most = 0

    def task_set(self, n: int, seed: int = 0, split: str = "train") -> list[Task]:
        cls = type(self)
        with cls.lock:
            cls.building += 1
            cls.most = max(cls.most, cls.building)
        try:
            end = time.perf_counter() + 0.3
            while time.perf_counter() < end:  # holds the interpreter lock, as deep search's world does
                pass
            return super().task_set(n, seed=seed, split=split)
        finally:
            with cls.lock:
                cls.building -= 1


def test_concurrent_tasks_requests_build_one_task_list_at_a_time(serve):
    """Four task lists built at once on four threads took the interpreter lock from the event loop: 4 requests
    of 1000 deep-search tasks held /health up to 1.4-2.0 s on the loaded 2-core development machine (0.4-0.5 s
    after)."""
    factory = type("Counting", (CountingTaskSets,), {"lock": threading.Lock(), "building": 0, "most": 0})
    server = serve(factory=factory)
    results: list[int] = []
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(open_ws(server)) for _ in range(4)]

        def ask(ws, seed: int) -> None:
            results.append(len(call(ws, "tasks", {"n": 50, "seed": seed})["data"]))

        threads = [threading.Thread(target=ask, args=(ws, i)) for i, ws in enumerate(sockets)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert results == [50] * 4
    assert factory.most == 1, f"{factory.most} task lists were built at once"
