"""Questions for real corpora: a JSONL of ``{question, answer, aliases?, rubrics?, gold_docs?, id?}``.

``gold_docs`` lists the pages (URL, doc id, path or exact title) that hold the answer; when given, only a cited
gold page the agent saw supports an answer that comes without ``rubrics`` (see ``carr.derived_statements``).

``rubrics`` lists single-hop statements in CaRR's format, each a string (``"<E0> was born in Paris"``) or an
object ``{"statement": "<E1> was founded by <E0>", "entities": {"E1": "Acme" | ["Acme", "Acme Inc."]},
"evidence": [{"url": ..., "text": ...}]}``. Every placeholder other than ``<E0>`` (the answer) needs a name so
it can be identified programmatically; ``evidence`` is optional (without it support is judged lexically, or by
an LLM with ``judge.py``).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from rubricgym.core.jsonl import read_jsonl
from rubricgym.envs.deepsearch.corpus import Corpus, CorpusError

_PLACEHOLDER = re.compile(r"<(E\d+)>")
PROMPT_SUFFIX = (
    " Search the corpus, then call answer with a line 'Answer: <answer>' followed by the facts that "
    "justify it, each cited as [n](url)."
)


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value) and value:
        return list(value)
    raise ValueError("an entity must be a name or a non-empty list of names")


def question_record(rec: Any, where: str) -> dict[str, Any]:
    """One question as ``{"id", "prompt", "hops", "hidden"}`` (the shape fictional questions have)."""
    if not isinstance(rec, dict) or not isinstance(rec.get("question"), str) or not isinstance(rec.get("answer"), str):
        raise CorpusError(f"{where}: expected an object with string 'question' and 'answer' fields")
    aliases = rec.get("aliases") or []
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise CorpusError(f"{where}: 'aliases' must be a list of strings")
    entities: dict[str, dict[str, Any]] = {"E0": {"name": rec["answer"], "aliases": list(aliases)}}
    statements = []
    for k, item in enumerate(rec.get("rubrics") or [], 1):
        if isinstance(item, str):
            item = {"statement": item}
        if not isinstance(item, dict) or not isinstance(item.get("statement", item.get("text")), str):
            raise CorpusError(f"{where}: rubric {k} must be a string or an object with a 'statement'")
        text = str(item.get("statement", item.get("text")))
        ids = list(dict.fromkeys(_PLACEHOLDER.findall(text)))
        if not ids:
            raise CorpusError(f"{where}: rubric {k} {text!r} has no entity placeholder such as <E0>")
        for eid, value in (item.get("entities") or {}).items():
            try:
                names = _names(value)
            except ValueError as e:
                raise CorpusError(f"{where}: rubric {k}, entity {eid}: {e}") from None
            entities.setdefault(eid, {"name": names[0], "aliases": names[1:]})
        missing = [e for e in ids if e not in entities]
        if missing:
            raise CorpusError(f"{where}: rubric {k} uses {missing} without naming them in 'entities'")
        evidence = item.get("evidence") or []
        if not isinstance(evidence, list) or not all(
            isinstance(e, dict) and {"url", "text"} <= set(e) for e in evidence
        ):
            raise CorpusError(f"{where}: rubric {k}: 'evidence' must be a list of {{url, text}} objects")
        statements.append({"id": f"S{k}", "text": text, "entities": ids, "evidence": evidence})
    gold = rec.get("gold_docs") or []
    if not isinstance(gold, list) or not all(isinstance(g, str) and g for g in gold):
        raise CorpusError(f"{where}: 'gold_docs' must be a list of page URLs, doc ids or titles")
    own = str(rec.get("id") or "")
    # the task id is opaque: a question's own id often names its answer ("capital-of-france-paris")
    qid = "q-" + hashlib.sha1((own or rec["question"]).encode()).hexdigest()[:12]
    hidden = {
        "question_id": own or qid,
        "answer": rec["answer"],
        "aliases": list(aliases),
        "entities": entities,
        "statements": statements,
        "confusable": [],
        "question": rec["question"].strip(),
        "gold_docs": list(gold),
    }
    return {
        "id": qid,
        "prompt": rec["question"].strip() + PROMPT_SUFFIX,
        "hops": max(1, len(entities) - 1),
        "hidden": hidden,
        "origin": origin(own, where),
    }


def origin(own_id: str, where: str) -> str:
    """How messages name a question of the user's file: its own id (when it has one) and ``FILE:LINE``; the task
    id is an opaque hash the user never wrote."""
    return f"question {own_id!r} at {where}" if own_id else f"the question at {where}"


def resolve_gold(questions: list[dict[str, Any]], corpus: Corpus) -> None:
    """Replace each question's ``gold_docs`` references by page URLs; an unknown page names the question."""
    for q in questions:
        urls = []
        for ref in q["hidden"].get("gold_docs", []):
            doc = corpus.resolve(ref)
            if doc is None:
                raise CorpusError(
                    f"{q['origin']}: gold_docs entry {ref!r} is no page of the corpus "
                    f"(use a URL, doc id, relative path or exact title, e.g. {corpus.docs[0].url!r})"
                )
            urls.append(corpus.docs[doc].url)
        q["hidden"]["gold_docs"] = urls


def load_questions(path: str | Path) -> list[dict[str, Any]]:
    """Every question of a JSONL file; errors name the line."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise CorpusError(f"{p}: no such questions file")
    out = [question_record(rec, f"{p}:{n}") for n, rec in read_jsonl(p, CorpusError)]
    if not out:
        raise CorpusError(f"{p}: no questions")
    seen: dict[str, str] = {}
    for q in out:
        if q["id"] in seen:
            raise CorpusError(
                f"{q['origin']} repeats {seen[q['id']]} (the same 'id', or the same question without one): "
                "give each question its own 'id' or remove the repeat"
            )
        seen[q["id"]] = q["origin"]
    return out
