"""The pytest runner that runs inside a sandbox; its verdicts are hard for the code under test to rewrite.

Standard library only: ``testrun`` passes this file's source to the sandbox's Python with ``-c``. Two processes:

* the **parent** (``python3 -I``: no ``PYTHONPATH``, no working-directory imports, so no repository code ever
  loads in it) reads a one-time key from a file the host wrote and deletes it, makes itself non-dumpable (the
  tested code, same uid, can then neither read its memory or environment nor open its file descriptors), and
  starts the child with a private results pipe, after deleting the repository's cached bytecode (the child
  runs with ``-B``: it compiles the sources as they are and writes no bytecode back). It prints the one line the
  host trusts, ``SENTINEL KEY JSON``, after the child is gone; anything the child prints is captured, never
  passed through.
* the **child** imports the standard library and pytest first (from the read-only runtime), only then puts the
  repository's import roots on ``sys.path`` (after the standard library, so a ``json.py`` in the repository
  shadows nothing of ours) and runs ``pytest.main`` with a recorder that writes each outcome to the pipe as it
  happens. At the end it checks that pytest's report and hook machinery is the one it loaded and lists
  repository modules that hold pytest, ``_pytest`` or ``pluggy`` objects: both are reported as tampering.

Output on stdout is irrelevant to the verdict, so ``os._exit(0)`` at import or a forged results line printed by
the tested code only loses the results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

SENTINEL = "@@RUBRICGYM_PYTEST@@"
REPORT_TAIL = 12_000
RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
MACHINERY = ("pytest", "_pytest", "pluggy", "py")
WORKDIR = "/work"
RUNTIME = "/opt/rubricgym"


def _guarded() -> list[tuple[object, str, object]]:
    """``(owner, attribute, value)`` of what a verdict rests on, as loaded before any repository code."""
    import _pytest.reports
    import _pytest.runner
    import pluggy

    out: list[tuple[object, str, object]] = []
    for owner, names in (
        (
            _pytest.runner,
            (
                "call_and_report",
                "runtestprotocol",
                "pytest_runtest_makereport",
                "CallInfo",
                "check_interactive_exception",
            ),
        ),
        (_pytest.reports, ("TestReport", "CollectReport", "BaseReport")),
        (getattr(pluggy, "HookCaller", pluggy), ("__call__",)),
    ):
        out += [(owner, n, vars(owner).get(n)) for n in names]
    for cls in (_pytest.reports.TestReport, _pytest.reports.BaseReport, _pytest.runner.CallInfo):
        out += [(cls, n, v) for n, v in list(vars(cls).items())]
    return out


def _replaced(guarded: list[tuple[object, str, object]]) -> list[str]:
    return [f"{getattr(o, '__name__', o)}.{n}" for o, n, v in guarded if vars(o).get(n) is not v]


def _machinery_holders(watched: list[str]) -> list[str]:
    """``path: why`` for each watched repository module (files the agent changed) whose globals hold pytest,
    ``_pytest`` or ``pluggy`` modules or objects."""
    found = []
    wanted = {f"{WORKDIR}/{w}" for w in watched}
    for mod in list(sys.modules.values()):
        path = getattr(mod, "__file__", None) or ""
        if path not in wanted:
            continue
        for key, value in list(vars(mod).items()):
            origin = getattr(value, "__name__", "") if type(value) is type(sys) else getattr(value, "__module__", "")
            if isinstance(origin, str) and origin.split(".")[0] in MACHINERY:
                found.append(f"{path[len(WORKDIR) + 1 :]}: holds pytest machinery at run time: {key} is {origin}")
                break
    return found


def child(fd: int, roots: list[str], selectors: list[str]) -> int:
    import contextlib
    import io

    sys.path.insert(0, RUNTIME)
    import pytest

    guarded = _guarded()
    # the standard library first, then the repository, then the runtime: the repository shadows nothing of ours
    sys.path.remove(RUNTIME)
    stdlib = [p for p in sys.path if "-packages" not in p]
    sys.path[:] = stdlib + roots + [RUNTIME] + [p for p in sys.path if p not in stdlib]
    os.environ["PYTHONPATH"] = ":".join([*roots, RUNTIME])  # for subprocesses the tests start
    results: dict[str, str] = {}

    def send(kind: str, **data: object) -> None:
        with contextlib.suppress(OSError):
            os.write(fd, (json.dumps({"kind": kind, **data}) + "\n").encode())

    def message(report: object) -> str:
        longrepr = getattr(report, "longrepr", None)
        if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (file, line, reason)
            return str(longrepr[2]).removeprefix("Skipped: ")[-600:]
        text = (getattr(report, "longreprtext", "") or "").strip().splitlines()
        return "\n".join(text[-6:])[-600:]

    class Recorder:
        def pytest_runtest_logreport(self, report):
            if report.when == "call":
                outcome = report.outcome
            elif report.failed:
                outcome = "error"
            elif report.skipped and report.when == "setup":
                outcome = "skipped"
            else:
                return
            if RANK[outcome] >= RANK.get(results.get(report.nodeid, ""), -1):
                results[report.nodeid] = outcome
                send(
                    "test",
                    id=report.nodeid,
                    outcome=outcome,
                    message=message(report) if outcome != "passed" else "",
                )

        def pytest_collection_finish(self, session):
            if "--collect-only" in selectors:  # the ids exist: ``testrun.unknown_ids`` names the ones that do not
                send("collected", ids=[item.nodeid for item in session.items])

        def pytest_collectreport(self, report):
            if report.failed:
                send("test", id=report.nodeid or "<collection>", outcome="error", message=message(report))
            elif report.skipped:  # a whole module skipped (``pytest.importorskip`` at import): its tests never run
                send("test", id=report.nodeid or "<collection>", outcome="skipped", message=message(report))

    args = [
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        f"--rootdir={WORKDIR}",
        "-q",
        "-rfE",
        "--tb=short",
        "--color=no",
        "-W",
        "ignore::DeprecationWarning",
        *selectors,
    ]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            code = int(pytest.main(args, plugins=[Recorder()]))
        except BaseException as e:  # noqa: BLE001  (SystemExit from tested code included)
            print(f"pytest crashed: {type(e).__name__}: {e}")
            code = 3
    tampering = [f"pytest machinery was replaced at run time: {n}" for n in _replaced(guarded)[:10]]
    tampering += _machinery_holders(json.loads(os.environ.get("RUBRICGYM_WATCH", "[]")))[:10]
    send("end", exit=code, tampering=tampering)
    sys.stdout.write(buf.getvalue()[-REPORT_TAIL:])
    return code


def drop_bytecode(root: str) -> None:
    """Delete every ``__pycache__`` folder and ``.pyc`` file under ``root`` (links are not followed).

    Python trusts a cached ``.pyc`` whose recorded source mtime (whole seconds) and size match the source, so
    a same-size edit within the second of the last compile, or a planted ``.pyc``, would make the tests run code
    the repository does not contain. The child runs with ``-B`` and writes none back."""
    import contextlib
    import shutil

    for top, dirs, files in os.walk(root, followlinks=False):
        for d in [d for d in dirs if d == "__pycache__"]:
            dirs.remove(d)
            shutil.rmtree(os.path.join(top, d), ignore_errors=True)
        for f in files:
            if f.endswith(".pyc"):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(top, f))


def parent(key_file: str, selectors: list[str]) -> int:
    import contextlib
    import ctypes
    import threading

    try:
        with open(key_file) as f:
            key = f.read().strip()
        os.unlink(key_file)
    except OSError as e:
        print(f"no grading key: {e}")
        return 2
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: our /proc entries become root-only
    drop_bytecode(WORKDIR)
    r, w = os.pipe()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    roots = [p for p in os.environ.get("PYTHONPATH", "").split(":") if p and p != RUNTIME]
    env["RUBRICGYM_ROOTS"] = json.dumps(roots)
    proc = subprocess.Popen(
        [sys.executable, "-I", "-B", "-c", SOURCE, "child", str(w), *selectors],
        pass_fds=(w,),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=WORKDIR,
        close_fds=True,
    )
    os.close(w)
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(os.fdopen(r, "rb", closefd=True)), daemon=True)
    reader.start()
    out = b""
    while proc.stdout is not None and (chunk := proc.stdout.read(65536)):
        out = (out + chunk)[-2 * REPORT_TAIL :]  # a flood of output costs no memory
    proc.wait()
    reader.join(10)
    results: dict[str, str] = {}
    messages: dict[str, str] = {}
    end: dict | None = None
    collected: list[str] = []
    for raw in lines:
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(rec, dict):
            continue
        if rec.get("kind") == "test" and isinstance(rec.get("id"), str) and rec.get("outcome") in RANK:
            tid, outcome = rec["id"], rec["outcome"]
            if RANK[outcome] >= RANK.get(results.get(tid, ""), -1):
                results[tid] = outcome
                if rec.get("message"):
                    messages[tid] = str(rec["message"])[-600:]
        elif rec.get("kind") == "collected" and isinstance(rec.get("ids"), list):
            collected += [str(i) for i in rec["ids"]]
        elif rec.get("kind") == "end":
            end = rec
    tampering = list(end.get("tampering", [])) if end else []
    error = None
    if end is None:
        error = f"the test process ended without reporting (exit code {proc.returncode})"
    elif proc.returncode != end.get("exit"):
        error = f"the test process exited {proc.returncode} after pytest reported {end.get('exit')}"
    verdict = {
        "exit": proc.returncode,
        "results": results,
        "messages": messages,
        "tampering": tampering,
        "collected": collected,
        "error": error,
        "report": out.decode("utf-8", "replace")[-REPORT_TAIL:],
    }
    sys.stdout.write(f"\n{SENTINEL} {key} {json.dumps(verdict)}\n")
    return 0


SOURCE = os.environ.get("RUBRICGYM_RUNNER", "")
"""This file's source, which the host passes in the environment so the parent can start the child with it."""

if __name__ == "__main__":  # python3 -I -c SOURCE parent KEYFILE SELECTORS... | child FD SELECTORS...
    if sys.argv[1] == "parent":
        sys.exit(parent(sys.argv[2], sys.argv[3:]))
    sys.exit(child(int(sys.argv[2]), json.loads(os.environ.get("RUBRICGYM_ROOTS", "[]")), sys.argv[3:]))
