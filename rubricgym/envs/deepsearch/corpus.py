"""Documents and corpora: the pages an agent searches, opens and cites.

A ``Corpus`` is a list of ``Document``s with ids and URLs, cut into passages (``chunks``) for the index. It comes
from a generated fictional world (``render.render_world``), a folder of ``.txt``/``.md``/``.html`` files, or a
JSONL of ``{id, title, text, url}`` records.
"""

from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

from rubricgym.core.jsonl import read_jsonl

CHUNK_CHARS = 1200
CORPUS_SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm")


class CorpusError(ValueError):
    """A corpus could not be loaded; the message names the file and what is wrong."""


@dataclass(frozen=True, slots=True)
class Document:
    id: str
    title: str
    url: str
    text: str


@dataclass(frozen=True, slots=True)
class Chunk:
    """A passage of a document: the unit the index ranks. ``start`` is its offset in the document text."""

    doc: int
    start: int
    text: str


class Corpus:
    """Documents addressable by id, URL or exact title, with a content hash that keys the on-disk index."""

    def __init__(self, docs: list[Document], key: str | None = None, chunk_chars: int = CHUNK_CHARS):
        if not docs:
            raise CorpusError("the corpus has no documents")
        self.docs = docs
        self.by_id: dict[str, int] = {}
        self.by_url: dict[str, int] = {}
        self.by_title: dict[str, int] = {}
        for i, d in enumerate(docs):
            if d.id in self.by_id:
                raise CorpusError(f"duplicate document id {d.id!r}; ids must be unique")
            self.by_id[d.id] = i
            self.by_url.setdefault(d.url, i)
            self.by_title.setdefault(d.title.casefold(), i)
        self.chunk_chars = chunk_chars
        self.key = key or _content_key(docs, chunk_chars)
        self._chunks: list[Chunk] | None = None

    def __len__(self) -> int:
        return len(self.docs)

    def resolve(self, ref: str) -> int | None:
        """The index of the document named by ``ref`` (a URL, a doc id or an exact title), or None."""
        ref = ref.strip().strip("<>")
        for table, key in ((self.by_url, ref), (self.by_id, ref), (self.by_title, ref.casefold())):
            if key in table:
                return table[key]
        if ref.endswith("/") and ref[:-1] in self.by_url:
            return self.by_url[ref[:-1]]
        return None

    @property
    def chunks(self) -> list[Chunk]:
        if self._chunks is None:
            self._chunks = [c for i, d in enumerate(self.docs) for c in chunk_text(i, d.text, self.chunk_chars)]
        return self._chunks


def _content_key(docs: list[Document], chunk_chars: int) -> str:
    h = hashlib.sha1(f"chunk={chunk_chars}".encode())
    for d in docs:
        for part in (d.id, d.title, d.url, d.text):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\0")
    return h.hexdigest()[:16]


def chunk_text(doc: int, text: str, size: int = CHUNK_CHARS) -> list[Chunk]:
    """Passages of at most ``size`` characters, cut at paragraph or sentence ends where possible."""
    out: list[Chunk] = []
    start, n = 0, len(text)
    while start < n:
        end = min(n, start + size)
        if end < n:
            window = text[start:end]
            cut = max(window.rfind("\n\n"), window.rfind(". "), window.rfind("\n"))
            if cut > size // 3:
                end = start + cut + 1
        piece = text[start:end]
        if piece.strip():
            out.append(Chunk(doc, start, piece))
        start = end
    return out or [Chunk(doc, 0, text)]


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "noscript"):
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif tag in ("p", "br", "div", "li", "tr", "h1", "h2", "h3", "h4", "section", "article"):
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "noscript") and self._skip:
            self._skip -= 1
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skip:
            self.parts.append(data)


def html_to_text(source: str) -> tuple[str, str]:
    """``(title, text)`` of an HTML page: scripts and styles dropped, block elements as line breaks."""
    p = _TextExtractor()
    p.feed(source)
    text = re.sub(r"[ \t]+", " ", "".join(p.parts))
    text = re.sub(r"\n\s*\n+", "\n\n", text).strip()
    return html.unescape(p.title).strip(), text


def _md_title(text: str) -> str:
    for line in text.splitlines()[:20]:
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return ""


def load_folder(path: str | Path) -> Corpus:
    """Every ``.txt``/``.md``/``.html`` file under ``path`` (recursively), one document each, sorted by path."""
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise CorpusError(f"{root} is not a folder")
    docs: list[Document] = []
    for f in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in CORPUS_SUFFIXES):
        raw = f.read_text(encoding="utf-8", errors="replace")
        rel = f.relative_to(root).as_posix()
        if f.suffix.lower() in (".html", ".htm"):
            title, text = html_to_text(raw)
        else:
            title, text = _md_title(raw), raw
        if not text.strip():
            continue
        docs.append(Document(id=rel, title=title or f.stem.replace("_", " "), url="file://" + quote(str(f)), text=text))
    if not docs:
        raise CorpusError(f"{root} holds no non-empty {'/'.join(CORPUS_SUFFIXES)} files")
    return Corpus(docs)


def load_jsonl(path: str | Path) -> Corpus:
    """A JSONL of ``{id, title, text, url}`` records (``title`` and ``url`` optional)."""
    p = Path(path).expanduser()
    docs: list[Document] = []
    for n, rec in read_jsonl(p, CorpusError):
        if not isinstance(rec, dict) or not isinstance(rec.get("text"), str):
            raise CorpusError(f"{p}:{n}: expected an object with a string 'text' field")
        doc_id = str(rec.get("id", n))
        docs.append(
            Document(
                id=doc_id,
                title=str(rec.get("title") or doc_id),
                url=str(rec.get("url") or f"doc://{quote(doc_id)}"),
                text=rec["text"],
            )
        )
    return Corpus(docs)


def load_corpus(path: str | Path) -> Corpus:
    """A folder or a ``.jsonl`` file, by what ``path`` is."""
    p = Path(path).expanduser()
    if p.is_dir():
        return load_folder(p)
    if p.suffix == ".jsonl":
        return load_jsonl(p)
    raise CorpusError(f"{p}: give a folder of {'/'.join(CORPUS_SUFFIXES)} files or a .jsonl of documents")
