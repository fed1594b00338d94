"""Leak audit: no value of a task's ``hidden`` record may reach anything the agent or a remote client sees.

A reward an optimiser can read is a reward it will read. ``audit_leaks`` plays seeded episodes of an env with its
scripted agents and a fuzz agent (``FuzzAgent``: every tool called with odd, empty, mistyped and missing
arguments, so an error text behind an unusual call is read too) through the Gymnasium face, and scans every
channel the agent side gets for the task's secrets:

- the task as the server's ``tasks`` reply hands it to a client (id, prompt, ``params``, its rubric);
- the system prompt as shown for that task and every tool's name, description and schema as rendered for it
  (at reset and whenever the tools change);
- the first observation, each step's observation text (tool output or error), its ``info`` (stage, errors and
  the env's public ``details``) and the typed ``Observation``;
- ``state()`` after every step (the server's ``/state`` and WS ``state``);
- every level of the env's ``guidance(task, level)`` (the hints the trainer shows a group that keeps failing);
- each episode's streams (observations in turn; each ``info``/``state()`` field in turn) concatenated, so a value
  split over two steps is found where its words run on, in order, across the join.

Values are compared normalised: case, accents, punctuation, underscores and hyphens are ignored, a value of
several words matches the same words in any order ("Hirox, Ke" is found in "ke hirox"), and numbers match in any
notation ("4.2e3", "4,200" and "4200.00" are 4200). Encoded forms are found too: base64 and hex (decoded from the
text), rot13 and reversed text. A hit is a leak unless

- the agent itself wrote the value first (in an action up to that step: an ordered exam, a submitted answer), or
- the env declares the field discoverable through that tool (``RubricEnv.discoverable``) and this step is where
  the episode found it: a successful call of that tool whose output shows it plainly (and that step's ``info``
  and typed observation, which restate the output). An error text, an encoded or split form, ids, ``info``,
  ``state()``, the task, the system prompt and tool specs are never discoveries; once the episode has discovered
  a value it is no news anywhere after (a summary listing the exams the agent ordered); or
- every task the audit played shows the value in its system prompt or tool specs (a list of options the env
  always shows tells nothing of one task), or an episode of another task, whose secret it is not, got the same
  text word for word (an error text with a fixed example).

Which values are secret is ``RubricEnv.secrets(task)`` (by default every text or number leaf of ``hidden``)
less those found in ``RubricEnv.public_text(task)``: text the agent may read anyway (SWE: the problem statement
and the repository at its base commit), which a value shares with the task only by coincidence.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import functools
import json
import re
import unicodedata
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

from rubricgym.core.agent import Agent, BaseAgent, tool_call
from rubricgym.core.env import RubricEnv
from rubricgym.core.leaves import leaves
from rubricgym.core.registry import make, spec
from rubricgym.core.types import Message, Task, ToolSpec

STOPWORDS = frozenset({"true", "false", "none", "null", "yes", "no", "the", "and", "not", "n/a", "unknown"})
"""Values too generic to be a secret (booleans, placeholders)."""
MIN_CHARS = 3
"""A text value shorter than this after normalisation is not scanned (it would match everywhere)."""
PLAIN = frozenset({"plain", "number"})
"""Forms in which a value can be discovered: as written, or the same number in another notation."""
MIN_SPLIT_DIGITS = 4
"""A number split over two steps is looked for from this many digits (shorter ones run on by chance: "4" then
"200" is 4200 as often as not)."""
MAX_SPLIT_WORDS = 12
"""Secrets of more words than this are not looked for across steps (a whole patch is not split by accident)."""
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_NUMBER = re.compile(
    r"(?<![\w.])[-+]?(?:\d{1,3}(?:[,_'\u00a0\u2009\u202f]\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?!\w|\.\d)"
)
_GROUPING = re.compile(r"[,_'\u00a0\u2009\u202f]")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{6,}={0,2}")
_HEX = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){4,}(?![0-9A-Fa-f])")
_ROT13 = str.maketrans("abcdefghijklmnopqrstuvwxyz", "nopqrstuvwxyzabcdefghijklm")
_SEPARATOR = " qqqzzqqq "
"""Joins decoded texts so that no secret runs from one into the next (no secret has this word)."""
T = TypeVar("T")


def normalise(text: str) -> list[str]:
    """The words of ``text``: NFKD without accents, case-folded, split on anything that is not a letter or digit."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    return _WORD.findall(plain)


def _canonical(match: re.Match[str]) -> str:
    literal = match.group()
    digits = literal.lstrip("+-")
    if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
        return literal  # a code with leading zeros ("007"), not a quantity
    try:
        number = Decimal(_GROUPING.sub("", literal))
    except InvalidOperation:
        return literal
    if not number.is_finite() or abs(number.adjusted()) > 40:
        return literal
    return format(number.normalize(), "f")


def canonical_numbers(text: str) -> str:
    """``text`` with each number written plainly: no exponent, grouping or trailing zeros ("4.2e3", "4,200" and
    "4200.00" become "4200"), so a number matches in whatever notation it is shown."""
    return _NUMBER.sub(_canonical, text) if any(c.isdigit() for c in text) else text


def _printable(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    ok = len(text) >= 3 and all(c.isprintable() or c in "\n\r\t" for c in text) and any(c.isalnum() for c in text)
    return text if ok else None


def decodings(text: str) -> dict[str, str]:
    """The text that base64 and hex runs of ``text`` decode to, by encoding (runs that decode to anything but
    printable UTF-8 are ignored): where an encoded secret is read back."""
    out: dict[str, list[str]] = {"base64": [], "hex": []}
    for m in _HEX.finditer(text):
        if (decoded := _printable(bytes.fromhex(m.group()))) is not None:
            out["hex"].append(decoded)
    for m in _BASE64.finditer(text):
        token = m.group().rstrip("=").replace("-", "+").replace("_", "/")
        for skip in range(4):  # a run may start inside the encoded text (after a "/" that is part of it)
            body = token[skip:]
            if len(body) < 6:
                break
            try:
                data = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
            except (binascii.Error, ValueError):
                continue
            if (decoded := _printable(data)) is not None:
                out["base64"].append(decoded)
                break
    return {form: _SEPARATOR.join(texts) for form, texts in out.items() if texts}


@dataclass(frozen=True)
class Secret:
    """One hidden value: where it sits in ``hidden`` (``diagnosis.aliases[2]``), its normalised words and the
    form they are looked for in (``plain``, or an encoding: ``rot13``, ``reversed``; a hit also says ``number``,
    ``base64``, ``hex`` or ``split`` for where it was read)."""

    path: str
    value: str
    words: tuple[str, ...]
    form: str = "plain"
    plain: tuple[str, ...] = ()
    """The plain form's words (empty: ``words`` are the plain form)."""

    @property
    def field(self) -> str:
        """The top-level ``hidden`` field it belongs to (what ``discoverable`` names)."""
        return re.split(r"[.\[]", self.path, maxsplit=1)[0]

    @property
    def key(self) -> str:
        """The plain value's letters and digits: one key for every form of one value."""
        return "".join(self.plain or self.words)


def make_secrets(values: Iterable[tuple[str, Any]]) -> list[Secret]:
    """Secrets of ``(path, value)`` pairs, without values too generic to scan for (booleans, stop words, one or
    two characters, one-digit numbers) and without repeats of the same words; numbers in their plain notation."""
    out: dict[tuple[str, ...], Secret] = {}
    for path, value in values:
        if isinstance(value, bool):
            continue
        text = str(value)
        if isinstance(value, float) and value.is_integer():
            text = str(int(value))
        words = tuple(normalise(canonical_numbers(text)))
        joined = " ".join(words)
        if not words or joined in STOPWORDS:
            continue
        if isinstance(value, int | float) and len(joined.replace(" ", "")) < 2:
            continue
        if not isinstance(value, int | float) and len(joined) < MIN_CHARS:
            continue
        out.setdefault(tuple(sorted(words)), Secret(path, text, words))
    return list(out.values())


def encoded_forms(secret: Secret) -> list[Secret]:
    """The rot13 and reversed forms of a secret that are worth looking for: of four or more letters and digits
    (six digits for a reversed number), and unlike the plain form."""
    compact = "".join(secret.words)
    out: list[Secret] = []
    if len(compact) >= 4 and any(c.isalpha() for c in compact):
        rot = tuple(w.translate(_ROT13) for w in secret.words)
        if sorted(rot) != sorted(secret.words):
            out.append(replace(secret, words=rot, form="rot13", plain=secret.words))
    rev = tuple(w[::-1] for w in reversed(secret.words))
    if len(compact) >= (6 if compact.isdigit() else 4) and sorted(rev) != sorted(secret.words):
        out.append(replace(secret, words=rev, form="reversed", plain=secret.words))
    return out


class Scanner:
    """Finds secrets in text: each text is normalised once, then every secret is a set lookup.

    ``find`` looks for the plain forms (numbers in any notation); with ``encodings`` the scanner also knows the
    rot13 and reversed forms, and ``hits`` reads base64 and hex too."""

    def __init__(self, secrets: Sequence[Secret], encodings: bool = False):
        self.secrets = list(secrets)
        self._all = self.secrets + ([e for s in self.secrets for e in encoded_forms(s)] if encodings else [])
        self._sizes = sorted({len(s.words) for s in self._all})
        self._compacts = sorted({c for s in self._all if (c := "".join(s.words))})
        self._split = {
            "".join(s.words): s
            for s in self._all
            if len(s.words) <= MAX_SPLIT_WORDS and not ("".join(s.words).isdigit() and len(s.key) < MIN_SPLIT_DIGITS)
        }

    def windows(self, text: str) -> set[tuple[str, ...]]:
        """Every run of 1..k consecutive words of ``text`` (sorted), k the longest secret's length."""
        return self._windows(normalise(text))

    def _windows(self, words: list[str]) -> set[tuple[str, ...]]:
        out: set[tuple[str, ...]] = set()
        for k in self._sizes:
            out.update(tuple(sorted(words[i : i + k])) for i in range(len(words) - k + 1))
        return out

    def compact(self, text: str) -> set[str]:
        """The secrets' spaceless forms ("X-ray" as "xray") that equal a run of up to k+2 consecutive words of
        ``text`` written without spaces (k the longest secret's length): of every such run, the only ones any
        membership test of this scanner asks about. Found with substring search in the joined words, a hit kept
        where it starts and ends at word boundaries."""
        return self._compact(normalise(text))

    def _compact(self, words: list[str]) -> set[str]:
        if not words or not self._compacts:
            return set()
        k = self._sizes[-1] + 2
        joined = "".join(words)
        starts: dict[int, int] = {}  # character offset in ``joined`` -> index of the word starting there
        offset = 0
        for i, w in enumerate(words):
            starts[offset] = i
            offset += len(w)
        starts[offset] = len(words)
        out: set[str] = set()
        for c in self._compacts:
            at = joined.find(c)
            while at != -1:
                first, last = starts.get(at), starts.get(at + len(c))
                if first is not None and last is not None and last - first <= k:
                    out.add(c)
                    break
                at = joined.find(c, at + 1)
        return out

    def _match(self, text: str, secrets: Sequence[Secret]) -> list[Secret]:
        words = normalise(text)
        wins, compact = self._windows(words), self._compact(words)
        return [s for s in secrets if tuple(sorted(s.words)) in wins or "".join(s.words) in compact]

    def find(self, text: str) -> list[Secret]:
        """The secrets that occur in ``text``: the same words in any order, or the same letters and digits
        with other spacing ("joint_xray" in "Joint X-ray"), numbers in any notation ("4.2e3" for 4200)."""
        if not self.secrets or not text:
            return []
        found = self._match(text, self.secrets)
        canonical = canonical_numbers(text)
        if canonical != text:
            found += [s for s in self._match(canonical, self.secrets) if s not in found]
        return found

    def hits(self, text: str) -> list[Secret]:
        """Every secret in ``text`` in any form, once per value, each as the form it was read in: plain (or
        rot13, reversed), then ``number`` (another notation), then ``base64`` or ``hex`` (decoded)."""
        if not self.secrets or not text:
            return []
        out: dict[str, Secret] = {}
        for s in self._match(text, self._all):
            out.setdefault(s.key, s)
        canonical = canonical_numbers(text)
        if canonical != text:
            for s in self._match(canonical, self.secrets):
                out.setdefault(s.key, replace(s, form="number"))
        for form, decoded in decodings(text).items():
            for s in self.find(decoded):
                out.setdefault(s.key, replace(s, form=form, plain=s.words))
        return list(out.values())

    def across(self, pieces: Sequence[str]) -> list[tuple[Secret, int, int]]:
        """Secrets whose letters and digits run on, in order, from one piece into the next ones (a value split
        over steps): ``(secret, first piece, last piece)`` for each run that crosses a join."""
        if not self._split:
            return []
        words: list[str] = []
        piece: list[int] = []
        for n, text in enumerate(pieces):
            w = normalise(text)
            words += w
            piece += [n] * len(w)
        longest = max(len(c) for c in self._split)
        out: dict[tuple[str, int, int], Secret] = {}
        joins = [i for i in range(1, len(words)) if piece[i] != piece[i - 1]]
        for b in joins:
            i = b - 1
            head = ""
            while i >= 0 and len(head) + len(words[i]) < longest:  # runs ending right before the join
                head = words[i] + head
                run = head
                for j in range(b, len(words)):
                    run += words[j]
                    if len(run) > longest:
                        break
                    if (s := self._split.get(run)) is not None:
                        out.setdefault((s.key, piece[i], piece[j]), s)
                i -= 1
        return [(replace(s, form="split", plain=s.plain or s.words), a, z) for (_, a, z), s in out.items()]


GUIDANCE = "(guidance)"
"""The ``tool`` of a hint's scan: no exemption but the env's ``hintable`` fields (nothing the agent wrote or was
shown before counts: a hint is shown before the agent acts)."""

STRUCTURAL = frozenset({"episode_id", "step_count", "max_steps", "step"})
"""Counters every episode has (``state().step_count``, ``info["step"]``, the episode id's sequence number): they
say nothing of a task, so a hidden number that equals one is not a leak."""


def _without_counters(value: Any) -> Any:
    return {k: v for k, v in value.items() if k not in STRUCTURAL} if isinstance(value, dict) else value


def flatten(value: Any) -> str:
    """A JSON-like value as text to scan: keys and values, one per line."""
    if isinstance(value, str):
        return value
    return "\n".join(f"{p}: {v}" for p, v in leaves(value)) + "\n" + json.dumps(value, default=str)


def public_task(task: Task) -> dict[str, Any]:
    """The task as the server's ``tasks`` reply hands it to an untrusted client: everything but ``hidden``."""
    return task.model_dump(mode="json", exclude={"hidden"})


@dataclass(frozen=True)
class Leak:
    """A secret found where the agent side can read it (``form``: how it was written there)."""

    env_id: str
    agent: str
    task_id: str
    channel: str
    path: str
    value: str
    form: str = "plain"
    origin: str = ""
    """Where the task came from in the user's data (``RubricEnv.task_origin``: own id and ``FILE:LINE``)."""

    def line(self) -> str:
        how = "" if self.form == "plain" else f" ({self.form})"
        task = f"task {self.task_id}" + (f", {self.origin}" if self.origin else "")
        return f"{self.channel}: hidden {self.path} = {self.value!r}{how} ({task}, agent {self.agent})"


@dataclass(frozen=True)
class _Head:
    """What one episode showed before the agent acted (system prompt, tool specs), for the every-task test."""

    task_id: str
    text: str


@dataclass
class LeakReport:
    """What ``audit_leaks`` played and found."""

    env_id: str
    episodes: int = 0
    steps: int = 0
    scanned: int = 0
    """Channel texts scanned."""
    secrets: int = 0
    leaks: list[Leak] = field(default_factory=list)
    exempt: dict[str, int] = field(default_factory=dict)
    """Hits allowed by a declaration (``discoverable`` field via a tool), because the agent wrote them first, or
    because every task shows them."""
    public: int = 0
    """Values of ``secrets(task)`` left out because the task's ``public_text`` has them."""
    pending: list[tuple[Leak, Secret]] = field(default_factory=list)
    """Hits of a value the system prompt or tool specs show: leaks unless every task shows it (``settle``)."""
    found_in: dict[Leak, int] = field(default_factory=dict)
    """The hash of the text each leak was found in (``settle`` allows it where another task got the same text)."""
    heads: list[_Head] = field(default_factory=list)
    """Each episode's system prompt and tool specs as rendered for its task."""
    shown: dict[int, set[str]] = field(default_factory=dict)
    """The hash of every text scanned -> the tasks whose episodes showed it."""
    keys: dict[str, frozenset[str]] = field(default_factory=dict)
    """Each played task's secrets (their keys)."""

    @property
    def ok(self) -> bool:
        return not self.leaks and not self.pending

    def allow(self, key: str) -> None:
        self.exempt[key] = self.exempt.get(key, 0) + 1

    def merge(self, other: LeakReport) -> None:
        """Add the counts, leaks and exemptions of ``other`` (another episode of the same audit)."""
        self.episodes += other.episodes
        self.steps += other.steps
        self.scanned += other.scanned
        self.secrets += other.secrets
        self.public += other.public
        self.leaks += other.leaks
        self.pending += other.pending
        self.heads += other.heads
        self.keys.update(other.keys)
        self.found_in.update(other.found_in)
        for h, ids in other.shown.items():
            self.shown.setdefault(h, set()).update(ids)
        for k, v in other.exempt.items():
            self.exempt[k] = self.exempt.get(k, 0) + v

    def settle(self) -> None:
        """Decide the pending hits. One of a value in the system prompt or tool specs is allowed where every
        played task (two or more) shows it there: text the same for every task tells nothing of one. One in a
        text that an episode of another task showed word for word, a task whose secret it is not, is allowed too
        (an error text with a fixed example). Any other is a leak (a task-dependent prompt, an error showing the
        task's own value)."""
        tasks = {h.task_id for h in self.heads}
        scanner = Scanner([s for _, s in self.pending])
        shows = {text: {s.key for s in scanner.find(text)} for text in {h.text for h in self.heads}}
        for leak, secret in self.pending:
            everywhere = len(tasks) >= 2 and all(secret.key in shows[h.text] for h in self.heads)
            if everywhere:
                self.allow("in every task's tool specs or system prompt")
            else:
                self.leaks.append(leak)
        self.pending = []
        kept = []
        for leak in self.leaks:
            others = self.shown.get(self.found_in[leak], set()) - {leak.task_id} if leak in self.found_in else set()
            key = "".join(normalise(canonical_numbers(leak.value)))
            if any(key not in self.keys.get(t, frozenset()) for t in others):
                self.allow("the same text in a task it is not secret for")
            else:
                kept.append(leak)
        self.leaks = kept

    def by_channel(self) -> dict[tuple[str, str], Leak]:
        """One example leak per (channel kind, hidden field)."""
        out: dict[tuple[str, str], Leak] = {}
        for leak in self.leaks + [p[0] for p in self.pending]:
            out.setdefault((re.sub(r"step \d+", "step N", leak.channel), leak.path.split("[")[0]), leak)
        return out

    def line(self) -> str:
        if self.ok:
            exempt = ", ".join(f"{k} {v}" for k, v in sorted(self.exempt.items())) or "none"
            public = f", {self.public} public values left out" if self.public else ""
            return (
                f"{self.episodes} episodes, {self.steps} steps, {self.scanned} channel texts, {self.secrets} secrets"
                f"{public}: no leak (allowed hits: {exempt})"
            )
        worst = list(self.by_channel().values())
        return f"{len(self.leaks) + len(self.pending)} leak(s), e.g. " + "; ".join(x.line() for x in worst[:4])


def audited_secrets(env: RubricEnv, task: Task) -> tuple[list[Secret], int]:
    """``secrets(task)`` less the values its ``public_text`` shows anyway, and how many were left out."""
    secrets = make_secrets(type(env).secrets(task))
    public = [t for t in type(env).public_text(task) if t]
    if not public or not secrets:
        return secrets, 0
    scanner, seen = Scanner(secrets), set()
    for text in public:
        seen |= {s.key for s in scanner.find(text)}
    return [s for s in secrets if s.key not in seen], len(seen)


@dataclass
class _Stream:
    """One channel's texts in an episode in turn; with each, whether a field discoverable there may show."""

    pieces: list[str] = field(default_factory=list)
    tools: list[str | None] = field(default_factory=list)
    """The tool whose successful output the piece is (``None``: not a discovery, whatever the tool)."""
    channels: list[str] = field(default_factory=list)
    written: list[frozenset[str]] = field(default_factory=list)
    """What the agent had written or discovered when the piece was shown."""


class _Episode:
    """The scan of one episode: tracks what the agent wrote, so a value it typed first is not a leak, and where
    it discovered each value."""

    def __init__(
        self,
        report: LeakReport,
        env: RubricEnv,
        task: Task,
        agent: str,
        secrets: tuple[list[Secret], int] | None = None,
    ):
        self.report, self.env, self.task, self.agent = report, env, task, agent
        plain, public = secrets if secrets is not None else audited_secrets(env, task)
        if secrets is None:  # (an audit counts each task's public values once)
            report.public += public
        self.scanner = Scanner(plain, encodings=True)
        self.discoverable = type(env).discoverable
        self.written: set[str] = set()
        self.head: set[str] = {s.key for s in self.scanner.find("\n".join(_tool_texts(env.tools()).values()))}
        """Keys of secrets in this episode's system prompt or tool specs (allowed only if every task shows them)."""
        self.discovered: set[str] = set()
        """Keys the current step's output showed where the field is discoverable."""
        self.known: set[str] = set()
        """Keys this episode has discovered so far: no longer news anywhere after that."""
        self.streams: dict[str, _Stream] = {}
        report.secrets += len(plain)
        report.keys[task.id] = frozenset(s.key for s in plain)

    def wrote(self, text: str) -> None:
        self.written |= {s.key for s in self.scanner.find(text)}

    def shown_before_acting(self, text: str) -> None:
        """Record the system prompt and tool specs shown for this task (see ``LeakReport.settle``)."""
        self.head |= {s.key for s in self.scanner.find(text)}
        self.report.heads.append(_Head(self.task.id, text))

    def _leak(self, channel: str, s: Secret) -> Leak:
        origin = self.env.task_origin(self.task)
        return Leak(self.report.env_id, self.agent, self.task.id, channel, s.path, s.value, s.form, origin)

    def allowed(self, s: Secret, tool: str | None) -> bool:
        """Whether ``tool``'s successful output may show the field of ``s`` (``discoverable``)."""
        tools = self.discoverable.get(s.field, frozenset())
        return tool is not None and ("*" in tools or tool in tools)

    def scan(self, channel: str, value: Any, tool: str | None = None, *, restates: bool = False) -> None:
        """Scan one channel. ``tool`` names the tool whose successful output it is (``"(guidance)"``: a hint, which
        may name the env's ``hintable`` fields and nothing else); ``restates``: the channel restates that output
        (its ``info``, the typed observation), so only what the output itself showed is discovered there."""
        self.report.scanned += 1
        text = flatten(value)
        id_free = text.replace(self.task.id, "(task id)")  # the same text, whatever task it was shown for
        digest = hash(id_free)
        self.report.shown.setdefault(digest, set()).add(self.task.id)
        beside_id: set[str] | None = None  # what the text shows beside the task id (read on the first leak)
        for s in self.scanner.hits(text):
            if tool == GUIDANCE:
                if s.field in type(self.env).hintable:
                    self.report.allow(f"{s.field} in a hint")
                else:
                    self.report.leaks.append(self._leak(channel, s))
                continue
            if s.form in PLAIN and self.allowed(s, tool) and (not restates or s.key in self.discovered):
                self.discovered.add(s.key)
                self.known.add(s.key)
                self.report.allow(f"{s.field} via {tool}")
            elif s.key in self.known:
                self.report.allow("already discovered in this episode")
            elif s.key in self.written:
                self.report.allow("agent wrote it")
            elif s.key in self.head:
                self.report.pending.append((self._leak(channel, s), s))
            else:
                leak = self._leak(channel, s)
                self.report.leaks.append(leak)
                if id_free != text and beside_id is None:
                    beside_id = {x.key for x in self.scanner.hits(id_free)}
                if beside_id is None or s.key in beside_id:  # (a value only in the id is the id's leak)
                    self.report.found_in[leak] = digest

    def add(self, stream: str, channel: str, text: str, tool: str | None = None) -> None:
        """Add a piece to one of the episode's streams (scanned across its joins by ``scan_streams``)."""
        st = self.streams.setdefault(stream, _Stream())
        st.pieces.append(text)
        st.tools.append(tool)
        st.channels.append(channel)
        st.written.append(frozenset(self.written | self.known))

    def scan_streams(self) -> None:
        """Look for values split over steps: each stream's pieces joined in turn. A run over pieces that are all
        successful outputs of a tool the field is discoverable through is found work; the rest are leaks."""
        for name, st in self.streams.items():
            if len(st.pieces) < 2:
                continue
            self.report.scanned += 1
            for s, a, z in self.scanner.across(st.pieces):
                channel = f"{name} split over {st.channels[a]} .. {st.channels[z]}"
                if all(self.allowed(s, st.tools[n]) for n in range(a, z + 1)):
                    self.report.allow(f"{s.field} via {st.tools[a]}")
                elif s.key in st.written[a]:
                    self.report.allow("agent wrote or discovered it first")
                else:
                    self.report.leaks.append(self._leak(channel, s))

    def add_fields(self, kind: str, channel: str, value: Any) -> None:
        """Add each text or number leaf of a dict channel to that field's stream (``info details.note``)."""
        for path, leaf in leaves(value) if isinstance(value, dict) else ():
            if isinstance(leaf, str | int | float) and not isinstance(leaf, bool):
                self.add(f"{kind} {path}", channel, str(leaf))


ODD_TEXTS = ("", "?", "null", "-1", "\u00fc\u00f1\u00ef \u2603", "x" * 5000)
"""Odd values for a text argument, each likely to be rejected with an error text (paths out of the task are the
shortcut battery's ``escape`` probe: a test run over ``../..`` would collect the whole file system)."""
WRONG_TYPE: dict[str, Any] = {"string": 12345, "integer": "?", "number": "?", "boolean": "?", "array": "?"}


def _kind(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    return str(kind)


def _filler(schema: Mapping[str, Any]) -> Any:
    if schema.get("examples"):
        return schema["examples"][0]
    if schema.get("enum"):
        return schema["enum"][0]
    return {"integer": 1, "number": 1, "boolean": False, "array": [], "object": {}}.get(_kind(schema), "x")


def odd_calls(tools: Sequence[ToolSpec]) -> list[str]:
    """Actions that call every tool oddly, round by round so each tool gets its first odd calls early: each text
    argument set to each of ``ODD_TEXTS`` (the others filled in), every argument of the wrong type, the required
    ones missing, an unknown argument; then an unknown tool, a broken call and plain text. Tools without
    arguments come last (their one call is valid and may end the episode)."""
    rounds: list[list[str]] = []
    with_args = [t for t in tools if t.parameters.get("properties")]
    for odd in ODD_TEXTS:
        calls = []
        for t in with_args:
            props = t.parameters.get("properties", {})
            texts = [k for k, v in props.items() if _kind(v) == "string"]
            if texts:
                base = {k: _filler(props[k]) for k in t.parameters.get("required", [])}
                calls.append(tool_call(t.name, **{**base, **dict.fromkeys(texts, odd)}))
        rounds.append(calls)
    rounds.append(
        [
            tool_call(
                t.name, **{k: WRONG_TYPE.get(_kind(v), "?") for k, v in t.parameters.get("properties", {}).items()}
            )
            for t in with_args
        ]
    )
    rounds.append([tool_call(t.name) for t in with_args if t.parameters.get("required")])
    rounds.append([tool_call(t.name, unexpected_argument="?") for t in with_args])
    rounds.append([tool_call("no_such_tool", x="?"), '<tool_call>{"name": </tool_call>', "What is the answer?"])
    rounds.append([tool_call(t.name, unexpected_argument="?") for t in tools if not t.parameters.get("properties")])
    rounds.append([tool_call(t.name) for t in tools if not t.parameters.get("properties")])
    return [c for r in rounds for c in r]


def fuzz_plan(calls: int, max_steps: int, tasks: int) -> list[tuple[int, int]]:
    """``(task index, offset)`` of the fuzz episodes: the odd calls cut into slices of one episode each, every
    slice played on two tasks (where there are two), so an error text that is the same for every task (a fixed
    example) is told from one that shows the task's own value."""
    slices = range(0, max(calls, 1), max_steps)
    return [((k + j) % tasks, offset) for k, offset in enumerate(slices) for j in range(min(2, tasks))]


class FuzzAgent(BaseAgent):
    """Calls every tool with odd, empty, mistyped and missing arguments (``odd_calls``), never doing the task:
    what the env answers an unusual call (an error text) is a channel like any other. ``offset`` starts it
    further down the list, so the episodes of an audit together reach every call."""

    name = "fuzz"

    def __init__(self, offset: int = 0):
        self.offset = offset
        self.turn = 0

    def episode(self, task: Task, seed: int | None) -> Agent:
        return FuzzAgent(self.offset)

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        calls = odd_calls(tools)
        self.turn += 1
        return calls[(self.offset + self.turn - 1) % len(calls)] if calls else "What is the answer?"


def as_text(output: str | Message) -> str:
    """An agent's output as the text the Gymnasium face takes (a structured tool call in ``<tool_call>`` tags)."""
    if isinstance(output, str):
        return output
    if output.tool_calls:
        call = output.tool_calls[0]
        return tool_call(call.name, **call.arguments)
    return output.content or ""


def _tool_texts(tools: Sequence[ToolSpec]) -> dict[str, str]:
    return {t.name: json.dumps(t.model_dump(mode="json"), ensure_ascii=False) for t in tools}


async def play_and_scan(
    report: LeakReport,
    env: RubricEnv,
    agent: Agent,
    name: str,
    task: Task,
    seed: int,
    secrets: tuple[list[Secret], int] | None = None,
) -> None:
    """Play one episode of ``task`` through the Gymnasium face and scan every channel the agent side sees
    (``secrets``: the task's ``audited_secrets``, when the caller has them)."""
    ep = _Episode(report, env, task, name, secrets)
    text, info = await asyncio.to_thread(env.reset, seed=seed, options={"task": task})
    system = env.messages[0].content or "" if env.messages and env.messages[0].role == "system" else ""
    tools = _tool_texts(env.tools())
    ep.shown_before_acting(system + "\n" + "\n".join(tools.values()))
    ep.scan("task id", task.id)
    ep.scan("task (the server's tasks reply: prompt, params, rubric)", public_task(task))
    ep.scan("system prompt", system)
    for tool_name, spec_text in tools.items():
        ep.scan(f"tool {tool_name}: name, description and schema", spec_text)
    ep.scan("first observation", text)
    ep.add("observations", "first observation", text)
    for level in range(1, type(env).guidance_levels + 1):  # hints the trainer may show: agent-visible
        ep.scan(f"guidance level {level}", env.guidance(task, level) or "", GUIDANCE)
    ep.scan("reset info", _without_counters(info))
    ep.add_fields("info", "reset info", _without_counters(info))
    state = _without_counters(env.state().model_dump(mode="json"))
    ep.scan("state() after reset", state)
    ep.add_fields("state()", "state() after reset", state)
    episode_agent = agent.episode(task, seed) if hasattr(agent, "episode") else agent
    report.episodes += 1
    for i in range(env.max_steps):
        output = as_text(await episode_agent.act(env.messages, env.tools()))
        ep.wrote(output)
        obs_text, _reward, terminated, truncated, info = await asyncio.to_thread(env.step, output)
        step = env.steps[-1]
        if step.action.tool_call is not None:
            ep.wrote(json.dumps(step.action.tool_call.arguments, default=str))
        tool = step.action.tool_call.name if step.action.tool_call and not step.action.parse_error else None
        found = tool if tool is not None and not step.tool_error else None  # an error text discovers nothing
        label = f"step {i + 1} observation ({tool or 'no tool'}{', error' if tool and not found else ''})"
        ep.discovered = set()
        ep.scan(label, obs_text, found)
        ep.add("observations", label, obs_text, found)
        ep.scan(
            f"step {i + 1} typed observation",
            step.observation.model_dump(mode="json", exclude={"messages", "tools"}),
            found,
            restates=True,
        )
        info = _without_counters(info)
        ep.scan(f"step {i + 1} info", info, found, restates=True)
        ep.add_fields("info", f"step {i + 1} info", info)
        state = _without_counters(env.state().model_dump(mode="json"))
        ep.scan(f"state() after step {i + 1}", state)
        ep.add_fields("state()", f"state() after step {i + 1}", state)
        now = _tool_texts(env.tools())
        for tool_name, spec_text in now.items():
            if tools.get(tool_name) != spec_text:
                ep.scan(f"tool {tool_name} after step {i + 1}: name, description and schema", spec_text)
        tools = now
        report.steps += 1
        if terminated or truncated:
            break
    ep.scan_streams()


class EnvLease:
    """Up to ``size`` envs of one id for episodes played concurrently: each env plays one episode at a time and is
    ``reset`` to the next episode's task (a fresh sandbox or page per episode, as when one env plays them all in
    turn); envs are made only while every made one is busy."""

    def __init__(self, factory: Callable[[], RubricEnv], size: int, first: RubricEnv | None = None):
        if size < 1:
            raise ValueError(f"concurrency must be >= 1, got {size}")
        self.factory, self.size = factory, size
        self.envs: list[RubricEnv] = []
        self._free: asyncio.Queue[RubricEnv] = asyncio.Queue()
        if first is not None:
            self.envs.append(first)
            self._free.put_nowait(first)

    @contextlib.asynccontextmanager
    async def env(self) -> AsyncIterator[RubricEnv]:
        """An env no other episode is using, for the duration of one episode."""
        if self._free.empty() and len(self.envs) < self.size:
            env = self.factory()
            self.envs.append(env)
        else:
            env = await self._free.get()
        try:
            yield env
        finally:
            self._free.put_nowait(env)

    async def aclose(self) -> None:
        """Close every env made (the first error is raised after all are closed)."""
        errors: list[BaseException] = []
        for env in self.envs:
            try:
                await env.aclose()
            except Exception as e:  # noqa: BLE001  (close the rest, then raise)
                errors.append(e)
        self.envs.clear()
        if errors:
            raise errors[0]


async def in_order(jobs: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run ``jobs`` concurrently and return their results in order; every job finishes before the first failure
    (in job order, the one a sequential run would have hit first) is raised."""
    results = await asyncio.gather(*(job() for job in jobs), return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results  # type: ignore[return-value]


def tasks_by_split(
    env: RubricEnv, n: int, seed: int, splits: Sequence[str], *, required: str | None = None
) -> dict[str, list[Task]]:
    """``n`` tasks of each of ``splits``, by split. A split the env refuses for its arguments (a ``ValueError``, e.g.
    clinical's ``test-unseen`` for a cases file) is left out, except ``required``, whose error is raised."""
    out: dict[str, list[Task]] = {}
    for split in splits:
        try:
            out[split] = list(env.task_set(n, seed=seed, split=split))
        except ValueError:
            if split == required:
                raise
    return out


async def audit_leaks(
    env_id: str,
    *,
    n_tasks: int = 3,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    agents: Mapping[str, Callable[..., Agent]] | None = None,
    splits: Sequence[str] | None = None,
    tasks: Sequence[Task] | None = None,
    concurrency: int = 4,
    fuzz: bool | None = None,
) -> LeakReport:
    """Play ``n_tasks`` tasks of each of ``splits`` (default: ``train`` and the env's ``held_out_splits``) with each
    scripted agent (or ``agents``) and, with ``fuzz`` (default: unless ``agents`` are given), the ``FuzzAgent``
    (every odd call on two tasks, see ``fuzz_plan``), and scan every channel.

    ``tasks`` replaces the generated tasks (e.g. a bundled case file's). At most ``concurrency`` episodes are in
    flight, each in its own env (see ``EnvLease``); the report is the same as for episodes played one by one."""
    cls = spec(env_id).load()
    factories = dict(agents) if agents is not None else cls.agents()
    report = LeakReport(env_id)
    kw = env_kwargs or {}
    first = make(env_id, **kw)
    lease = EnvLease(lambda: make(env_id, **kw), concurrency, first)
    try:
        played = (
            list(tasks)
            if tasks is not None
            else [
                t
                for part in tasks_by_split(first, n_tasks, seed, splits or ("train", *cls.held_out_splits)).values()
                for t in part
            ]
        )
        secrets = [audited_secrets(first, task) for task in played]  # public text read once per task
        report.public = sum(public for _, public in secrets)

        async def episode(name: str, agent: Agent, i: int) -> LeakReport:
            part = LeakReport(env_id)
            async with lease.env() as env:
                await play_and_scan(part, env, agent, name, played[i], seed + i, secrets[i])
            return part

        jobs: list[Callable[[], Awaitable[LeakReport]]] = [
            functools.partial(episode, name, factory(seed=seed + i), i)
            for name, factory in factories.items()
            for i in range(len(played))
        ]
        if (agents is None if fuzz is None else fuzz) and played:
            jobs += [
                functools.partial(episode, "fuzz", FuzzAgent(offset), i)
                for i, offset in fuzz_plan(len(odd_calls(first.tools())), first.max_steps, len(played))
            ]
        for part in await in_order(jobs):
            report.merge(part)
    finally:
        await lease.aclose()
    report.settle()
    return report
