"""What the deep search tools show the agent (the env declares the tools themselves with ``@tool``).

Each function returns ``(observation text, seen)`` where ``seen`` lists ``{"url", "text"}`` records of exactly
the page content the agent was shown (plain, without highlight marks), which the CaRR checks later match
statements against.
"""

from __future__ import annotations

import re
from typing import Any

from rubricgym.core.env import ToolError
from rubricgym.envs.deepsearch.corpus import Corpus
from rubricgym.envs.deepsearch.index import SearchIndex

MAX_K = 10
MAX_QUERY_CHARS = 500
MAX_PATTERN_CHARS = 200
MAX_MATCHES = 8
CONTEXT_CHARS = 240


def _clean(value: Any, what: str, limit: int) -> str:
    text = str(value).replace("\x00", " ").strip()
    if not text:
        raise ToolError(f"the {what} is empty; give some words to look for")
    return text[:limit]


def as_int(value: Any, default: int) -> int:
    """An integer argument; JSON floats such as 3.0 count, anything else falls back to ``default``."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return default


def resolve(corpus: Corpus, ref: Any) -> int:
    doc = corpus.resolve(str(ref))
    if doc is None:
        shown = str(ref)[:80]
        raise ToolError(  # no real page as the example: it could be the answer's
            f"no page {shown!r}; pass the URL (or doc id) of a search result, as its 'URL:' line shows it"
        )
    return doc


def search(index: SearchIndex, query: Any, k: Any = 5) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """``(text, seen, results)`` of a search."""
    q = _clean(query, "query", MAX_QUERY_CHARS)
    kk = max(1, min(MAX_K, as_int(k, 5)))
    hits = index.search(q, kk)
    if not hits:
        return (f"No results for {q!r}: none of its words are in the index. Try names, years or places.", [], [])
    docs = index.corpus.docs
    lines = [f"Results for {q!r} ({len(hits)}):"]
    seen, results = [], []
    for n, h in enumerate(hits, 1):
        d = docs[h.doc]
        lines += [f"[{n}] {d.title}", f"    URL: {d.url}  (doc {d.id})", f"    {h.highlighted}"]
        seen.append({"url": d.url, "text": h.snippet})
        results.append({"doc": d.id, "url": d.url, "title": d.title, "score": h.score})
    lines.append("Read a page with open(doc=URL); cite it as [n](URL).")
    return "\n".join(lines), seen, results


def open_page(corpus: Corpus, ref: Any, offset: Any, window: int) -> tuple[str, list[dict[str, Any]], str]:
    """``(text, seen, url)`` of a window of a page."""
    d = corpus.docs[resolve(corpus, ref)]
    off = as_int(offset, 0)
    n = len(d.text)
    if off < 0 or off >= n:
        raise ToolError(f"offset {off} is outside the page ({n} characters): use 0 to {max(0, n - 1)}")
    end = min(n, off + window)
    if end < n:  # end the window at a line or sentence end when one is near
        cut = max(d.text.rfind("\n", off, end), d.text.rfind(". ", off, end) + 1)
        if cut > off + window // 2:
            end = cut
    body = d.text[off:end]
    head = f"{d.title} — {d.url} (doc {d.id}), characters {off}-{end} of {n}:"
    tail = f'\n[... {n - end} more characters: open(doc="{d.url}", offset={end}) ...]' if end < n else "\n[end of page]"
    return head + "\n" + body + tail, [{"url": d.url, "text": body}], d.url


def _sentence_span(text: str, start: int, end: int) -> tuple[int, int]:
    lo = max(0, start - CONTEXT_CHARS)
    cuts = [text.rfind(sep, lo, start) for sep in (". ", "\n")]
    a = max(cuts)
    a = lo if a < 0 else a + 1
    hi = min(len(text), end + CONTEXT_CHARS)
    ends = [i for i in (text.find(". ", end, hi), text.find("\n", end, hi)) if i >= 0]
    b = (min(ends) + 1) if ends else hi
    return a, b


def find(corpus: Corpus, ref: Any, pattern: Any) -> tuple[str, list[dict[str, Any]], str]:
    """``(text, seen, url)`` of the matches of a literal pattern in a page."""
    d = corpus.docs[resolve(corpus, ref)]
    p = _clean(pattern, "pattern", MAX_PATTERN_CHARS)
    starts = [m.start() for m in re.finditer(re.escape(p), d.text, re.IGNORECASE)]
    if not starts:
        return f"No match for {p!r} in {d.title} ({d.url}).", [], d.url
    lines = [f"{len(starts)} match(es) for {p!r} in {d.title} ({d.url}):"]
    seen = []
    for s in starts[:MAX_MATCHES]:
        a, b = _sentence_span(d.text, s, s + len(p))
        ctx = d.text[a:b].strip()
        seen.append({"url": d.url, "text": ctx})
        lines.append(f"[offset {s}] {ctx}")
    if len(starts) > MAX_MATCHES:
        lines.append(f"[... {len(starts) - MAX_MATCHES} more matches not shown ...]")
    return "\n".join(lines), seen, d.url
