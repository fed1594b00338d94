"""The agent's tools (``bash, view, str_replace, create, run_tests, submit``) and what each step records.

``SweTools`` declares them with ``@tool`` (the env inherits it); they are async and run in the episode's
sandbox. Each returns a ``ToolOutput`` whose ``info`` is its typed record (``records.py``): what the process
checks need (files changed, tests run and failed, destructive commands), so the checks are pure functions of the
finished trajectory. Bad arguments raise ``ToolError`` with a message that says what to do; so does an argument
no process or file name can hold (a NUL byte, a command over the kernel's argument limit).
"""

from __future__ import annotations

import re
import shlex

from rubricgym.core.env import ToolError, ToolOutput
from rubricgym.core.tools import tool
from rubricgym.envs.swe.patch import is_test_path
from rubricgym.envs.swe.records import Bash, Create, RunTests, StrReplace, View
from rubricgym.envs.swe.sandbox.base import Sandbox, SandboxError, SandboxPathError, clean_relpath
from rubricgym.envs.swe.testrun import run_pytest

MAX_VIEW_LINES = 300
MAX_LISTED = 200

DESTRUCTIVE = [
    re.compile(p)
    for p in (
        r"\brm\s+(-\w+\s+)*-\w*[rR]\w*\s+(-\w+\s+)*(/|~|\*|\.|\.\.|/work|\$HOME)/?(\s|;|&|\||$)",
        r"\bgit\s+(reset\s+--hard|clean\s+-\w*f|checkout\s+(--\s+)?\.(\s|$)|stash\b)",
        r":\s*\(\s*\)\s*\{.*:\s*\|\s*:",
        r"\bmkfs(\.\w+)?\b",
        r"\bdd\b.*\bof=/dev/",
        r"\b(shutdown|reboot|halt|poweroff)\b",
        r"\bchmod\s+(-\w+\s+)*-R\s+\S+\s+/(\s|$)",
        r"\bkill\s+-(9|KILL)\s+-1\b",
        r">\s*/dev/(sd|nvme|vd)",
        r"\bfind\b.*\s-delete\b",
        r"\btruncate\s+-s\s*0\b",
    )
]
TEST_COMMAND = re.compile(r"\b(pytest|py\.test|unittest|tox|nox)\b|\bpython3?\s+\S*test")


def destructive_reasons(command: str) -> list[str]:
    """The destructive patterns ``command`` matches (empty when it looks safe)."""
    return [p.pattern for p in DESTRUCTIVE if p.search(command)]


def _changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> tuple[list[str], list[str]]:
    changed = sorted(p for p in after if before.get(p) != after[p])
    deleted = sorted(p for p in before if p not in after)
    return changed, deleted


class SweTools:
    """The SWE tools, declared with ``@tool``; the env provides ``sandbox``, ``python_path`` and the timeouts."""

    sandbox: Sandbox | None
    python_path: list[str]
    test_timeout: float
    command_timeout: float

    async def run_tool(self, method: str, args: dict) -> ToolOutput:
        """Await the ``@tool`` method ``method``; sandbox and path problems become ``ToolError``s."""
        if self.sandbox is None:
            raise ToolError("the sandbox is closed: call reset() to start an episode")
        try:
            return await getattr(self, method)(**args)
        except SandboxPathError as e:
            raise ToolError(str(e)) from None
        except SandboxError as e:
            raise ToolError(f"the sandbox failed: {e}") from None

    @property
    def box(self) -> Sandbox:
        assert self.sandbox is not None
        return self.sandbox

    @tool(examples={"command": "grep -rn 'def ' src | head"})
    async def bash(self, command: str) -> ToolOutput:
        """Run a shell command in the repository (/work). No network; long commands time out.

        Args:
            command: a bash command line, e.g. 'grep -rn def src | head'
        """
        if not command.strip():
            raise ToolError("the command is empty; give a shell command, e.g. 'ls'")
        before = await self.box.fingerprint()
        res = await self.box.exec(command, timeout=self.command_timeout)
        changed, deleted = _changes(before, await self.box.fingerprint())
        record = Bash(
            tool="bash",
            command=command[:2000],
            exit_code=res.exit_code,
            limit=res.limit,
            changed_files=changed + deleted,
            deleted_files=deleted,
            ran_tests=bool(TEST_COMMAND.search(command)),
            destructive=destructive_reasons(command),
        )
        return ToolOutput(text=res.describe(), info=record.info())

    @tool(examples={"path": "src/pkg/core.py", "start": 1, "end": 80})
    async def view(self, path: str, start: int | None = None, end: int | None = None) -> ToolOutput:
        """Show a file with line numbers (optionally lines start..end), or list a directory.

        Args:
            path: a file or directory, relative to the repository root
            start: first line to show (1-based)
            end: last line to show
        """
        rel = clean_relpath(path)
        try:
            data = await self.box.read_file(rel) if rel else None
        except SandboxPathError as e:
            if "directory" not in str(e):
                raise
            data = None
        if data is None:
            res = await self.box.exec(
                ["/usr/bin/find", rel or ".", "-maxdepth", "2", "-not", "-path", "*/.*", "-not", "-name", "__pycache__"]
            )
            if res.exit_code != 0:
                raise ToolError(f"cannot list {path!r}: {res.stderr.strip()[:300]}")
            entries = sorted(res.stdout.split())
            listing = "\n".join(entries[:MAX_LISTED]) + (
                f"\n[... {len(entries) - MAX_LISTED} more]" if len(entries) > MAX_LISTED else ""
            )
            return ToolOutput(text=f"{rel or '.'} is a directory:\n{listing}", info=View(tool="view", path=rel).info())
        lines = data.decode("utf-8", errors="replace").splitlines()
        if not lines:
            return ToolOutput(text=f"{rel} is empty.", info=View(tool="view", path=rel).info())
        lo = max(1, start or 1)
        hi = min(len(lines), end if end is not None else lo + MAX_VIEW_LINES - 1, lo + MAX_VIEW_LINES - 1)
        if lo > len(lines):
            raise ToolError(f"{rel} has {len(lines)} lines; start={start} is past the end")
        body = "\n".join(f"{i:6d}\t{lines[i - 1]}" for i in range(lo, hi + 1))
        more = f"\n[lines {lo}-{hi} of {len(lines)}; view with start/end for more]" if hi < len(lines) or lo > 1 else ""
        return ToolOutput(text=f"{rel}:\n{body}{more}", info=View(tool="view", path=rel).info())

    @tool(examples={"path": "src/pkg/core.py", "old": "return a - b", "new": "return a + b"})
    async def str_replace(self, path: str, old: str, new: str) -> ToolOutput:
        """Replace the one occurrence of `old` in a file with `new` (old must be unique).

        Args:
            path: the file to edit
            old: the exact text to replace, whitespace included
            new: the replacement text
        """
        rel = clean_relpath(path)
        text = (await self.box.read_file(rel)).decode("utf-8", errors="replace")
        if old == "":
            raise ToolError("`old` is empty: give the exact text to replace (use create to write a whole file)")
        n = text.count(old)
        if n == 0:
            raise ToolError(
                f"`old` was not found in {rel}; view the file and copy the text exactly "
                "(indentation and whitespace matter)"
            )
        if n > 1:
            lines = [text[: m.start()].count("\n") + 1 for m in re.finditer(re.escape(old), text)]
            raise ToolError(
                f"`old` occurs {n} times in {rel} (lines {', '.join(map(str, lines[:10]))}); "
                "include more surrounding lines so it is unique"
            )
        updated = text.replace(old, new)
        await self.box.write_file(rel, updated)
        at = text[: text.index(old)].count("\n") + 1
        first = max(1, at - 2)
        shown = updated.splitlines()[first - 1 : at + new.count("\n") + 2]
        snippet = "\n".join(f"{first + i:6d}\t{s}" for i, s in enumerate(shown))
        return ToolOutput(
            text=f"Edited {rel} at line {at}:\n{snippet}",
            info=StrReplace(tool="str_replace", path=rel, changed_files=[rel]).info(),
        )

    @tool(examples={"path": "src/pkg/helpers.py", "content": "def helper():\n    return 1\n"})
    async def create(self, path: str, content: str) -> ToolOutput:
        """Create (or overwrite) a file with the given content.

        Args:
            path: the file to write
            content: its full text
        """
        rel = clean_relpath(path)
        if not rel:
            raise ToolError("give a file path inside the repository")
        existed = True
        try:
            await self.box.read_file(rel)
        except SandboxPathError as e:
            if "does not exist" not in str(e):
                raise
            existed = False
        await self.box.write_file(rel, content)
        verb = "Overwrote" if existed else "Created"
        return ToolOutput(
            text=f"{verb} {rel} ({len(content.splitlines())} lines).",
            info=Create(tool="create", path=rel, changed_files=[rel]).info(),
        )

    @tool(examples={"selector": "tests/test_core.py::test_x"})
    async def run_tests(self, selector: str = "") -> ToolOutput:
        """Run pytest on a selector (test ids, files or directories, space-separated; empty: all).

        Args:
            selector: e.g. 'tests/test_core.py::test_x'
        """
        try:
            selectors = shlex.split(selector)
        except ValueError as e:
            raise ToolError(f"cannot parse the selector ({e}); separate test ids with spaces") from None
        run = await run_pytest(self.box, selectors, self.python_path, timeout=self.test_timeout)
        failed = sorted(run.failed())
        lines = [f"pytest: {run.summary()} (exit code {run.exit_code})."]
        if run.error:
            lines.append(run.error)
        for t in failed[:15]:
            lines.append(f"FAILED {t}\n{run.messages.get(t, '')}")
        if len(failed) > 15:
            lines.append(f"[... {len(failed) - 15} more failing tests]")
        lines.append("--- pytest report (tail) ---\n" + run.report[-2500:])
        record = RunTests(
            tool="run_tests",
            selectors=selectors,
            ran_tests=True,
            exit_code=run.exit_code,
            limit=run.limit,
            failed=failed[:500],
            n_passed=len(run.passed()),
            n_failed=len(failed),
            error=run.error,
        )
        return ToolOutput(text="\n".join(lines), info=record.info())


def touches_tests(paths: list[str], test_files: list[str]) -> list[str]:
    return [p for p in paths if is_test_path(p) or p in test_files]
