"""The ``swe-v0`` teacher: fixes a bug from what the tools show it, never from the task's hidden record.

Unlike the oracle (which applies the gold patch), the teacher works the way a policy must: it runs the test suite,
reads the failing assertions for the library functions they call, greps for where those functions are defined,
views the file, then tries one-line fixes of the kinds small bugs take (a comparison off at its boundary, an
off-by-one, a missing guard, a dropped ``.lower()`` or ``strip`` argument, a literal where a parameter belongs, a
result not cut to a width, an accumulator not flushed after its loop) in the function under test, checking each with
the tests and undoing it when they still fail, and submits once the suite passes. It never receives the task
(``SeededAgent.episode`` drops it), so its trajectories are fit to clone (DESIGN.md: oracles vs teachers). Its seed
varies its path: whether it lists the repository first, how it greps, what it views, the order of equally likely
fixes and which tests it reruns.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re
import shlex
from dataclasses import dataclass, field

import numpy as np

from rubricgym.core.agent import ReplayingAgent, last_observation, tool_call
from rubricgym.core.pyast import parse_module
from rubricgym.core.types import Message
from rubricgym.envs.swe.patch import is_test_path

_FAILED = re.compile(r"^FAILED (\S+)", re.M)
_SUMMARY = re.compile(r"^pytest: (.*) \(exit code (-?\d+)\)\.", re.M)
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_FRAME = re.compile(r"^(\S+\.py):(\d+): in (\w+)", re.M)
_GREP_DEF = re.compile(r"^(?:\./)?(\S+\.py):(\d+):\s*(?:async\s+)?def\s+(\w+)\s*\(", re.M)
_VIEW_LINE = re.compile(r"^\s*(\d+)\t(.*)$")
_COMPARE = re.compile(r"(?<=\s)(<=|>=|==|!=|<|>)(?=\s)")
_BOUNDARY = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
_MIRROR = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}
_INT = re.compile(r"(?<![\w.])(\d+)(?![\w.])")
_PUNCTUATION = ".,;:!?\\\"'()"
_IGNORED_CALLS = set(dir(builtins)) | set(keyword.kwlist) | {"assert"}


@dataclass
class Candidate:
    """One tentative fix: replace lines ``first..last`` (1-based, of the viewed file) with ``new``."""

    first: int
    last: int
    new: str
    priority: float
    kind: str


@dataclass
class _Work:
    """What the teacher has learned in this episode (only from observations)."""

    statement: str = ""
    failing: list[str] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)
    path: str | None = None
    def_line: int = 0
    lines: dict[int, str] = field(default_factory=dict)
    candidates: list[Candidate] = field(default_factory=list)
    current: Candidate | None = None
    base: str = ""
    """The text of the current try's lines in the file before the try (the original, or the previous try there)."""
    context: int = 0


class Teacher(ReplayingAgent):
    """Reproduce, localise from the failure output, try fixes of the usual bug kinds at the function under test,
    verify with the tests, submit. Acts only on ``messages``; one instance per episode (``episode``)."""

    name = "teacher"
    budget = 30
    """The episode's step limit it plans for (``SweEnv.default_max_steps``): it submits on the last step."""

    def _restart(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.work = _Work()
        self.phase = "start"
        self.acted = 0

    def _decide(self, messages: list[Message]) -> str:
        turn, self.acted = self.acted, self.acted + 1
        if turn >= self.budget - 1:
            return tool_call("submit")
        if turn == 0:
            self.work.statement = next((m.content or "" for m in messages if m.role == "user"), "")
        return self._next(last_observation(messages) if turn else "")

    # ---- the phases ----------------------------------------------------------------------------------------

    def _next(self, seen: str) -> str:
        handler = {
            "start": self._start,
            "listed": self._reproduce,
            "reproduced": self._after_reproduce,
            "grepped": self._after_grep,
            "viewed": self._after_view,
            "edited": self._after_edit,
            "tested": self._after_test,
            "reverted": self._after_revert,
            "final": self._after_final,
        }[self.phase]
        return handler(seen)

    def _start(self, seen: str) -> str:
        if self.rng.random() < 0.4:
            self.phase = "listed"
            return (
                tool_call("view", path=".")
                if self.rng.random() < 0.5
                else tool_call("bash", command="ls -R | head -40")
            )
        return self._reproduce(seen)

    def _reproduce(self, seen: str) -> str:
        self.phase = "reproduced"
        return tool_call("run_tests", selector="")

    def _after_reproduce(self, seen: str) -> str:
        w = self.work
        w.failing = list(dict.fromkeys(_FAILED.findall(seen)))
        if not w.failing and _passed(seen):
            return tool_call("submit")  # nothing fails: nothing for the tests to show
        frames = [(p, int(n), f) for p, n, f in _FRAME.findall(seen) if not is_test_path(p)]
        if frames:  # the traceback runs into the library: that frame is where to look
            w.functions = list(dict.fromkeys(f for _, _, f in frames))
        else:
            w.functions = called_functions(seen, w.failing)
        return self._grep()

    def _grep(self) -> str:
        if not self.work.functions:
            self.phase = "final"
            return tool_call("run_tests", selector="")
        name = self.work.functions[0]
        self.phase = "grepped"
        forms = [
            f"grep -rn 'def {name}(' --include='*.py' .",
            f"grep -rnE 'def {name} ?\\(' --include=*.py .",
            f"grep -rn 'def {name}' . --include='*.py'",
        ]
        return tool_call("bash", command=forms[int(self.rng.integers(len(forms)))])

    def _after_grep(self, seen: str) -> str:
        w = self.work
        name = w.functions.pop(0)
        hits = [(p, int(n)) for p, n, f in _GREP_DEF.findall(seen) if f == name and not is_test_path(p)]
        if not hits:
            return self._grep()
        w.path, w.def_line = hits[0]
        self.phase = "viewed"
        if self.rng.random() < 0.5:
            return tool_call("view", path=w.path)
        return tool_call("view", path=w.path, start=max(1, w.def_line - 2), end=w.def_line + 60)

    def _after_view(self, seen: str) -> str:
        w = self.work
        w.lines = viewed_lines(seen)
        if w.def_line not in w.lines:
            self.phase = "final"
            return tool_call("run_tests", selector="")
        w.candidates = self._order(candidates(w.lines, w.def_line, w.statement))
        return self._try_next()

    def _try_next(self) -> str:
        w = self.work
        if not w.candidates:
            self.phase = "final"
            return tool_call("run_tests", selector="")
        nxt = w.candidates.pop(0)
        prev, w.current, w.context = w.current, nxt, 0
        same = prev is not None and (prev.first, prev.last) == (nxt.first, nxt.last)
        w.base = prev.new if prev is not None and same else self._original(nxt)  # same lines: no undo in between
        return self._edit(w.base, nxt.new)

    def _edit(self, old: str, new: str) -> str:
        self.phase = "edited"
        assert self.work.path is not None
        return tool_call("str_replace", path=self.work.path, old=old, new=new)

    def _after_edit(self, seen: str) -> str:
        w = self.work
        c = w.current
        assert c is not None
        if seen.startswith("Edited "):
            self.phase = "tested"
            if w.failing and self.rng.random() < 0.5:
                return tool_call("run_tests", selector=" ".join(shlex.quote(t) for t in w.failing))
            return tool_call("run_tests", selector="")
        if "occurs" in seen and w.context < 3 and c.first - w.context - 1 in w.lines:
            w.context += 1  # not unique in the file: take one more line before it
            return self._edit(self._lead() + w.base, self._lead() + c.new)
        w.current = None  # the try did not apply
        if w.base != self._original(c):  # the previous try of these lines is still in the file: undo it
            self.phase = "reverted"
            return tool_call("str_replace", path=w.path or "", old=w.base, new=self._original(c))
        return self._try_next()

    def _after_test(self, seen: str) -> str:
        w = self.work
        if _passed(seen):
            self.phase = "final"
            if _ran_all(seen, w.failing):
                return tool_call("submit")
            return tool_call("run_tests", selector="")
        if (
            w.candidates
            and w.current is not None
            and (w.candidates[0].first, w.candidates[0].last)
            == (
                w.current.first,
                w.current.last,
            )
        ):
            return self._try_next()
        return self._revert()

    def _revert(self) -> str:
        w = self.work
        c = w.current
        assert c is not None
        self.phase = "reverted"
        return tool_call(
            "str_replace", path=w.path or "", old=self._lead() + c.new, new=self._lead() + self._original(c)
        )

    def _after_revert(self, seen: str) -> str:
        self.work.current = None
        return self._try_next()

    def _after_final(self, seen: str) -> str:
        if _passed(seen) or not self.work.candidates:
            return tool_call("submit")
        self.phase = "tested"
        return self._after_test(seen)

    # ---- helpers -------------------------------------------------------------------------------------------

    def _original(self, c: Candidate) -> str:
        return "\n".join(self.work.lines[i] for i in range(c.first, c.last + 1))

    def _lead(self) -> str:
        """The ``context`` lines before the current try, which make its text unique in the file."""
        w, c = self.work, self.work.current
        if c is None or not w.context:
            return ""
        return "\n".join(w.lines[i] for i in range(c.first - w.context, c.first)) + "\n"

    def _order(self, found: list[Candidate]) -> list[Candidate]:
        """Lines in order of their likeliest fix (ties broken by the seed), each line's fixes together, so most
        tries go straight from one fix of a line to the next without an undo."""
        jitter = {span: float(self.rng.random()) for span in {(c.first, c.last) for c in found}}
        best: dict[tuple[int, int], float] = {}
        for c in found:
            best[(c.first, c.last)] = min(best.get((c.first, c.last), 9.0), c.priority)
        return sorted(
            found, key=lambda c: (best[(c.first, c.last)] + 0.9 * jitter[(c.first, c.last)], c.first, c.priority)
        )


def _passed(seen: str) -> bool:
    m = _SUMMARY.search(seen)
    return bool(m and m.group(2) == "0" and "failed" not in m.group(1) and "error" not in m.group(1))


def _ran_all(seen: str, failing: list[str]) -> bool:
    """Whether the run was the whole suite (more tests passed than were failing at first)."""
    m = _SUMMARY.search(seen)
    passed = re.search(r"(\d+) passed", m.group(1)) if m else None
    return bool(passed and int(passed.group(1)) > len(failing))


def called_functions(report: str, failing: list[str]) -> list[str]:
    """The functions the failing tests' assertions call (most called first), read from the failure report."""
    tests = {t.rsplit("::", 1)[-1] for t in failing}
    counts: dict[str, int] = {}
    for line in report.splitlines():
        s = line.strip().lstrip(">").strip()
        if not s.startswith("assert ") and "==" not in s:
            continue
        if s.startswith("E "):
            continue
        for name in _CALL.findall(s):
            if name not in _IGNORED_CALLS and name not in tests:
                counts[name] = counts.get(name, 0) + 1
    return sorted(counts, key=lambda n: -counts[n])


def viewed_lines(view: str) -> dict[int, str]:
    """Line number -> text of a ``view`` observation."""
    out = {}
    for line in view.splitlines():
        m = _VIEW_LINE.match(line)
        if m:
            out[int(m.group(1))] = m.group(2)
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def function_span(lines: dict[int, str], def_line: int) -> list[int]:
    """The line numbers of the function defined at ``def_line`` (up to the next line at its indentation)."""
    base = _indent(lines[def_line])
    out = [def_line]
    n = def_line + 1
    while n in lines:
        text = lines[n]
        if text.strip() and _indent(text) <= base:
            break
        out.append(n)
        n += 1
    while len(out) > 1 and not lines[out[-1]].strip():
        out.pop()
    return out


def _parameters(signature: str) -> tuple[dict[str, str | None], list[str]]:
    """The function's parameters with their default's source (or None), and the int-typed ones."""
    try:
        node = parse_module(signature.strip() + "\n    pass\n").body[0]
    except SyntaxError:
        return {}, []
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return {}, []
    args = node.args.args
    defaults: list[ast.expr | None] = [None] * (len(args) - len(node.args.defaults)) + list(node.args.defaults)
    params = {a.arg: (ast.unparse(d) if d is not None else None) for a, d in zip(args, defaults, strict=True)}
    ints = [a.arg for a in args if a.annotation is not None and ast.unparse(a.annotation) == "int"]
    return params, ints


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def candidates(lines: dict[int, str], def_line: int, statement: str = "") -> list[Candidate]:  # noqa: C901 - one pass over the bug kinds
    """Tentative one-site fixes in the function at ``def_line`` of the viewed ``lines``, each with a priority
    (lower: likelier). The kinds are those small bugs take; which apply is read from the code and from the words
    of the issue and the function's docstring."""
    span = function_span(lines, def_line)
    params, ints = _parameters(lines[def_line])
    body = [n for n in span if n != def_line]
    doc = " ".join(lines[n] for n in body if '"""' in lines[n] or "'''" in lines[n])
    hints = _words(statement) | _words(doc)
    locals_ = {}
    for n in body:
        m = re.match(r"\s*(\w+)(?:\s*:\s*[^=]+)?\s*=\s*(\"\"|''|\[\]|0|None)\s*$", lines[n])
        if m:
            locals_[m.group(1)] = n
    out: list[Candidate] = []

    def add(n: int, new: str, priority: float, kind: str, last: int | None = None) -> None:
        if new != lines[n]:
            out.append(Candidate(n, last or n, new, priority, kind))

    for n in body:
        line = lines[n]
        code = line.strip()
        if not code or code.startswith(("#", '"""', "'''")):
            continue
        ids = _words(code)
        near = 0.3 if ids & hints - {"if", "return", "for", "in", "and", "or", "not"} else 0.0
        for m in _COMPARE.finditer(line):
            op = m.group(1)
            add(n, line[: m.start()] + _BOUNDARY[op] + line[m.end() :], 1.0 - near, "boundary")
            if op in _MIRROR:
                add(n, line[: m.start()] + _MIRROR[op] + line[m.end() :], 3.0 - near, "mirror")
            cond = re.match(r"(\s*(?:if|elif|while|return)\s+)(.*?)(:?)$", line)
            if cond and op not in ("==", "!="):
                head, expr, colon = cond.groups()
                left_start = len(head)
                left = line[left_start : m.start()].rstrip()
                and_at = left.rfind(" and ")
                if and_at != -1:
                    left_start += and_at + 5
                    left = left[and_at + 5 :]
                if "len(" in left or "+" in left:
                    for delta in (" + 1", " - 1"):
                        add(n, line[:left_start] + left + delta + " " + line[m.start() :], 2.0 - near, "off_by_one")
        for m in _INT.finditer(line):
            if "[" in line[: m.start()] and "]" in line[m.end() :]:
                continue  # slice bounds: left to the slice kinds
            k = int(m.group(1))
            for v in (k + 1, k - 1):
                if v >= 0:
                    add(n, line[: m.start()] + str(v) + line[m.end() :], 2.5 - near, "off_by_one")
        guard = re.match(r"(\s*(?:if|elif|while)\s+)(.*):\s*$", line)
        if guard:
            for var, at in locals_.items():
                cond_text = guard.group(2)
                guarded = cond_text.strip() == var or cond_text.startswith(f"{var} and")
                if at < n and re.search(rf"\b{var}\b", cond_text) and not guarded:
                    add(n, f"{guard.group(1)}{var} and {cond_text}:", 2.0 - near, "missing_guard")
        if hints & {"case", "lower", "insensitive", "lowercased", "cased"}:
            for m in re.finditer(r"\b(\w+)\.split\(", line):
                add(n, line[: m.end(1)] + ".lower()" + line[m.end(1) :], 1.5, "dropped_call")
            for m in re.finditer(r"\w+\[\d*:\d*\](?!\.)", line):
                add(n, line[: m.end()] + ".lower()" + line[m.end() :], 1.5, "dropped_call")
        if hints & {"punctuation", "punctuations"}:
            for m in re.finditer(r"\.strip\(\)", line):
                add(n, line[: m.start()] + f'.strip("{_PUNCTUATION}")' + line[m.end() :], 1.0, "dropped_argument")
        for p, default in params.items():
            for form in _literal_forms(default):
                if form in line and not re.search(rf"\b{p}\b", line):
                    add(n, line.replace(form, p, 1), 1.0, "ignored_parameter")
        ret = re.match(r"(\s*return\s+)(\w+)\s*$", line)
        if ret and ret.group(2) in params:
            for w in ints:
                add(n, f"{ret.group(1)}{ret.group(2)}[:{w}]", 1.5 - near, "unbounded_result")
    out += _flushes(lines, body)
    return out


def _literal_forms(default: str | None) -> list[str]:
    """How a parameter's default may be written in the body: ``'-'`` also as ``"-"``; nothing for None or a
    name (only a literal left in the body stands for the parameter it should have been)."""
    if not default or default == "None":
        return []
    try:
        value = ast.literal_eval(default)
    except (ValueError, SyntaxError):
        return []
    if isinstance(value, str):
        return list(dict.fromkeys([repr(value), '"' + value.replace('"', '\\"') + '"']))
    return [default] if isinstance(value, int | float) and not isinstance(value, bool) and len(default) > 1 else []


def _flushes(lines: dict[int, str], body: list[int]) -> list[Candidate]:
    """An accumulator emptied into a list inside a loop (``elif current: words.append(...)``) but not after it:
    the same flush added before the function's ``return``."""
    out = []
    returns = [n for n in body if lines[n].strip().startswith("return ")]
    for n in body:
        m = re.match(r"\s*(?:if|elif)\s+(\w+)\s*:\s*$", lines[n])
        if not m or n + 1 not in lines or not returns:
            continue
        append = lines[n + 1].strip()
        if not re.match(r"\w+\.(append|extend)\(", append):
            continue
        ret = returns[-1]
        indent = " " * _indent(lines[ret])
        if any(lines[k].strip() == f"if {m.group(1)}:" and _indent(lines[k]) == len(indent) for k in body if k < ret):
            continue  # already flushed
        new = f"{indent}if {m.group(1)}:\n{indent}    {append}\n{lines[ret]}"
        out.append(Candidate(ret, ret, new, 1.2, "dropped_branch"))
    return out
