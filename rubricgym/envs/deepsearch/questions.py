"""Multi-hop questions over a fictional world, with CaRR rubrics.

A question walks a chain ``E0 - E1 - ... - En`` of 1-5 relations from the answer ``E0`` and describes it through
obfuscated constraints (BrowseComp style: "born in the 1950s", "a port on the Chidis River"). The hidden part
records every entity (name, aliases, page URL) and the single-hop rubric statements with placeholders
(``"<E1> was won by <E0>"``), each with the exact sentences and pages that support it. The generator checks that
the constraints single out ``E0`` in the whole world (near-duplicates included) and adds constraints until
they do.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rubricgym.envs.deepsearch.corpus import Corpus
from rubricgym.envs.deepsearch.render import _a, attribute_sentences, relation_sentence
from rubricgym.envs.deepsearch.world import Entity, Relation, World

DIFFICULTY_HOPS = {"easy": (2, 2), "medium": (3, 3), "hard": (4, 5)}
KIND_WEIGHTS = {"person": 0.5, "organisation": 0.2, "place": 0.1, "event": 0.2}
KIND_ATTR = {"person": "occupation", "place": "place_kind", "organisation": "org_kind", "event": "event_kind"}
SPECIFIC = {
    "person": ["birth_year"],
    "place": ["founded", "region", "river", "population"],
    "organisation": ["founded", "staff"],
    "event": ["year", "attendance"],
}
GENERIC_NOUN = {"person": "person", "place": "place", "organisation": "organisation", "event": "event"}
BUCKET = {"population": 10_000, "staff": 1_000, "attendance": 5_000}
FORWARD = {
    "born_in": "who was born in",
    "works_at": "who worked at",
    "founded": "who founded",
    "studied_under": "who studied under",
    "headquartered_in": "that is headquartered in",
    "held_in": "that was held in",
    "organised_by": "that was organised by",
    "won_by": "that was won by",
}
INVERSE = {
    "born_in": "that is the birthplace of",
    "works_at": "that employed",
    "founded": "that was founded by",
    "studied_under": "who taught",
    "headquartered_in": "that is home to",
    "held_in": "that hosted",
    "organised_by": "that organised",
    "won_by": "who won",
}
STATEMENT = {
    "born_in": "{s} was born in {o}",
    "works_at": "{s} worked at {o}",
    "founded": "{s} founded {o}",
    "studied_under": "{s} studied under {o}",
    "headquartered_in": "{s} is headquartered in {o}",
    "held_in": "{s} was held in {o}",
    "organised_by": "{s} was organised by {o}",
    "won_by": "{s} was won by {o}",
}


class QuestionError(RuntimeError):
    """No question with a unique answer could be drawn (the world is too small for the asked hops)."""


@dataclass(frozen=True)
class Constraint:
    pos: int
    attr: str
    fuzzy: bool


def _decade(v: int) -> int:
    return v // 10 * 10


def _range(attr: str, v: int) -> tuple[int, int]:
    lo = v // BUCKET[attr] * BUCKET[attr]
    return lo, lo + BUCKET[attr]


def _between(lo: int, hi: int) -> str:
    return f"fewer than {hi:,}" if lo == 0 else f"between {lo:,} and {hi:,}"


def describe(e: Entity, attr: str, fuzzy: bool) -> tuple[str, str, Callable[[Entity], bool]]:
    """``(question phrase, statement with placeholder {x}, predicate)`` for a constraint on ``e.attrs[attr]``."""
    v = e.attrs[attr]
    if attr in KIND_ATTR.values():
        return "", f"{{x}} is {_a(str(v))}", lambda x: x.attrs.get(attr) == v
    if attr in ("birth_year", "founded", "year"):
        verb = {"birth_year": "born", "year": "taking place", "founded": "founded"}[attr]
        if e.kind == "organisation":
            verb = "established"
        stmt_verb = {"born": "was born", "taking place": "took place"}.get(verb, f"was {verb}")
        if fuzzy:
            d = _decade(int(v))  # type: ignore[call-overload]
            return (
                f"{verb} in the {d}s",
                f"{{x}} {stmt_verb} in the {d}s",
                lambda x: isinstance(x.attrs.get(attr), int) and _decade(x.attrs[attr]) == d,
            )
        return f"{verb} in {v}", f"{{x}} {stmt_verb} in {v}", lambda x: x.attrs.get(attr) == v
    if attr == "region":
        return f"in the {v} region", f"{{x}} is in the {v} region", lambda x: x.attrs.get(attr) == v
    if attr == "river":
        return f"on the {v} River", f"The {v} River flows through {{x}}", lambda x: x.attrs.get(attr) == v
    noun = {"population": "inhabitants", "staff": "people", "attendance": "visitors"}[attr]
    lead = {"population": ("with", "has"), "staff": ("employing", "employs"), "attendance": ("drawing", "drew")}[attr]
    if fuzzy:
        lo, hi = _range(attr, int(v))  # type: ignore[call-overload]
        return (
            f"{lead[0]} {_between(lo, hi)} {noun}",
            f"{{x}} {lead[1]} {_between(lo, hi)} {noun}",
            lambda x: attr in x.attrs and lo <= x.attrs[attr] < hi,
        )
    return (f"{lead[0]} about {v:,} {noun}", f"{{x}} {lead[1]} about {v:,} {noun}", lambda x: x.attrs.get(attr) == v)


def _walk(world: World, rng: random.Random, hops: int) -> tuple[list[int], list[Relation]] | None:
    kinds = list(KIND_WEIGHTS)
    kind = rng.choices(kinds, weights=[KIND_WEIGHTS[k] for k in kinds])[0]
    pool = [e.idx for e in world.entities if e.kind == kind] if len(world.entities) < 5000 else None
    start = rng.choice(pool) if pool else _random_of_kind(world, rng, kind)
    chain, rels = [start], []
    for _ in range(hops):
        options = [(r, o) for r, o in world.neighbours(chain[-1]) if o not in chain and r not in rels]
        if not options:
            return None
        r, o = rng.choice(options)
        chain.append(o)
        rels.append(r)
    return chain, rels


def _random_of_kind(world: World, rng: random.Random, kind: str) -> int:
    while True:
        e = world.entities[rng.randrange(len(world.entities))]
        if e.kind == kind:
            return e.idx


def _candidates(world: World, chain: list[int], rels: list[Relation], cons: list[Constraint]) -> set[int]:
    """Every entity that satisfies the constraints in the answer's position."""
    ents = world.entities
    preds: dict[int, list[Callable[[Entity], bool]]] = {}
    for c in cons:
        preds.setdefault(c.pos, []).append(describe(ents[chain[c.pos]], c.attr, c.fuzzy)[2])

    def ok(pos: int, x: Entity) -> bool:
        return x.kind == ents[chain[pos]].kind and all(p(x) for p in preds.get(pos, []))

    n = len(chain) - 1
    cand = {e.idx for e in ents if ok(n, e)}
    for pos in range(n, 0, -1):
        r = rels[pos - 1]
        prev_is_subject = r.subject == chain[pos - 1]
        nxt: set[int] = set()
        for y in cand:
            for r2, x in world.neighbours(y):
                if r2.pred == r.pred and (r2.subject == x) == prev_is_subject and ok(pos - 1, ents[x]):
                    nxt.add(x)
        cand = nxt
    return cand


def _initial_constraints(world: World, chain: list[int], difficulty: str, rng: random.Random) -> list[Constraint]:
    ents = world.entities
    n = len(chain) - 1
    fuzzy_p = {"easy": 0.0, "medium": 0.5, "hard": 0.8}[difficulty]
    leaf = ents[chain[n]]
    cons = [Constraint(n, KIND_ATTR[leaf.kind], False)]
    specifics = rng.sample(SPECIFIC[leaf.kind], k=min(len(SPECIFIC[leaf.kind]), 2 if difficulty == "hard" else 1))
    cons += [Constraint(n, a, a in _FUZZABLE and rng.random() < fuzzy_p) for a in specifics]
    if difficulty != "easy" and rng.random() < 0.5:
        a = rng.choice(SPECIFIC[ents[chain[0]].kind])
        cons.append(Constraint(0, a, a in _FUZZABLE and rng.random() < fuzzy_p))
    return cons


_FUZZABLE = {"birth_year", "founded", "year", "population", "staff", "attendance"}


def make_question(
    world: World,
    corpus: Corpus,
    rng: random.Random,
    difficulty: str = "medium",
    hops: int | None = None,
    max_tries: int = 200,
) -> dict[str, Any]:
    """A question: ``{"prompt", "hops", "difficulty", "hidden"}`` with a unique answer in ``world``."""
    if difficulty not in DIFFICULTY_HOPS:
        raise ValueError(f"difficulty must be one of {sorted(DIFFICULTY_HOPS)}, got {difficulty!r}")
    lo, hi = DIFFICULTY_HOPS[difficulty]
    for _ in range(max_tries):
        n = hops or rng.randint(lo, hi)
        walked = _walk(world, rng, n)
        if walked is None:
            continue
        chain, rels = walked
        cons = _initial_constraints(world, chain, difficulty, rng)
        for _ in range(5):
            cand = _candidates(world, chain, rels, cons)
            if len(cand) <= 1:
                break
            used = {(c.pos, c.attr) for c in cons}
            free = [
                (p, a)
                for p in range(len(chain))
                for a in [KIND_ATTR[world.entities[chain[p]].kind], *SPECIFIC[world.entities[chain[p]].kind]]
                if (p, a) not in used
            ]
            if not free:
                break
            p, a = rng.choice(free)
            cons.append(Constraint(p, a, False))
        if cand == {chain[0]}:
            return _assemble(world, corpus, chain, rels, cons, difficulty)
    raise QuestionError(f"no {difficulty} question with a unique answer after {max_tries} tries; use a larger world")


def _assemble(
    world: World, corpus: Corpus, chain: list[int], rels: list[Relation], cons: list[Constraint], difficulty: str
) -> dict[str, Any]:
    ents = world.entities
    n = len(chain) - 1
    by_pos: dict[int, list[Constraint]] = {}
    for c in cons:
        by_pos.setdefault(c.pos, []).append(c)
    url = [corpus.docs[i].url for i in chain]

    def noun(pos: int) -> str:
        e = ents[chain[pos]]
        kind_attr = KIND_ATTR[e.kind]
        constrained = any(c.attr == kind_attr for c in by_pos.get(pos, []))
        return str(e.attrs[kind_attr]) if constrained else GENERIC_NOUN[e.kind]

    def phrase(pos: int) -> str:
        e = ents[chain[pos]]
        parts = [describe(e, c.attr, c.fuzzy)[0] for c in by_pos.get(pos, [])]
        head = noun(pos) if pos == 0 else _a(noun(pos))
        text = " ".join([head, " and ".join(p for p in parts if p)]).strip()
        if pos < n:
            r = rels[pos]
            verb = FORWARD[r.pred] if r.subject == chain[pos] else INVERSE[r.pred]
            text += f" {verb} {phrase(pos + 1)}"
        return text

    statements: list[dict[str, Any]] = []
    for i, r in enumerate(rels):
        s_pos, o_pos = (i, i + 1) if r.subject == chain[i] else (i + 1, i)
        sentence = relation_sentence(world, r)
        statements.append(
            {
                "text": STATEMENT[r.pred].format(s=f"<E{s_pos}>", o=f"<E{o_pos}>"),
                "entities": [f"E{s_pos}", f"E{o_pos}"],
                "evidence": [{"url": url[s_pos], "text": sentence}, {"url": url[o_pos], "text": sentence}],
            }
        )
    for c in sorted(cons, key=lambda c: (c.pos, c.attr)):
        e = ents[chain[c.pos]]
        statements.append(
            {
                "text": describe(e, c.attr, c.fuzzy)[1].format(x=f"<E{c.pos}>"),
                "entities": [f"E{c.pos}"],
                "evidence": [{"url": url[c.pos], "text": attribute_sentences(e)[c.attr]}],
            }
        )
    for k, s in enumerate(statements, 1):
        s["id"] = f"S{k}"
    entities = {
        f"E{p}": {
            "name": ents[i].name,
            "aliases": list(ents[i].aliases),
            "url": url[p],
            "kind": ents[i].kind,
            "doc": corpus.docs[i].id,
        }
        for p, i in enumerate(chain)
    }
    confusable = sorted({o.name for i in chain for o in _twins(world, i)})
    answer = ents[chain[0]]
    prompt = (
        f"Identify the {phrase(0)}. Search the encyclopedia, then call answer with a line "
        f"'Answer: <name of the {noun(0)}>' followed by the facts that justify it, each cited as [n](url)."
    )
    return {
        "prompt": prompt,
        "hops": n,
        "difficulty": difficulty,
        "hidden": {
            "answer": answer.name,
            "aliases": list(answer.aliases),
            "entities": entities,
            "statements": statements,
            "confusable": confusable,
        },
    }


def _twins(world: World, idx: int) -> list[Entity]:
    e = world.entities[idx]
    out = [world.entities[e.twin_of]] if e.twin_of is not None else []
    return out + [t for t in world.entities if t.twin_of == idx]
