"""Seeded fictional knowledge graphs: people, organisations, places and events joined by typed relations.

Fiction keeps tasks free of training-data contamination. Near-duplicate entities ("twins": a one-letter name
change and the same headline attributes, but their own relations) make shallow matching on names or years
fail. Generation is a pure function of ``(seed, n_docs)`` and fast enough for 100,000 documents.
"""

from __future__ import annotations

import builtins
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

KINDS = ("person", "organisation", "place", "event")
# Share of entity pages per kind.
KIND_SHARE = {"person": 0.46, "organisation": 0.2, "place": 0.14, "event": 0.2}
TWIN_RATE = 0.08
ENTITY_SHARE = 0.9
"""Share of documents that are entity pages; the rest are list and disambiguation pages (distractors)."""
MAX_DISTRACTORS = 1_000_000

_ONSETS = [
    "b",
    "d",
    "f",
    "g",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "br",
    "dr",
    "gr",
    "kr",
    "tr",
    "st",
    "th",
    "sh",
    "ch",
    "h",
    "j",
    "y",
    "w",
    "qu",
    "fl",
    "sk",
]
_VOWELS = ["a", "e", "i", "o", "u", "a", "e", "o", "ia", "ei"]
_CODAS = ["", "", "n", "r", "l", "s", "th", "m", "nd", "rk", "x", "v"]
_PLACE_SUFFIX = ["ford", "mere", "holm", "vik", "dale", "bury", "stad", "wick", "port", "gard", "ton", "haven"]
OCCUPATIONS = [
    "cartographer",
    "glassblower",
    "astronomer",
    "botanist",
    "composer",
    "engineer",
    "linguist",
    "architect",
    "chemist",
    "sculptor",
    "historian",
    "shipwright",
    "physician",
    "weaver",
    "poet",
    "mathematician",
    "clockmaker",
    "geologist",
    "violinist",
    "archivist",
]
ORG_KINDS = [
    "guild",
    "trading company",
    "observatory",
    "conservatory",
    "press",
    "foundry",
    "academy",
    "shipyard",
    "bank",
    "society",
    "laboratory",
    "museum",
]
PLACE_KINDS = ["town", "city", "village", "port", "market town"]
EVENT_KINDS = ["festival", "exhibition", "regatta", "congress", "tournament", "fair", "symposium", "expedition"]
ROLES = ["apprentice", "director", "clerk", "fellow", "treasurer", "lecturer", "curator", "engineer"]
_KIND_WORDS = {w for k in ORG_KINDS + EVENT_KINDS for w in k.split()}
REGIONS_N = 40
RIVERS_N = 60

# predicate -> (subject kind, object kind)
PREDICATES: dict[str, tuple[str, str]] = {
    "born_in": ("person", "place"),
    "works_at": ("person", "organisation"),
    "founded": ("person", "organisation"),
    "studied_under": ("person", "person"),
    "headquartered_in": ("organisation", "place"),
    "held_in": ("event", "place"),
    "organised_by": ("event", "organisation"),
    "won_by": ("event", "person"),
}


@dataclass(slots=True)
class Entity:
    """One node of the graph; ``twin_of`` links a near-duplicate to the entity it imitates."""

    idx: int
    kind: str
    name: str
    aliases: list[str]
    attrs: dict[str, object]
    twin_of: int | None = None


@dataclass(slots=True)
class Relation:
    """A typed edge ``subject -pred-> object``; ``extra`` holds e.g. a role and a year."""

    subject: int
    pred: str
    object: int
    extra: dict[str, builtins.object] = field(default_factory=dict)  # `object` is the field above


@dataclass
class World:
    """The generated graph: entities, relations and adjacency (edge indices per entity, both directions)."""

    seed: int
    n_docs: int
    entities: list[Entity]
    relations: list[Relation]
    regions: list[str]
    rivers: list[str]
    edges: list[list[int]]
    n_lists: int

    def neighbours(self, idx: int) -> list[tuple[Relation, int]]:
        """``(relation, other end)`` for every relation touching entity ``idx``."""
        out = []
        for e in self.edges[idx]:
            r = self.relations[e]
            out.append((r, r.object if r.subject == idx else r.subject))
        return out


class _Names:
    """Fictional names drawn from syllables; every full name is unique in a world."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()

    def word(self, syllables: int) -> str:
        r = self.rng
        parts = [r.choice(_ONSETS) + r.choice(_VOWELS) for _ in range(syllables)]
        return ("".join(parts) + r.choice(_CODAS)).capitalize()

    def unique(self, make: Callable[[], str]) -> str:
        for _ in range(50):
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name
        name = make() + " " + self.word(2)
        self.used.add(name)
        return name

    def twin(self, name: str) -> str:
        """A near-duplicate of ``name``: one letter doubled, dropped or swapped for a vowel."""
        r = self.rng
        for _ in range(50):
            chars = list(name)
            # edit the first word that is a generated name (not a year, not a kind such as "Guild")
            words = [(m.start(), m.end()) for m in re.finditer(r"[A-Za-z]+", name)]
            lo, hi = next(((a, b) for a, b in words if name[a:b].lower() not in _KIND_WORDS), words[0])
            pos = [i for i in range(lo + 1, hi) if chars[i].islower()]
            i = r.choice(pos)
            op = r.random()
            if op < 0.4:
                chars.insert(i, chars[i])
            elif op < 0.7 and len(pos) > 4:
                del chars[i]
            else:
                chars[i] = r.choice("aeiouy".replace(chars[i], ""))
            cand = "".join(chars)
            if cand not in self.used:
                self.used.add(cand)
                return cand
        return self.unique(lambda: name + " " + self.word(1))


def _acronym(name: str) -> str:
    return "".join(w[0] for w in name.replace("'", "").split() if w[0].isupper())


def generate_world(seed: int = 0, n_docs: int = 500, distractors: int | None = None) -> World:  # noqa: C901 (the world generator; split is a follow-up)
    """A world whose rendering has about ``n_docs`` documents (100 to 100,000).

    ``distractors`` sets the number of list and disambiguation pages (default: the ``1 - ENTITY_SHARE`` of
    ``n_docs`` left after the entity pages). The entities and relations depend on ``(seed, n_docs)`` only, so the
    same world (and the same questions) can be searched among more or fewer distractor pages.
    """
    if not 100 <= n_docs <= 1_000_000:
        raise ValueError(f"n_docs must be between 100 and 1,000,000, got {n_docs}")
    if distractors is not None and not 0 <= distractors <= MAX_DISTRACTORS:
        raise ValueError(f"distractors must be between 0 and {MAX_DISTRACTORS:,} (or None), got {distractors}")
    rng = random.Random(f"deepsearch-world|{seed}|{n_docs}")
    names = _Names(rng)
    regions = [names.unique(lambda: names.word(2)) for _ in range(REGIONS_N)]
    rivers = [names.unique(lambda: names.word(2)) for _ in range(RIVERS_N)]
    n_entities = int(n_docs * ENTITY_SHARE)
    entities: list[Entity] = []
    by_kind: dict[str, list[int]] = {k: [] for k in KINDS}
    firsts = [names.word(rng.choice((1, 2))) for _ in range(400)]
    places: list[str] = []

    def add(kind: str, name: str, aliases: list[str], attrs: dict[str, object], twin_of: int | None = None) -> int:
        e = Entity(len(entities), kind, name, aliases, attrs, twin_of)
        entities.append(e)
        by_kind[kind].append(e.idx)
        return e.idx

    def person_name() -> str:
        return f"{rng.choice(firsts)} {names.word(rng.choice((2, 2, 3)))}"

    def new_entity(kind: str) -> None:
        if kind == "person":
            name = names.unique(person_name)
            first, last = name.split(" ", 1)
            attrs = {"birth_year": rng.randint(1820, 1990), "occupation": rng.choice(OCCUPATIONS)}
            add(kind, name, [f"{last}, {first}"], attrs)
        elif kind == "place":
            name = names.unique(lambda: names.word(rng.choice((1, 2))) + rng.choice(_PLACE_SUFFIX))
            base = next(name[: -len(s)] for s in _PLACE_SUFFIX + [""] if name.endswith(s))
            attrs = {
                "place_kind": rng.choice(PLACE_KINDS),
                "founded": rng.randint(900, 1900),
                "region": rng.choice(regions),
                "river": rng.choice(rivers),
                "population": rng.randint(2, 900) * 100,
            }
            add(kind, name, [f"Old {base}"], attrs)
            places.append(name)
        elif kind == "organisation":
            okind = rng.choice(ORG_KINDS)
            stem = rng.choice(places) if places and rng.random() < 0.5 else names.word(2)
            name = names.unique(
                lambda: f"{stem} {okind.title()}" if rng.random() < 0.5 else f"{names.word(2)} {okind.title()}"
            )
            attrs = {"org_kind": okind, "founded": rng.randint(1700, 2000), "staff": rng.randint(5, 5000)}
            add(kind, name, [_acronym(name)] if len(name.split()) > 2 else [], attrs)
        else:
            ekind = rng.choice(EVENT_KINDS)
            stem = rng.choice(places) if places and rng.random() < 0.7 else names.word(2)
            name = names.unique(lambda: f"{rng.randint(1850, 2020)} {stem} {ekind.title()}")
            year = int(name.split(" ", 1)[0])
            attrs = {"event_kind": ekind, "year": year, "attendance": rng.randint(2, 400) * 50}
            add(kind, name, [name.split(" ", 1)[1] + f" of {year}"], attrs)

    quotas = {k: max(3, round(n_entities * KIND_SHARE[k] * (1 - TWIN_RATE))) for k in KINDS}
    for kind in ("place", "organisation", "person", "event"):  # organisations and events borrow place names
        for _ in range(quotas[kind]):
            new_entity(kind)
    # near-duplicates: same kind and headline attributes, a one-letter name change, relations of their own
    originals = list(range(len(entities)))
    for idx in rng.sample(originals, k=min(len(originals), n_entities - len(entities))):
        src = entities[idx]
        tname = names.twin(src.name)
        if src.kind == "person":
            first, last = tname.split(" ", 1) if " " in tname else (tname, tname)
            aliases = [f"{last}, {first}"]
        else:
            aliases = []
        add(src.kind, tname, aliases, dict(src.attrs), twin_of=idx)

    relations: list[Relation] = []
    pick = rng.choice
    people, orgs, plcs, events = by_kind["person"], by_kind["organisation"], by_kind["place"], by_kind["event"]
    for p in people:
        relations.append(Relation(p, "born_in", pick(plcs)))
        for _ in range(rng.choice((1, 1, 2))):
            o = pick(orgs)
            born = entities[p].attrs["birth_year"]
            assert isinstance(born, int)
            start = born + rng.randint(18, 40)
            relations.append(Relation(p, "works_at", o, {"role": pick(ROLES), "year": start}))
        if rng.random() < 0.4:
            m = pick(people)
            if m != p:
                relations.append(Relation(p, "studied_under", m))
    for o in orgs:
        relations.append(Relation(o, "headquartered_in", pick(plcs)))
        if rng.random() < 0.8:
            relations.append(Relation(pick(people), "founded", o, {"year": entities[o].attrs["founded"]}))
    for ev in events:
        relations.append(Relation(ev, "held_in", pick(plcs)))
        relations.append(Relation(ev, "organised_by", pick(orgs)))
        relations.append(Relation(ev, "won_by", pick(people)))
    edges: list[list[int]] = [[] for _ in entities]
    for i, r in enumerate(relations):
        edges[r.subject].append(i)
        edges[r.object].append(i)
    n_lists = n_docs - len(entities) if distractors is None else distractors
    return World(seed, n_docs, entities, relations, regions, rivers, edges, n_lists=n_lists)
