"""Graded hints for a deep-search task whose group of attempts all failed (``DeepSearchEnv.guidance``).

Every entity of a question's chain, its page and the answer are secrets (``DeepSearchEnv.secrets``): a hint never
names one. It narrows the search instead, each level adding to the one before:

1. where to start: the entity the question describes last (a generated world's chain starts there), described
   by the question's own words, and a search for them (a real corpus: the question's key words);
2. the page to open first, as a search and the number of the result to open (the start entity's page; a real
   question's gold page, else the page of one of its named entities) — found by running the search on the
   task's index, so the number is right;
3. the chain hop by hop, its entities named by kind and position ("the place of hop 1"), never by name (a real
   question: its rubric statements, placeholders named the same way).

A level with nothing to add for a task (a real question without gold pages or statements) is ``None``. Each
hint is scanned for the task's secrets before it is given; a part that contains one is dropped (``None``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from rubricgym.core.types import Task
from rubricgym.envs.deepsearch.corpus import Corpus
from rubricgym.envs.deepsearch.index import SearchIndex
from rubricgym.envs.deepsearch.render import attribute_sentences
from rubricgym.envs.deepsearch.tools import MAX_K
from rubricgym.envs.deepsearch.world import World
from rubricgym.rewards.leaks import Scanner, make_secrets

LEVELS = 3
DEFAULT_K = 5
"""The search tool's default number of results: a result within it is pointed to without ``k``."""
QUERY_WORDS = 10
_STOP_WORDS = (
    "a an the is was were are it its of in on at to for by and or with about than between fewer took place which "
    "who whom whose what when where how many much did does do that this these those there their from as be been "
    "has have had identify name give find search encyclopedia corpus then call answer line followed facts justify "
    "each cited url n"
)
STOP = frozenset(_STOP_WORDS.split())
"""Words a query leaves out: function words and the words of the task's instructions."""
_PLACEHOLDER = re.compile(r"<E(\d+)>")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'.,-]*[A-Za-z0-9]|[A-Za-z0-9]")


def keywords(text: str, limit: int = QUERY_WORDS) -> str:
    """The content words of ``text`` as a search query: no placeholders, no function words, each word once."""
    words: list[str] = []
    for w in _WORD.findall(_PLACEHOLDER.sub(" ", text)):
        if w.casefold() not in STOP and w.casefold() not in (x.casefold() for x in words):
            words.append(w)
    return " ".join(words[:limit])


def _search_call(query: str, rank: int) -> str:
    k = "" if rank <= DEFAULT_K else f", k={MAX_K}"
    return f'search(query="{query}"{k})'


def locate(index: SearchIndex, targets: list[int], queries: list[str]) -> tuple[str, int] | None:
    """``(query, 1-based rank)`` of the best-ranked target page over the queries (the first query wins ties), or
    ``None`` when no query brings a target into the first ``MAX_K`` results."""
    best: tuple[str, int] | None = None
    for q in dict.fromkeys(q for q in queries if q.strip()):
        ranks = [n for n, h in enumerate(index.search(q, MAX_K), 1) if h.doc in targets]
        if ranks and (best is None or ranks[0] < best[1]):
            best = (q, ranks[0])
    return best


def _label(task: Task, n: int) -> Callable[[re.Match[str]], str]:
    """Names a placeholder ``<Ek>`` by kind and position: the start, a hop, or the answer."""
    ents = task.hidden.get("entities", {})

    def name(m: re.Match[str]) -> str:
        k = int(m.group(1))
        kind = ents.get(f"E{k}", {}).get("kind", "entity")
        if k == 0:
            return f"the answer ({kind})"
        if k == n:
            return f"the {kind} you start from"
        return f"the {kind} of hop {n - k}"

    return name


def _world_parts(task: Task, world: World, corpus: Corpus, index: SearchIndex) -> list[str | None]:
    ents = task.hidden.get("entities", {})
    n = max(int(k[1:]) for k in ents)
    start = ents[f"E{n}"]
    kind = start.get("kind", "entity")
    about = [s["text"] for s in task.hidden.get("statements", []) if s.get("entities") == [f"E{n}"]]
    described = "; ".join(_PLACEHOLDER.sub("it", s) for s in about) or f"it is {kind}"
    query = keywords(" ".join(about))
    first = (
        f"Start from the other end of the question, the {kind} it describes last ({described}), and work "
        f"back {n} hop(s) to the answer. Look for that {kind} first"
        + (f', e.g. with search(query="{query}").' if query else ".")
    )
    doc = corpus.resolve(str(start.get("doc") or start.get("url") or ""))
    second: str | None = None
    if doc is not None and doc < len(world.entities):
        e = world.entities[doc]
        page = " ".join(dict.fromkeys(attribute_sentences(e).values()))
        for name in sorted((e.name, *e.aliases), key=len, reverse=True):
            page = page.replace(name, " ")
        exact = keywords(page)  # the page's own attribute sentences, without its name: the exact values
        found = locate(index, [doc], [query, exact])
        if found:
            q, rank = found
            second = (
                f"The page of the {kind} to start from is result [{rank}] of {_search_call(q, rank)}: open it and "
                "read which entity it links to."
            )
    relations = [s for s in task.hidden.get("statements", []) if len(s.get("entities", [])) == 2]
    label = _label(task, n)
    hops = []
    for i in range(1, n + 1):  # hop i joins E(n-i+1) and E(n-i)
        pair = {f"E{n - i + 1}", f"E{n - i}"}
        s = next((s for s in relations if set(s["entities"]) == pair), None)
        if s is None:
            return [first, second, None]
        hops.append(f"Hop {i}: {_PLACEHOLDER.sub(label, s['text'])}.")
    third = (
        "The chain: "
        + " ".join(hops)
        + " Open each page in turn and find() the sentence that names the next entity; cite each page you used."
    )
    return [first, second, third]


def _real_parts(task: Task, corpus: Corpus, index: SearchIndex) -> list[str | None]:
    h = task.hidden
    query = keywords(str(h.get("question") or task.prompt))
    first = (
        f'Search for the key words of the question first, e.g. search(query="{query}"), and read the pages '
        "that come up before you answer."
        if query
        else None
    )
    refs = list(h.get("gold_docs") or [])
    what = "page that holds the answer"
    if not refs:  # no gold page: the page of a named entity of the rubric (its exact title), if the corpus has one
        refs = [str(e.get("name")) for k, e in sorted(h.get("entities", {}).items()) if k != "E0" and e.get("name")]
        what = "page of an entity the answer is linked to"
    targets = [d for d in (corpus.resolve(r) for r in refs) if d is not None]
    found = locate(index, targets, [query]) if targets and query else None
    second = f"The {what} is result [{found[1]}] of {_search_call(*found)}: open it." if found is not None else None
    statements = [s["text"] for s in h.get("statements", []) if isinstance(s.get("text"), str)]

    def label(m: re.Match[str]) -> str:
        return "the answer" if m.group(1) == "0" else f"entity {m.group(1)}"

    third = (
        "The facts that single out the answer: " + "; ".join(_PLACEHOLDER.sub(label, s) for s in statements) + "."
        if statements
        else None
    )
    return [first, second, third]


def hint_parts(task: Task, world: World | None, corpus: Corpus, index: SearchIndex) -> list[str | None]:
    """The new text of each level (``None``: nothing at that level for this task)."""
    ents = task.hidden.get("entities", {})
    if world is not None and ents and all("kind" in e for e in ents.values()):
        return _world_parts(task, world, corpus, index)
    return _real_parts(task, corpus, index)


def guidance(
    task: Task,
    level: int,
    secrets: list[tuple[str, Any]],
    world: World | None,
    corpus: Corpus,
    index: SearchIndex,
) -> str | None:
    """The hint at ``level``: the parts of levels 1..``level`` (``None`` when that level has no part of its own)."""
    if not 1 <= level <= LEVELS:
        return None
    scanner = Scanner(make_secrets(secrets))
    parts = [p if p and not scanner.find(p) else None for p in hint_parts(task, world, corpus, index)]
    if parts[level - 1] is None:
        return None
    return " ".join(p for p in parts[:level] if p)
