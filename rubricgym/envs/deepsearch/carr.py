"""CaRR scoring as pure functions of a finished episode: answers, citations, what was seen, support, chains.

Following CaRR (arXiv 2601.06021): the references section is stripped; inline citations ``[n](url)`` name up to
20 cited pages; the content of a cited page is only what the agent actually saw of it (search snippets, opened
windows, find matches, the ``seen`` of each step's record, ``records.py``); a statement counts when all its entities are
identified in the answer and cited content fully supports it; the rubric reward is the share of statements
reachable from the answer entity over supported statements (``rewards.aggregate.carr_rubric_reward``).

Identification and support are programmatic here: an entity is identified when the answer names it (or an
alias); a statement with evidence sentences is supported when one of them appears verbatim in what the agent
saw of a cited page that holds it, and one without (real corpora) when at least ``LEXICAL_RECALL`` of its
content words do. ``judge.py`` has the LLM versions.

A question without statements (the usual real-corpus case) still gets a CaRR-style chain, derived from the
answer itself (``derived_statements``): the answer is named in what the agent saw of a page it cites (a
``gold_docs`` page when the question lists some), each fact stated with it is supported by the seen content of
the pages it cites, and (when it cites any) no cited page is one the agent never saw.

The rubric reward that C-GRPO mixes is ``(1 - EVIDENCE_WEIGHT)·chain + EVIDENCE_WEIGHT·evidence``: ``chain`` is
CaRR's (cited support reachable from the answer) and ``evidence`` the share of the statements whose evidence the
agent read before answering (in a page it opened or a ``find`` match; a search snippet is a glimpse, not a read),
cited or not (``evidence_seen``). So at equal correctness an answer with an evidence path always outranks one
without: a right answer cited from pages read scores 1.0, the same answer after reading the pages but citing
nothing 0.85, a right answer with no reading at all (a guess, a search and a guess) 0.7, any wrong answer 0 (#39).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from rubricgym.core.types import Step
from rubricgym.envs.deepsearch.records import Observed, observed
from rubricgym.rewards.aggregate import c_grpo_reward, carr_rubric_reward

MAX_CITED = 20
LEXICAL_RECALL = 0.8
ALPHA = 0.3
EVIDENCE_WEIGHT = 0.5
"""The share of the rubric reward that evidence seen (cited or not) earns; citing it earns the rest (the chain)."""
CITATION = re.compile(r"\[(\d{1,4})\]\(\s*<?([^()\s<>]+)>?\s*\)")
_REFERENCES = re.compile(
    r"^[ \t]*(?:#+[ \t]*)?(?:\*\*)?(?:references|sources|citations|bibliography|works cited)(?:\*\*)?[ \t]*:?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_ANSWER_LINE = re.compile(
    r"^[\W_]*(?:final[ \t]+)?answer(?:[ \t]+is)?[ \t]*(?:\*\*)?[ \t]*[:：=-][ \t]*(.+)$", re.IGNORECASE | re.MULTILINE
)
_PLACEHOLDER = re.compile(r"<(E\d+)>")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
MAX_FACTS = 8
_STOP = frozenset(
    (
        "the",
        "a",
        "an",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "by",
        "with",
        "and",
        "or",
        "is",
        "was",
        "were",
        "be",
        "been",
        "are",
        "from",
        "as",
        "that",
        "which",
        "who",
        "this",
        "these",
        "those",
        "its",
        "it",
        "his",
        "her",
        "their",
        "has",
        "have",
        "had",
        "not",
        "no",
        "into",
        "than",
        "then",
        "there",
        "what",
        "whose",
        "whom",
        "where",
        "when",
        "how",
        "did",
        "does",
        "can",
        "name",
        "one",
        "she",
        "him",
        "they",
        "them",
        "also",
    )
)


def strip_references(text: str) -> str:
    """``text`` without its trailing references section (from a 'References'/'Sources' heading on)."""
    m = _REFERENCES.search(text)
    return text[: m.start()] if m else text


def cited_urls(text: str) -> list[str]:
    """The distinct URLs cited inline as ``[n](url)`` outside the references section, first ``MAX_CITED``."""
    urls = [m.group(2).rstrip(".,;") for m in CITATION.finditer(strip_references(text))]
    return list(dict.fromkeys(urls))[:MAX_CITED]


def answer_line(text: str) -> str:
    """The stated answer: the rest of an 'Answer:' line, else the first non-empty line; citations removed."""
    m = _ANSWER_LINE.search(text)
    line = m.group(1) if m else next((ln for ln in text.splitlines() if ln.strip()), "")
    line = CITATION.sub("", line)
    return re.sub(r"\[\d+\]", "", line).strip().strip("*_").strip()


def normalize(text: str) -> str:
    """Case-folded text with markdown emphasis and punctuation turned into single spaces."""
    text = text.replace("**", " ").replace("__", " ").casefold()
    text = re.sub(r"[^\w\s'’-]|_", " ", text)
    return " ".join(text.split())


def contains_sentence(seen: str, sentence: str) -> bool:
    """Whether ``sentence`` appears in ``seen`` as whole words, after normalising both."""
    n = normalize(sentence)
    return bool(n) and f" {n} " in f" {normalize(seen)} "


def mentions(text: str, name: str) -> bool:
    """Whether normalised ``text`` contains normalised ``name`` as a whole phrase."""
    n = normalize(name)
    if not n:
        return False
    return re.search(r"(?<![\w'’-])" + re.escape(n) + r"(?![\w'’-])", normalize(text)) is not None


_HEDGE = re.compile(r"\s*(?:[;,/|\n]|\bor\b|\band\b|\bvs\b)\s*")
_NAME_LINKS = frozenset({"of", "the", "de", "da", "del", "van", "von", "der", "la", "le", "al", "bin"})


def _looks_like_name(part: str) -> bool:
    words = part.replace("*", "").split()
    return (
        1 <= len(words) <= 6
        and words[0][:1].isupper()
        and all(w[:1].isupper() or w.lower() in _NAME_LINKS for w in words)
    )


def hedged(answer: str, names: Sequence[str]) -> bool:
    """Whether the answer line lists another name beside the gold one ("Ke Hirox; Tazax Observatory"): a
    shotgun answer commits to none of its names. An apposition ("Ke Hirox, the astronomer") is not a name."""
    parts = [p.strip() for p in _HEDGE.split(answer) if p.strip()]
    return len(parts) > 1 and any(_looks_like_name(p) and not any(mentions(p, n) for n in names) for p in parts)


def outcome_match(answer: str, names: Sequence[str], confusable: Sequence[str] = ()) -> bool:
    """Exact/alias match: the answer line equals a gold name, or names one with little else around it and no
    other name beside it (a list of candidates is not an answer)."""
    a = normalize(answer)
    a = a[4:] if a.startswith("the ") else a
    if not a or any(mentions(a, c) for c in confusable if not any(mentions(c, n) for n in names)):
        return False
    if any(a == normalize(n) for n in names if n):
        return True
    if hedged(answer, names):
        return False
    for name in names:
        n = normalize(name)
        if n and (a == n or (mentions(a, n) and len(a) <= len(n) + 40)):
            return True
    return False


def _body(text: str) -> str:
    """The answer without references and without the URLs of its citations (entity names are matched here)."""
    return CITATION.sub(lambda m: f"[{m.group(1)}]", strip_references(text))


def seen_by_url(steps: Iterable[Step | Observed]) -> dict[str, str]:
    """Everything the agent saw of each page in ``steps`` (or their records): snippets, windows, matches."""
    out: dict[str, list[str]] = {}
    for record in observed(steps):
        for item in record.seen:
            out.setdefault(item.url, []).append(item.text)
    return {url: "\n".join(parts) for url, parts in out.items()}


READ_TOOLS = frozenset({"open", "find"})
"""The tools whose output is reading a page (a search result's snippet is not)."""


def read_by_url(steps: Iterable[Step | Observed]) -> dict[str, str]:
    """What the agent read of each page in ``steps``: opened windows and ``find`` matches, search snippets left out."""
    return seen_by_url([r for r in observed(steps) if r.tool in READ_TOOLS])


def fill(template: str, names: dict[str, str]) -> str:
    """A statement with each ``<Ek>`` replaced by the entity's name."""
    return _PLACEHOLDER.sub(lambda m: names.get(m.group(1), m.group(0)), template)


def content_words(text: str) -> set[str]:
    """The normalised words of ``text`` longer than two letters, stop words left out."""
    return {w for w in normalize(text).split() if len(w) > 2 and w not in _STOP}


def supported_by(
    statement: dict[str, Any], names: dict[str, str], cited: Sequence[str], seen: dict[str, str]
) -> str | None:
    """The cited URL whose seen content fully supports ``statement``, or None."""
    evidence = statement.get("evidence") or []
    if evidence:
        for ev in evidence:
            url = ev["url"]
            if url in cited and contains_sentence(seen.get(url, ""), ev["text"]):
                return url
        return None
    words = content_words(fill(statement["text"], names))
    if not words:
        return None
    for url in cited:
        have = content_words(seen.get(url, ""))
        if len(words & have) / len(words) >= LEXICAL_RECALL:
            return url
    return None


def identified(hidden: dict[str, Any], answer_text: str, correct: bool) -> dict[str, bool]:
    """Which entities the answer identifies: ``E0`` when the answer is right, others when it names them."""
    body = _body(answer_text)
    out: dict[str, bool] = {}
    for eid, ent in hidden.get("entities", {}).items():
        if eid == "E0":
            out[eid] = correct
        else:
            out[eid] = any(mentions(body, n) for n in [ent.get("name", ""), *ent.get("aliases", [])] if n)
    out.setdefault("E0", correct)
    return out


def _facts(text: str) -> list[str]:
    """The sentences stated with the answer (the answer line excluded), each with its inline citations."""
    body = strip_references(text)
    m = _ANSWER_LINE.search(body)  # without an 'Answer:' line the first line is the answer, as ``answer_line`` reads
    body = body[: m.start()] + body[m.end() :] if m else body.lstrip().partition("\n")[2]
    out = []
    for sentence in _SENTENCE_END.split(body):
        plain = CITATION.sub("", sentence).strip(" -*•\t")
        if len(content_words(plain)) >= 2:
            out.append(sentence.strip())
    return out[:MAX_FACTS]


def derived_statements(
    hidden: dict[str, Any], answer_text: str, correct: bool, cited: Sequence[str], seen: dict[str, str]
) -> list[dict[str, Any]]:
    """CaRR rows for a question without statements: the answer, its stated facts, and citation integrity.

    Every row mentions only ``E0`` (so each supported row is reachable from the answer); rows are identified only
    when the answer is right. ``hidden["gold_docs"]`` (URLs) restricts which cited pages can support the answer.
    """
    names = [n for n in [hidden.get("answer", ""), *hidden.get("aliases", [])] if n]
    gold = set(hidden.get("gold_docs") or [])
    support_pool = [u for u in cited if not gold or u in gold]
    via = next((u for u in support_pool if any(mentions(seen.get(u, ""), n) for n in names)), None)
    rows = [
        {
            "id": "answer",
            "text": "<E0> is stated in a cited page the agent saw" + (" (a gold page)" if gold else ""),
            "via": via if correct else None,
        }
    ]
    for k, fact in enumerate(_facts(answer_text), 1):
        urls = [m.group(2).rstrip(".,;") for m in CITATION.finditer(fact)]
        words = content_words(CITATION.sub("", fact))
        via_f = next(
            (u for u in urls if len(words & content_words(seen.get(u, ""))) / len(words) >= LEXICAL_RECALL), None
        )
        rows.append({"id": f"fact{k}", "text": CITATION.sub("", fact).strip(), "via": via_f if correct else None})
    unseen = [u for u in cited if u not in seen]
    if cited:  # citing nothing is no citation integrity: a bare answer earns nothing for it
        rows.append(
            {
                "id": "cited_seen",
                "text": "every cited page is one the agent saw",
                "via": ("(no unseen citation)" if not unseen else None) if correct else None,
            }
        )
    return [
        {**r, "entities": ["E0"], "filled": {"E0": correct}, "supported": r["via"] is not None, "derived": True}
        for r in rows
    ]


def _seen_anywhere(words: set[str], seen: dict[str, str]) -> bool:
    """Whether some page's seen content holds ``LEXICAL_RECALL`` of ``words``."""
    return bool(words) and any(len(words & content_words(t)) / len(words) >= LEXICAL_RECALL for t in seen.values())


def evidence_seen(hidden: dict[str, Any], rows: Sequence[dict[str, Any]], seen: dict[str, str]) -> float:
    """The share of ``rows`` (the scored statements) whose evidence is in ``seen`` (what the agent read of each
    page, ``read_by_url``), cited or not.

    A statement with evidence sentences: one of them in what the agent read of its page; one without: a page read
    holding ``LEXICAL_RECALL`` of its words (entities by their hidden names); a derived row: the answer named on a
    (gold) page it read, a fact's words on a page it read, citation integrity as supported. The evidence path, not
    the answer text: it ranks a right answer reached by reading above the same answer with no reading.
    """
    if not rows:
        return 0.0
    names = {eid: e.get("name", "") for eid, e in hidden.get("entities", {}).items()}
    names.setdefault("E0", hidden.get("answer", ""))
    by_id = {st.get("id"): st for st in hidden.get("statements", [])}
    answers = [n for n in [hidden.get("answer", ""), *hidden.get("aliases", [])] if n]
    gold = set(hidden.get("gold_docs") or [])
    hits = 0
    for row in rows:
        if row.get("derived"):
            if row["id"] == "answer":
                hit = any(mentions(t, n) for u, t in seen.items() if not gold or u in gold for n in answers)
            elif row["id"] == "cited_seen":
                hit = bool(row["supported"])
            else:
                hit = _seen_anywhere(content_words(row["text"]), seen)
        else:
            st = by_id.get(row["id"], row)
            evidence = st.get("evidence") or []
            if evidence:
                hit = any(contains_sentence(seen.get(ev["url"], ""), ev["text"]) for ev in evidence)
            else:
                hit = _seen_anywhere(content_words(fill(st["text"], names)), seen)
        hits += hit
    return hits / len(rows)


def score(
    hidden: dict[str, Any], answer_text: str | None, steps: Sequence[Step | Observed], alpha: float = ALPHA
) -> dict[str, Any]:
    """Outcome, rubric reward (CaRR chain and evidence seen) and C-GRPO reward of an answer given the steps before
    it, with details.

    ``steps`` are ``Step``s or their records (the env scores its answer from the records it wrote).
    """
    names = [hidden.get("answer", ""), *hidden.get("aliases", [])]
    text = answer_text or ""
    answer = answer_line(text) if answer_text is not None else ""
    correct = answer_text is not None and outcome_match(answer, [n for n in names if n], hidden.get("confusable", []))
    cited = cited_urls(text)
    seen = seen_by_url(steps)
    filled = identified(hidden, text, correct)
    ent_names = {eid: e.get("name", "") for eid, e in hidden.get("entities", {}).items()}
    ent_names.setdefault("E0", hidden.get("answer", ""))
    statements = hidden.get("statements", [])
    rows: list[dict[str, Any]] = []
    for st in statements:
        ents = list(st["entities"])
        all_filled = all(filled.get(e, False) for e in ents)
        via = supported_by(st, ent_names, cited, seen) if all_filled else None
        rows.append(
            {
                "id": st.get("id"),
                "text": st["text"],
                "entities": ents,
                "filled": {e: filled.get(e, False) for e in ents},
                "supported": via is not None,
                "via": via,
            }
        )
    if not statements:
        rows = derived_statements(hidden, text, correct, cited, seen) if answer_text is not None else []
    rubrics = [r["entities"] for r in rows]
    supported = [r["supported"] for r in rows]
    chain = carr_rubric_reward(rubrics, supported) if rows else 0.0
    for i, r in enumerate(rows):  # a statement is reachable iff dropping it lowers the chain reward
        r["reachable"] = (
            bool(supported[i]) and carr_rubric_reward(rubrics, [s and j != i for j, s in enumerate(supported)]) < chain
        )
    evidence = evidence_seen(hidden, rows, read_by_url(steps)) if correct else 0.0
    r_rubric = (1 - EVIDENCE_WEIGHT) * chain + EVIDENCE_WEIGHT * evidence
    outcome = 1.0 if correct else 0.0
    total = c_grpo_reward(outcome, r_rubric, alpha)
    return {
        "answer": answer,
        "correct": correct,
        "outcome": outcome,
        "rubric": r_rubric,
        "chain": chain,
        "evidence": evidence,
        "c_grpo": total,
        "cited": cited,
        "unseen_cited": [u for u in cited if u not in seen],
        "statements": rows,
        "identified": filled,
    }
