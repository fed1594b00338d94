"""The deep-search ``teacher``: an honest scripted agent whose episodes are fit for behaviour cloning.

Unlike the ``oracle`` (which reads ``Task.hidden`` and searches the chain's names), the teacher acts only on what
the policy sees: the question and the tool outputs so far. Each turn it re-reads the chat, parses the question into
the chain's slots (the answer, then each entity it is related to, with the constraints on each: a kind, a year or a
decade, a region, a river, a size), collects what the encyclopedia showed (attribute and relation sentences, page
titles and URLs from search results, opened windows and ``find`` matches), and picks the next step:

- search a slot's description (its kind and the exact values of its constraints) when no page is promising yet;
- open the page of the best candidate (a title it has seen) to read its relations and check its constraints;
- answer ``Answer: <name>`` once a chain of known relations links candidates that meet every constraint (or when
  its turn budget is spent), with each supporting sentence it saw cited inline as ``[n](url)``.

Its seed varies the path (which slot it starts from when two are as searchable, the wording and size of its
searches, the order of the cited facts) so a clone does not learn a single script. Its output is the exact
``<tool_call>{...}</tool_call>`` text the env parses, as the policy must write it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from rubricgym.core.agent import Agent, SeededAgent, tool_call
from rubricgym.core.types import Message, Task, ToolSpec
from rubricgym.envs.deepsearch.questions import FORWARD, INVERSE
from rubricgym.envs.deepsearch.world import EVENT_KINDS, OCCUPATIONS, ORG_KINDS, PLACE_KINDS, PREDICATES

KIND_OF_NOUN: dict[str, str] = {
    **{n: "person" for n in OCCUPATIONS},
    **{n: "organisation" for n in ORG_KINDS},
    **{n: "place" for n in PLACE_KINDS},
    **{n: "event" for n in EVENT_KINDS},
    **{k: k for k in ("person", "organisation", "place", "event")},
}
"""The head noun of a question's slot -> the kind of entity it names."""
KIND_ATTR = {"person": "occupation", "place": "place_kind", "organisation": "org_kind", "event": "event_kind"}
ROLES = PREDICATES
"""Predicate -> (subject kind, object kind): the corpus's public schema, what any reader of its pages learns."""
_LINKS = sorted(
    [(phrase, pred, True) for pred, phrase in FORWARD.items()] + [(p, pred, False) for pred, p in INVERSE.items()],
    key=lambda x: -len(x[0]),
)
_LINK = re.compile(r" (" + "|".join(re.escape(p) for p, _, _ in _LINKS) + r") (?:a|an) ")
_NAME = r"[A-Z0-9][\w'’ ,-]*?"
_SENTENCES = [  # what a page says, sentence by sentence: (pattern, what it states)
    (re.compile(rf"^(?P<s>{_NAME}) \(born (?P<birth_year>\d+)\) is an? (?P<occupation>[a-z ]+)$"), "person"),
    (
        re.compile(
            rf"^(?P<s>{_NAME}) is an? (?P<place_kind>{'|'.join(PLACE_KINDS)}) in the (?P<region>\w+) region, "
            r"founded in (?P<founded>\d+)$"
        ),
        "place",
    ),
    (
        re.compile(
            rf"^The (?P<river>\w+) River flows through (?P<s>{_NAME}), which has about (?P<population>[\d,]+) "
            r"inhabitants$"
        ),
        "place",
    ),
    (
        re.compile(rf"^(?P<s>{_NAME}) is an? (?P<org_kind>{'|'.join(ORG_KINDS)}) established in (?P<founded>\d+)$"),
        "organisation",
    ),
    (re.compile(rf"^(?P<s>{_NAME}) employs about (?P<staff>[\d,]+) people$"), "organisation"),
    (
        re.compile(rf"^The (?P<s>{_NAME}) was an? (?P<event_kind>{'|'.join(EVENT_KINDS)}) held in (?P<year>\d+)$"),
        "event",
    ),
    (re.compile(rf"^The (?P<s>{_NAME}) drew about (?P<attendance>[\d,]+) visitors$"), "event"),
    (re.compile(rf"^(?P<s>{_NAME}) was born in (?P<o>{_NAME})$"), "born_in"),
    (re.compile(rf"^(?P<s>{_NAME}) joined (?P<o>{_NAME}) as an? [a-z]+ in \d+$"), "works_at"),
    (re.compile(rf"^(?P<s>{_NAME}) founded (?P<o>{_NAME}) in \d+$"), "founded"),
    (re.compile(rf"^(?P<s>{_NAME}) studied under (?P<o>{_NAME})$"), "studied_under"),
    (re.compile(rf"^(?P<s>{_NAME}) is headquartered in (?P<o>{_NAME})$"), "headquartered_in"),
    (re.compile(rf"^The (?P<s>{_NAME}) was held in (?P<o>{_NAME})$"), "held_in"),
    (re.compile(rf"^The (?P<s>{_NAME}) was organised by (?P<o>{_NAME})$"), "organised_by"),
    (re.compile(rf"^The (?P<s>{_NAME}) was won by (?P<o>{_NAME})$"), "won_by"),
]
_SPLIT = re.compile(r"(?<=\.)\s+|\n+")
_RESULT = re.compile(r"^\[\d+\] (?P<title>.+)\n\s+URL: (?P<url>\S+)\s+\(doc \S+\)\n\s+(?P<snippet>.*)$", re.MULTILINE)
_OPENED = re.compile(r"^(?P<title>.+) — (?P<url>\S+) \(doc \S+\), characters \d+-\d+ of \d+:\n", re.MULTILINE)
_FOUND = re.compile(r"^\d+ match\(es\) for .* in (?P<title>.+) \((?P<url>\S+)\):$", re.MULTILINE)
_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_NUMBER_ATTRS = ("birth_year", "founded", "year", "population", "staff", "attendance")


@dataclass(frozen=True)
class Constraint:
    """One constraint of a slot: ``attr`` equal to ``value`` (a word) or within ``[lo, hi)`` (a number)."""

    attr: str
    value: str | None = None
    lo: int | None = None
    hi: int | None = None
    exact: bool = False
    words: tuple[str, ...] = ()
    """What a search for it may use: the exact value as the question writes it, a region or river name."""

    def check(self, attrs: dict[str, object]) -> bool | None:
        """Met, violated, or ``None`` when what was seen does not say."""
        v = attrs.get(self.attr)
        if v is None:
            return None
        if self.value is not None:
            return str(v) == self.value
        assert self.lo is not None and self.hi is not None and isinstance(v, int)
        return self.lo <= v < self.hi


@dataclass
class Slot:
    """A position of the question's chain: the kind of entity, its head noun and its constraints."""

    kind: str
    noun: str
    constraints: list[Constraint] = field(default_factory=list)

    def search_words(self) -> list[str]:
        words = [] if self.noun == self.kind else [self.noun]
        return words + [w for c in self.constraints for w in c.words]

    def searchable(self) -> float:
        """How well a search can single it out: exact values and names count most, a specific noun a little."""
        return sum(3.0 if c.exact or c.attr in ("region", "river") else 0.0 for c in self.constraints) + (
            1.0 if self.noun != self.kind else 0.0
        )


@dataclass(frozen=True)
class Link:
    """The relation between slot ``i`` and slot ``i+1``: ``forward`` when slot ``i`` is its subject."""

    pred: str
    forward: bool


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _constraints(kind: str, noun: str, text: str) -> list[Constraint]:
    """The constraints a slot's words state ("born in the 1850s", "on the Zobork River", ...)."""
    out: list[Constraint] = []
    if noun != kind:
        out.append(Constraint(KIND_ATTR[kind], value=noun))
    for m in re.finditer(r"\b(born|founded|established|taking place) in (the )?(\d+)(s?)", text):
        attr = {"born": "birth_year", "taking place": "year"}.get(m.group(1), "founded")
        v = int(m.group(3))
        if m.group(4):
            out.append(Constraint(attr, lo=v, hi=v + 10))
        else:
            out.append(Constraint(attr, lo=v, hi=v + 1, exact=True, words=(m.group(3),)))
    if m2 := re.search(r"\bin the (\w+) region\b", text):
        out.append(Constraint("region", value=m2.group(1), words=(m2.group(1), "region")))
    if m3 := re.search(r"\bon the (\w+) River\b", text):
        out.append(Constraint("river", value=m3.group(1), words=(m3.group(1), "River")))
    units = {"inhabitants": "population", "people": "staff", "visitors": "attendance"}
    for m in re.finditer(r"\b(?:with|employing|drawing) (.+?) (inhabitants|people|visitors)\b", text):
        attr, amount = units[m.group(2)], m.group(1)
        if a := re.fullmatch(r"about ([\d,]+)", amount):
            v = _int(a.group(1))
            out.append(Constraint(attr, lo=v, hi=v + 1, exact=True, words=(a.group(1), m.group(2))))
        elif b := re.fullmatch(r"between ([\d,]+) and ([\d,]+)", amount):
            out.append(Constraint(attr, lo=_int(b.group(1)), hi=_int(b.group(2))))
        elif f := re.fullmatch(r"fewer than ([\d,]+)", amount):
            out.append(Constraint(attr, lo=0, hi=_int(f.group(1))))
    return out


def parse_question(prompt: str) -> tuple[list[Slot], list[Link]] | None:
    """The chain a generated question describes (slots from the answer on, and the links between them), or
    ``None`` for a question in another form (a real corpus's)."""
    m = re.match(r"\s*Identify the (.+?)\. Search the encyclopedia", prompt, re.DOTALL)
    if not m:
        return None
    text = " " + m.group(1)
    parts, links, pos = [], [], 0
    for lm in _LINK.finditer(text):
        parts.append(text[pos : lm.start()])
        phrase = lm.group(1)
        _, pred, forward = next(x for x in _LINKS if x[0] == phrase)
        links.append(Link(pred, forward))
        pos = lm.end()
    parts.append(text[pos:])
    slots = []
    for part in parts:
        part = re.sub(r"^\s*(?:an? )?", "", part).strip()
        noun = next((n for n in sorted(KIND_OF_NOUN, key=len, reverse=True) if re.match(rf"{n}\b", part)), None)
        if noun is None:
            return None
        kind = KIND_OF_NOUN[noun]
        slots.append(Slot(kind, noun, _constraints(kind, noun, part[len(noun) :])))
    return slots, links


@dataclass
class Knowledge:
    """What the episode showed so far: entities (kind and attributes), relations, page URLs and the sentences
    seen on each page (``read``: the pages opened or searched with ``find``, not only glimpsed in a snippet)."""

    attrs: dict[str, dict[str, object]] = field(default_factory=dict)
    relations: set[tuple[str, str, str]] = field(default_factory=set)
    urls: dict[str, str] = field(default_factory=dict)
    sentences: dict[str, dict[str, bool]] = field(default_factory=dict)
    """sentence -> {url: read}"""
    read: set[str] = field(default_factory=set)

    def entity(self, name: str, kind: str) -> dict[str, object]:
        """The attributes seen of ``name`` (created with its kind, and what its name itself says)."""
        a = self.attrs.setdefault(name, {})
        a.setdefault("kind", kind)
        if kind == "event" and (m := re.match(r"(\d{4}) ", name)):  # "1979 Ziashiath Congress": held in 1979
            a.setdefault("year", int(m.group(1)))
        named = {"event": (EVENT_KINDS, "event_kind"), "organisation": (ORG_KINDS, "org_kind")}.get(kind)
        if named is not None:  # "... Congress", "... Trading Company": the kind is in the name
            kinds, attr = named
            for k in kinds:
                if name.endswith(" " + k.title()):
                    a.setdefault(attr, k)
        return a

    def add_text(self, text: str, url: str | None, read: bool) -> None:
        """Take in the attribute and relation sentences of ``text``, seen on ``url`` (``read``: not a snippet)."""
        text = text.replace("**", "")
        for sentence in _SPLIT.split(text):
            sentence = sentence.strip()
            plain = sentence.rstrip(".")
            for pattern, what in _SENTENCES:
                m = pattern.match(plain)
                if not m:
                    continue
                if url is not None:
                    self.sentences.setdefault(sentence, {})
                    self.sentences[sentence][url] = self.sentences[sentence].get(url, False) or read
                g = m.groupdict()
                if what in ROLES:
                    s_kind, o_kind = ROLES[what]
                    self.entity(g["s"], s_kind)
                    self.entity(g["o"], o_kind)
                    self.relations.add((g["s"], what, g["o"]))
                else:
                    a = self.entity(g["s"], what)
                    for k, v in g.items():
                        if k != "s" and v is not None:
                            a[k] = _int(v) if k in _NUMBER_ATTRS else v
                break

    def observe(self, text: str) -> None:
        """Take in one observation (search results, an opened window, ``find`` matches)."""
        for m in _RESULT.finditer(text):
            self.urls.setdefault(m.group("title").strip(), m.group("url"))
            self.add_text(m.group("snippet"), m.group("url"), read=False)
        if page := _OPENED.match(text):
            self.urls[page.group("title").strip()] = page.group("url")
            self.read.add(page.group("url"))
            self.add_text(text[page.end() :], page.group("url"), read=True)
        elif found := _FOUND.match(text):
            self.urls[found.group("title").strip()] = found.group("url")
            self.read.add(found.group("url"))
            for line in text.splitlines()[1:]:
                self.add_text(re.sub(r"^\[offset \d+\] ", "", line), found.group("url"), read=True)

    def neighbours(self, name: str, link: Link, toward_answer: bool) -> set[str]:
        """The names related to ``name`` by ``link``; ``toward_answer``: ``name`` fills the link's later slot."""
        subject_is_earlier = link.forward
        out = set()
        for s, pred, o in self.relations:
            if pred != link.pred:
                continue
            if toward_answer:  # name is slot i+1, we want slot i
                if subject_is_earlier and o == name:
                    out.add(s)
                elif not subject_is_earlier and s == name:
                    out.add(o)
            else:  # name is slot i, we want slot i+1
                if subject_is_earlier and s == name:
                    out.add(o)
                elif not subject_is_earlier and o == name:
                    out.add(s)
        return out


def fit(k: Knowledge, name: str, slot: Slot) -> tuple[int, int] | None:
    """``(constraints met, constraints unknown)`` of ``name`` in ``slot``, or ``None`` when one is violated."""
    a = k.attrs.get(name)
    if a is None or a.get("kind") != slot.kind:
        return None
    met = unknown = 0
    for c in slot.constraints:
        ok = c.check(a)
        if ok is False:
            return None
        met += ok is True
        unknown += ok is None
    return met, unknown


def chains(k: Knowledge, slots: list[Slot], links: list[Link]) -> list[tuple[list[str], int, int]]:
    """Every chain of seen entities joined by seen relations that violates no constraint, with how many of its
    constraints are met and unknown."""
    out: list[tuple[list[str], int, int]] = []

    def grow(chain: list[str], met: int, unknown: int) -> None:
        i = len(chain)
        if i == len(slots):
            out.append((chain, met, unknown))
            return
        for nxt in sorted(k.neighbours(chain[-1], links[i - 1], toward_answer=False)):
            f = fit(k, nxt, slots[i])
            if f is not None and nxt not in chain:
                grow([*chain, nxt], met + f[0], unknown + f[1])

    for name in sorted(k.attrs):
        f = fit(k, name, slots[0])
        if f is not None:
            grow([name], *f)
    return out


MAX_FACTS = 3
"""The most facts the teacher's answer cites (a one-hop answer needs three: the answer, the link, the other end)."""


def _fields(sentence: str) -> dict[str, str] | None:
    """What an attribute or relation sentence states (its pattern's named groups: ``s``, ``o`` for a relation's
    other end, the attributes), or ``None`` for any other sentence."""
    plain = sentence.rstrip(".")
    for pattern, _what in _SENTENCES:
        if m := pattern.match(plain):
            return m.groupdict()
    return None


def _about(fields: dict[str, str]) -> tuple[str, ...]:
    """The entities a sentence's ``fields`` are about (one, or the relation's two ends)."""
    return (fields["s"], fields["o"]) if "o" in fields else (fields["s"],)


def _justifies(fields: dict[str, str], asked: set[str]) -> bool:
    """Whether a sentence's ``fields`` link two entities or state one of the attributes ``asked`` (the question's
    constraints are about them)."""
    return "o" in fields or any(fields.get(attr) is not None for attr in asked)


@dataclass
class _View:
    """One turn's view of the episode: what was seen, and the pages and searches the teacher already asked for."""

    k: Knowledge
    opened: set[str]
    searched: list[str]

    def unread(self, name: str) -> bool:
        url = self.k.urls.get(name)
        return name not in self.opened and (url is None or (url not in self.k.read and url not in self.opened))


class Teacher(SeededAgent):
    """The honest deep-search teacher (see the module docstring): it reads only ``messages``, never the task.

    ``max_turns`` is the number of turns it plans for (it answers on its last one); by default ``2 + 2·hops``, the
    hops read off the question (4 for the one-hop demo).
    """

    name = "teacher"

    def __init__(self, seed: int | None = None, max_turns: int | None = None):
        super().__init__(seed)
        self.max_turns = max_turns
        self.k = int(self.rng.choice([6, 8, 10]))
        self.unit_words = bool(self.rng.random() < 0.5)
        self.shuffle_words = bool(self.rng.random() < 0.5)
        self.tiebreak = float(self.rng.random())
        self._queries: dict[tuple[str, int], str] = {}

    def episode(self, task: Task, seed: int | None) -> Agent:
        """A fresh teacher for one episode, seeded by the episode; the task is not kept (a teacher never reads it)."""
        return type(self)(seed if seed is not None else self.seed, self.max_turns)

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        prompt = next((m.content or "" for m in messages if m.role == "user"), "")
        first_user = next((i for i, m in enumerate(messages) if m.role == "user"), len(messages))
        observations = [m.content or "" for m in messages[first_user + 1 :] if m.role in ("user", "tool")]
        mine = [m.content or "" for m in messages if m.role == "assistant"]
        parsed = parse_question(prompt)
        if parsed is None:
            return self._generic(prompt, observations, mine)
        slots, links = parsed
        k = Knowledge()
        for text in observations:
            k.observe(text)
        budget = self.max_turns or 2 + 2 * len(links)
        turn = len(mine) + 1
        if turn >= budget:
            return self._answer(k, slots, links)
        return self._next(k, slots, links, mine, budget - turn)

    # ---- choosing the next step ---------------------------------------------------------------------------

    @staticmethod
    def _calls(mine: Iterable[str], tool: str, argument: str) -> list[str]:
        """The ``argument`` of each of its own earlier calls of ``tool``."""
        out = []
        for text in mine:
            for body in _CALL.findall(text):
                call = json.loads(body)
                if call.get("name") == tool and argument in call.get("arguments", {}):
                    out.append(str(call["arguments"][argument]))
        return out

    def _searched(self, mine: Iterable[str]) -> list[str]:
        return self._calls(mine, "search", "query")

    def _opened(self, mine: Iterable[str]) -> set[str]:
        return set(self._calls(mine, "open", "doc"))

    def _open(self, k: Knowledge, name: str) -> str:
        return tool_call("open", doc=k.urls.get(name, name))

    def _query(self, slot: Slot, i: int, links: list[Link]) -> str:
        words = slot.search_words()
        if self.unit_words or not words:
            words = words + [w for c in slot.constraints if not c.exact for w in self._unit(c.attr)]
        if not words:  # a bare kind: say what it is related to
            words = [slot.kind] + [links[i].pred.replace("_", " ")] if i < len(links) else [slot.kind]
        words = list(dict.fromkeys(words))
        if self.shuffle_words:
            words = [words[j] for j in self.rng.permutation(len(words))]
        return " ".join(words)

    @staticmethod
    def _unit(attr: str) -> list[str]:
        return {
            "birth_year": ["born"],
            "founded": ["founded"],
            "year": ["held"],
            "population": ["inhabitants"],
            "staff": ["employs"],
            "attendance": ["visitors"],
        }.get(attr, [])

    def _next(self, k: Knowledge, slots: list[Slot], links: list[Link], mine: list[str], left: int) -> str:
        """The next step before the last turn: settle a chain, else follow the best anchor, else search."""
        view = _View(k, self._opened(mine), self._searched(mine))
        return (
            self._settle(view, slots, links, left)
            or self._follow(view, slots, links)
            or self._search(view, slots, links)
            or self._answer(k, slots, links)
        )

    def _settle(self, view: _View, slots: list[Slot], links: list[Link], left: int) -> str | None:
        """With a chain of seen relations: answer when it meets every constraint and its pages were read, else
        read the page of it that settles the most unknown constraints (the answer's first)."""
        k = view.k
        found = chains(k, slots, links)
        if not found:
            return None
        chain, met, unknown = max(found, key=lambda c: (c[1] - c[2], -len(c[0][0])))
        todo = [n for n in chain if view.unread(n)]
        if unknown == 0 and len({c[0][0] for c in found if c[2] == 0}) <= 1:
            if not todo or left <= 1:
                return self._answer(k, slots, links)
            return self._open(k, todo[0])
        if not todo or met == 0:  # a chain of guesswork: look for a better anchor first
            return None
        unknowns = {n: (fit(k, n, slots[i]) or (0, 0))[1] for i, n in enumerate(chain)}
        return self._open(k, max(todo, key=lambda n: unknowns[n]))

    def _follow(self, view: _View, slots: list[Slot], links: list[Link]) -> str | None:
        """Without a chain: open the best anchor (a seen entity that meets constraints of a slot and violates
        none) unless too many look alike, else follow a read anchor's relations to a neighbouring slot."""
        k = view.k
        anchors = []
        for i, slot in enumerate(slots):
            for name in k.attrs:
                f = fit(k, name, slot)
                if f is not None and f[0] > 0:  # one meeting all its slot's constraints first, the answer's first
                    anchors.append((f[1] == 0, i == 0, f[0] - f[1], i, name))
        anchors.sort(key=lambda a: (not a[0], not a[1], -a[2], a[4]))
        for _complete, _answer, score, i, name in anchors:
            if view.unread(name):
                rivals = [a for a in anchors if a[3] == i and a[2] == score and view.unread(a[4])]
                if len(rivals) > 2 and self._slot_query(slots, i, links) not in view.searched:
                    return None  # too many look alike: search the slot's description first
                return self._open(k, name)
            for j, toward in ((i - 1, True), (i + 1, False)):  # read: follow its relations to the next slots
                if not 0 <= j < len(slots):
                    continue
                near = [
                    n for n in k.neighbours(name, links[j if toward else i], toward) if fit(k, n, slots[j]) is not None
                ]
                todo = [n for n in near if view.unread(n)]
                if len(todo) > 1 and self._slot_query(slots, j, links) not in view.searched:
                    return tool_call("search", query=self._slot_query(slots, j, links), k=self.k)  # tell them apart
                if todo:
                    return self._open(k, min(todo, key=lambda n: (-(fit(k, n, slots[j]) or (0, 0))[0], n)))
        return None

    def _search(self, view: _View, slots: list[Slot], links: list[Link]) -> str | None:
        """Search the most searchable slot not searched yet (the answer's own description first when it has an
        exact value: no detour)."""
        order = sorted(
            range(len(slots)),
            key=lambda i: (
                -slots[i].searchable() - (1.5 if i == 0 and slots[0].searchable() >= 3 else 0.0),
                (i * 0.37 + self.tiebreak) % 1,
            ),
        )
        for i in order:
            q = self._slot_query(slots, i, links)
            if q not in view.searched:
                return tool_call("search", query=q, k=self.k)
        return None

    def _slot_query(self, slots: list[Slot], i: int, links: list[Link]) -> str:
        """The search for slot ``i``, worded once per question."""
        key = (repr(slots), i)
        if key not in self._queries:
            self._queries[key] = self._query(slots[i], i, links)
        return self._queries[key]

    # ---- answering ----------------------------------------------------------------------------------------

    def _answer(self, k: Knowledge, slots: list[Slot], links: list[Link]) -> str:
        """``Answer: <name>`` of the best chain seen (else the best candidate for the answer's slot), then the
        sentences seen that justify it, each cited with a page that showed it (one it read when there is one).

        A sentence justifies the answer when it links two of the chain's entities or states an attribute one of the
        question's constraints is about (``_justifies``); at most ``MAX_FACTS`` of them, in a seeded order. Every
        other sentence seen about the chain's entities is left out: a clone learns the answer a policy can write
        within its generation budget (the demos' 160 tokens), not a page's worth of padding."""
        found = chains(k, slots, links)
        chain: list[str] = []
        if found:
            chain = max(found, key=lambda c: (c[1] - c[2], c[1], -len(c[0][0])))[0]
        else:
            fits = [(f[0] - f[1], n) for n in k.attrs if (f := fit(k, n, slots[0])) is not None]
            if fits:
                chain = [max(fits, key=lambda x: (x[0], x[1]))[1]]
        if not chain:
            return tool_call("answer", text="Answer: unknown\n\nNo page I read meets the question's constraints.")
        lines = [f"Answer: {chain[0]}", ""]
        cites: dict[str, int] = {}
        facts: list[tuple[str, str]] = []
        others: list[tuple[str, str]] = []
        members = set(chain)
        asked = {c.attr for slot in slots for c in slot.constraints}
        for sentence, where in k.sentences.items():
            fields = _fields(sentence)
            if fields is None or not set(_about(fields)) <= members:
                continue
            url = next((u for u, read in where.items() if read), next(iter(where)))
            (facts if _justifies(fields, asked) else others).append((sentence, url))
        facts = facts or others
        if len(facts) > 1:
            facts = [facts[j] for j in self.rng.permutation(len(facts))]
        for sentence, url in facts[:MAX_FACTS]:
            n = cites.setdefault(url, len(cites) + 1)
            lines.append(f"- {sentence} [{n}]({url})")
        return tool_call("answer", text="\n".join(lines).strip())

    def _generic(self, prompt: str, observations: list[str], mine: list[str]) -> str:
        """A question in another form (a real corpus): search it, read the top page, answer with its title."""
        question = prompt.split(". Search")[0]
        if not mine:
            return tool_call("search", query=question, k=self.k)
        k = Knowledge()
        for text in observations:
            k.observe(text)
        if len(mine) == 1 and k.urls:
            return tool_call("open", doc=next(iter(k.urls.values())))
        title, url = next(iter(k.urls.items()), ("unknown", ""))
        cite = f" [1]({url})" if url else ""
        return tool_call("answer", text=f"Answer: {title}\n\n- The page on {title} answers the question.{cite}")
