"""Render a ``World`` as encyclopedia pages: one page per entity, plus list and disambiguation pages.

Every relation is stated by one canonical sentence that appears on the pages of both of its ends, and every
attribute by one sentence on its entity's page; questions use exactly these sentences as the evidence that
supports a rubric statement. Entity ``i`` is document ``i``; distractor pages follow the entities.
"""

from __future__ import annotations

import random
from urllib.parse import quote

from rubricgym.envs.deepsearch.corpus import Corpus, Document
from rubricgym.envs.deepsearch.world import Entity, Relation, World

BASE_URL = "https://fictopedia.test/wiki/"
LIST_MAX = 60


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def plural(word: str) -> str:
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "o", "u"):
        return word[:-1] + "ies"
    return word + ("es" if word.endswith(("s", "x", "ch", "sh")) else "s")


_RELATION_SENTENCE = {
    "born_in": "{s} was born in {o}.",
    "works_at": "{s} joined {o} as {role} in {year}.",
    "founded": "{s} founded {o} in {year}.",
    "studied_under": "{s} studied under {o}.",
    "headquartered_in": "{s} is headquartered in {o}.",
    "held_in": "The {s} was held in {o}.",
    "organised_by": "The {s} was organised by {o}.",
    "won_by": "The {s} was won by {o}.",
}


def relation_sentence(world: World, r: Relation) -> str:
    """The canonical sentence stating relation ``r`` (its ``extra`` fills the role and year)."""
    if r.pred not in _RELATION_SENTENCE:
        raise ValueError(f"unknown predicate {r.pred!r}")
    extra = {**r.extra, "role": _a(str(r.extra["role"]))} if "role" in r.extra else r.extra
    s, o = world.entities[r.subject].name, world.entities[r.object].name
    return _RELATION_SENTENCE[r.pred].format(s=s, o=o, **extra)


def attribute_sentences(e: Entity) -> dict[str, str]:
    """The sentence stating each attribute of ``e`` (several attributes may share one sentence)."""
    a = e.attrs
    if e.kind == "person":
        s = f"{e.name} (born {a['birth_year']}) is {_a(str(a['occupation']))}."
        return {"birth_year": s, "occupation": s}
    if e.kind == "place":
        s1 = f"{e.name} is {_a(str(a['place_kind']))} in the {a['region']} region, founded in {a['founded']}."
        s2 = f"The {a['river']} River flows through {e.name}, which has about {a['population']:,} inhabitants."
        return {"place_kind": s1, "region": s1, "founded": s1, "river": s2, "population": s2}
    if e.kind == "organisation":
        s1 = f"{e.name} is {_a(str(a['org_kind']))} established in {a['founded']}."
        s2 = f"{e.name} employs about {a['staff']:,} people."
        return {"org_kind": s1, "founded": s1, "staff": s2}
    s1 = f"The {e.name} was {_a(str(a['event_kind']))} held in {a['year']}."
    s2 = f"The {e.name} drew about {a['attendance']:,} visitors."
    return {"event_kind": s1, "year": s1, "attendance": s2}


def entity_url(e: Entity) -> str:
    return BASE_URL + quote(e.name.replace(" ", "_"))


def _entity_page(world: World, e: Entity, rng: random.Random) -> str:
    attrs = list(dict.fromkeys(attribute_sentences(e).values()))
    lines = [f"# {e.name}", "", attrs[0]]
    if e.aliases:
        lines.append(f"{e.name} is also known as {' or '.join(e.aliases)}.")
    lines += attrs[1:]
    rel = [relation_sentence(world, world.relations[i]) for i in world.edges[e.idx]]
    if rel:
        lines += ["", "## History" if e.kind != "person" else "## Life"]
        lines += rel
    notes = []
    if e.twin_of is not None:
        notes.append(f"{e.name} is not to be confused with {world.entities[e.twin_of].name}.")
    other = world.entities[rng.randrange(len(world.entities))]
    if other.idx != e.idx:
        notes.append(f"A {rng.randint(1900, 2020)} survey listed {e.name} alongside {other.name}.")
    notes.append(
        rng.choice(
            (
                "Early records are incomplete and partly contradictory.",
                "Several archives hold letters and ledgers from this period.",
                "Local accounts differ on minor details.",
                "Much of what is known comes from a single surviving chronicle.",
            )
        )
    )
    lines += ["", "## Notes", *notes]
    return "\n".join(lines)


def _short(e: Entity) -> str:
    a = e.attrs
    if e.kind == "person":
        return f"{a['occupation']} (born {a['birth_year']})"
    if e.kind == "place":
        return f"{a['place_kind']} in the {a['region']} region"
    if e.kind == "organisation":
        return f"{a['org_kind']} established in {a['founded']}"
    return f"{a['event_kind']} held in {a['year']}"


def _distractors(world: World, rng: random.Random, start: int) -> list[Document]:
    docs: list[Document] = []
    ents = world.entities
    for e in ents:  # one disambiguation page per near-duplicate pair
        if e.twin_of is None or len(docs) >= world.n_lists:
            continue
        src = ents[e.twin_of]
        title = f"{src.name} (disambiguation)"
        text = "\n".join(
            [
                f"# {title}",
                "",
                f"{src.name} may refer to a similarly named entry:",
                f"- {src.name}, {_short(src)}",
                f"- {e.name}, {_short(e)}",
                "",
                "Check the pages themselves: the two are easily confused.",
            ]
        )
        docs.append(Document(f"d{start + len(docs)}", title, BASE_URL + quote(title.replace(" ", "_")), text))
    groups: dict[tuple[str, str], list[Entity]] = {}
    for e in ents:
        if e.kind == "person":
            key = (plural(str(e.attrs["occupation"])), f"born in the {int(e.attrs['birth_year']) // 10 * 10}s")  # type: ignore[call-overload]
        elif e.kind == "place":
            key = (plural(str(e.attrs["place_kind"])), f"in the {e.attrs['region']} region")
        elif e.kind == "organisation":
            key = (plural(str(e.attrs["org_kind"])), f"founded in the {int(e.attrs['founded']) // 10 * 10}s")  # type: ignore[call-overload]
        else:
            key = (plural(str(e.attrs["event_kind"])), f"of the {int(e.attrs['year']) // 10 * 10}s")  # type: ignore[call-overload]
        groups.setdefault(key, []).append(e)
    keys = sorted(groups)
    rng.shuffle(keys)
    for i in range(world.n_lists - len(docs)):
        what, when = keys[i % len(keys)]
        members = groups[(what, when)]
        part = i // len(keys)
        members = members[part * LIST_MAX : (part + 1) * LIST_MAX] or members[:LIST_MAX]
        title = f"List of {what} {when}" + (f" (part {part + 1})" if part else "")
        body = [f"- {m.name}, {_short(m)}" for m in members]
        text = "\n".join([f"# {title}", "", f"This list collects {what} {when}. It may be incomplete.", "", *body])
        docs.append(Document(f"d{start + len(docs)}", title, BASE_URL + quote(title.replace(" ", "_")), text))
    return docs


def render_world(world: World) -> Corpus:
    """The world's documents as a ``Corpus`` (entity ``i`` is document ``i``)."""
    rng = random.Random(f"deepsearch-render|{world.seed}|{world.n_docs}")
    docs = [Document(f"d{e.idx}", e.name, entity_url(e), _entity_page(world, e, rng)) for e in world.entities]
    docs += _distractors(world, rng, len(docs))
    default = world.n_lists == world.n_docs - len(world.entities)  # keys of default worlds stay as they were
    extra = "" if default else f"-x{world.n_lists}"
    return Corpus(docs, key=f"world-s{world.seed}-n{world.n_docs}{extra}-{WORLD_VERSION}")


WORLD_VERSION = "w1"
"""Bump when generation or rendering changes, so cached indexes of old worlds are not reused."""
