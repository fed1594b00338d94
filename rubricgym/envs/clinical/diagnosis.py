"""Reading a committed diagnosis against the case: which condition it names, which can't-miss differentials the
agent considered or excluded, and which exams its reasoning cites (the inputs of ``diagnose``'s info and checks)."""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rubricgym.core.tools import ToolError
from rubricgym.envs.clinical.matching import _ICD, STOP, NameIndex, close_words, fold
from rubricgym.envs.clinical.patient import analyte_index, condition_index
from rubricgym.envs.clinical.schema import KnowledgeBase

_QUALIFIER_WORDS = (
    "acute subacute chronic hyperacute likely probable probably possible possibly suspected presumed presumptive "
    "query confirmed definite definitive diagnosis consistent left right bilateral unilateral sided mild moderate "
    "severe early late recurrent new onset episode uncomplicated simple"
)
QUALIFIERS = frozenset(_QUALIFIER_WORDS.split())
"""Words that qualify a diagnosis without changing which condition it names (certainty, acuity, laterality,
severity): an answer may add or omit them, unless it contradicts the case's own (``CONFLICTS``)."""
CONFLICTS = (
    frozenset({"acute", "subacute", "chronic", "hyperacute"}),
    frozenset({"left", "right", "bilateral"}),
    frozenset({"primary", "secondary"}),
    frozenset({"benign", "malignant"}),
    frozenset({"upper", "lower"}),
)
"""Word groups whose members name different conditions ("chronic" is not "acute" cholecystitis)."""
_CONTRASTED = frozenset().union(*CONFLICTS)
ALTERNATIVES = frozenset({"or", "and", "vs", "versus", "plus", "either", "nor"})
"""Words that join two diagnoses into a list (a list commits to none of them)."""
_CAUSES = ("secondary to", "due to", "caused by", "complicated by", "precipitated by", "induced by", "triggered by")
"""Where a cause or a complication follows the committed diagnosis ("pneumonia complicated by sepsis")."""
_NEGATIONS = frozenset({"non", "no", "not", "without", "excluding", "excluded"})
_ARTICLES = frozenset({"a", "an", "the", "any", "of"})
_TOKEN = re.compile(r"[a-z0-9]+|[,;/\n&+?|]")
_PAREN = re.compile(r"\(([^()]*)\)")
_ABBREVIATION = re.compile(r"^[A-Za-z][A-Za-z0-9-]{1,9}$")
MAX_EXTRA_WORDS = 3
"""Words beside the named condition (qualifiers and stop words aside) an answer may carry, "perforated" or
"in blast crisis"; more name something else, a list of conditions no index knows."""


MAX_TYPO_WORDS = 8
"""The longest answer read as a misspelt name (a longer one is not a name; the fuzzy match costs its length)."""


def name_variants(name: str) -> list[str]:
    """``name`` and how answers write it: without its parenthetical ("Chronic obstructive pulmonary disease"),
    and the abbreviation the parenthetical gives ("COPD"); a parenthetical that is not one word is dropped."""
    out = [name]
    inner = [m.strip() for m in _PAREN.findall(name)]
    bare = _PAREN.sub(" ", name).strip()
    if inner and bare:
        out.append(bare)
    out += [i for i in inner if _ABBREVIATION.match(i) and any(c.isupper() for c in i)]
    return out


def _core(words: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(w for w in words if w not in QUALIFIERS)


def _bag(words: Iterable[str]) -> frozenset[str]:
    """The words that tell conditions apart, in no order (certainty and severity words and stop words left out;
    "chronic" and "left" kept: they name a different condition)."""
    return frozenset(w for w in words if (w not in QUALIFIERS or w in _CONTRASTED) and w not in STOP)


def _repeats(words: Iterable[str]) -> bool:
    """Whether a word that tells conditions apart comes twice: the text then names more than one condition, even
    when its words, as a set, are one name's ("Non-ST-elevation myocardial infarction ST-elevation myocardial
    infarction" holds two names, and NSTEMI's words alone)."""
    told = [w for w in words if (w not in QUALIFIERS or w in _CONTRASTED) and w not in STOP]
    return len(told) != len(set(told))


@dataclass(frozen=True)
class Named:
    """One condition an answer names: its words ``[start, end)`` and who it is (``"case"``, a knowledge-base
    condition id, or a case file's diagnosis as written)."""

    start: int
    end: int
    identity: str


class ConditionVocabulary:
    """Every condition name an answer might use (the case's, the knowledge base's, the case file's), each with
    the condition it names, the case's first; finds the conditions a text names, longest names first."""

    def __init__(self, kb: KnowledgeBase, case_names: Sequence[str], same: Collection[str], labels: Sequence[str]):
        self.phrases: dict[tuple[str, ...], str] = {}
        self.same = frozenset(same)
        """Knowledge-base conditions that are the case's diagnosis."""
        self.reference: dict[str, frozenset[str]] = {}
        """The words of each identity's first name (what a qualifier may contradict)."""
        groups: list[tuple[str, list[str]]] = [("case", list(case_names))]
        groups += [("case" if c.id in same else c.id, [c.name, *c.aliases]) for c in kb.conditions.values()]
        groups += [(f"file:{fold(n)}", [n]) for n in labels]
        for identity, names in groups:
            if names and identity not in self.reference:
                self.reference[identity] = frozenset(fold(_PAREN.sub(" ", names[0])).split())
            for n in names:
                for v in name_variants(n):
                    words = tuple(fold(v).split())
                    if words:
                        self.phrases.setdefault(words, identity)
        cores: dict[tuple[str, ...], set[str]] = {}
        for words, identity in self.phrases.items():
            core = _core(words)
            if core and core != words and not set(core) <= STOP:
                cores.setdefault(core, set()).add(identity)
        for core, ids in cores.items():  # "promyelocytic leukemia" of "acute promyelocytic leukemia"
            if len(ids) == 1 and core not in self.phrases:
                self.phrases[core] = next(iter(ids))
        self.bags: dict[frozenset[str], set[str]] = {}
        for words, identity in self.phrases.items():
            self.bags.setdefault(_bag(words), set()).add(identity)
        lengths: dict[str, set[int]] = {}
        for words in self.phrases:
            lengths.setdefault(words[0], set()).add(len(words))
        self._lengths = {w: sorted(ns, reverse=True) for w, ns in lengths.items()}

    def find(self, words: Sequence[str]) -> list[Named]:
        """The conditions ``words`` name, longest first, never overlapping, negated mentions ("non-Hodgkin")
        left out, in text order."""
        found = []
        for i, w in enumerate(words):
            for n in self._lengths.get(w, ()):
                identity = self.phrases.get(tuple(words[i : i + n])) if i + n <= len(words) else None
                if identity is not None:
                    found.append(Named(i, i + n, identity))
        found.sort(key=lambda f: f.start - f.end)
        out: list[Named] = []
        for f in found:
            if all(f.end <= o.start or f.start >= o.end for o in out):
                out.append(f)
        return sorted((f for f in out if not _negated(words, f.start)), key=lambda f: f.start)

    def conflicts(self, identity: str, words: Collection[str]) -> bool:
        """Whether ``words`` contradict the identity's first name ("chronic" against "Acute cholecystitis")."""
        ref = self.reference.get(identity, frozenset())
        return any((g & set(words)) - ref and (g & ref) - set(words) for g in CONFLICTS)


def _negated(words: Sequence[str], start: int) -> bool:
    """Whether the name at ``start`` is denied: a negation before it, articles aside ("not a pulmonary
    embolism", "non-Hodgkin")."""
    i = start - 1
    while i >= 0 and words[i] in _ARTICLES:
        i -= 1
    return i >= 0 and words[i] in _NEGATIONS


@functools.lru_cache(maxsize=64)
def _vocabulary(
    kb: KnowledgeBase, case_names: tuple[str, ...], same: frozenset[str], labels: tuple[str, ...]
) -> ConditionVocabulary:
    return ConditionVocabulary(kb, case_names, same, labels)


def case_vocabulary(kb: KnowledgeBase, facts: dict[str, Any]) -> ConditionVocabulary:
    """The condition names of a case's task: its diagnosis and aliases, the knowledge base's conditions and the
    diagnoses of every case of its file (``facts["label_space"]``)."""
    d = facts.get("diagnosis", {})
    names = tuple(n for n in [d.get("name", ""), *d.get("aliases", [])] if n)
    index = condition_index(kb)
    same = {facts.get("condition")} | {index.names.get(fold(v)) for n in names for v in name_variants(n)}
    labels = tuple(facts.get("label_space", []))
    return _vocabulary(kb, names, frozenset(s for s in same if s), labels)


def _tokens(text: str) -> tuple[list[str], list[int]]:
    """The folded words of ``text`` and the word indices a punctuation separator (, ; / newline & + ?) precedes."""
    t = text.lower().replace("haem", "hem").replace("oe", "e").replace("ae", "e")
    words: list[str] = []
    seps: list[int] = []
    for tok in _TOKEN.findall(t.replace("\n", " \n ")):
        if tok[0].isalnum():
            words.append(tok)
        else:
            seps.append(len(words))
    return words, seps


def match_diagnosis(kb: KnowledgeBase, facts: dict[str, Any], text: str) -> str | None:
    """``"case"`` when ``text`` commits to the case's diagnosis: it names it (a name, an alias, the abbreviation
    of its parenthetical, an ICD-10 code; in any word order; qualifiers such as "acute", "likely" or a side
    added or left out unless they contradict the case's) and no other condition. ``"several"`` when it names two
    or more conditions, however joined (spaces, commas, "or", "and/or", slashes, semicolons, lines): a list commits
    to none of them, and alternatives belong in the ``differential`` field, which is scored as such. Otherwise the
    one condition it names (a knowledge-base id, or ``file:`` and a case file's diagnosis), or None.

    A cause or complication after the diagnosis ("... secondary to ...") is not a second diagnosis."""
    vocab = case_vocabulary(kb, facts)
    words, seps = _tokens(text)
    codes = _codes(vocab, kb, facts, text)
    code_words = {w for c in codes for w in fold(c[0]).split()}
    named = vocab.find(words)
    cut = _cause(words, named)
    words, seps = words[:cut], [s for s in seps if 0 < s < cut]
    named = [n for n in named if n.end <= cut]
    ids = {n.identity for n in named} | {i for _, i in codes}
    inside = {i for n in named for i in range(n.start, n.end)}
    extra = [w for i, w in enumerate(words) if i not in inside and w not in STOP and w not in QUALIFIERS]
    extra = [w for w in extra if w not in code_words and w not in ALTERNATIVES and w not in _NEGATIONS]
    listed = any(not any(n.start < s < n.end for n in named) for s in seps) or any(
        w in ALTERNATIVES and i not in inside for i, w in enumerate(words)
    )
    kept = [w for w in words if w not in code_words]
    whole = vocab.bags.get(_bag(kept), set()) if not _repeats(kept) else set()
    if len(whole) == 1:  # every word is one name's, in another order: "leukemia, chronic myeloid"
        ids, extra, listed = set(whole), [], False
    if not ids and 0 < len(words) <= MAX_TYPO_WORDS and not listed:  # a typo of one name: "pnuemonia"
        close = difflib.get_close_matches(" ".join(words), [" ".join(p) for p in vocab.phrases], n=1, cutoff=0.8)
        if close and close_words(" ".join(words), close[0]):
            ids, extra = {vocab.phrases[tuple(close[0].split())]}, []
    if len(ids) > 1 or (ids and extra and (listed or len(extra) > MAX_EXTRA_WORDS)):
        return "several"
    if not ids:
        return None
    (identity,) = ids
    if vocab.conflicts(identity, words):
        return None
    return identity


def _codes(vocab: ConditionVocabulary, kb: KnowledgeBase, facts: dict[str, Any], text: str) -> list[tuple[str, str]]:
    """The known ICD-10 codes in ``text``, each with the condition it names (the case's: ``"case"``)."""
    own = str(facts.get("diagnosis", {}).get("icd10") or "").replace(".", "").upper()
    codes = condition_index(kb).codes
    out = []
    for code in _ICD.findall(text.upper()):
        key = code.replace(".", "")
        if own and key == own:
            out.append((code, "case"))
        elif key in codes:
            out.append((code, "case" if codes[key] in vocab.same else codes[key]))
    return out


def _cause(words: Sequence[str], named: Sequence[Named]) -> int:
    """Where a cause or complication clause begins (outside any name), or the end of ``words``."""
    inside = {i for n in named for i in range(n.start, n.end)}
    for i in range(1, len(words)):
        for marker in _CAUSES:
            m = marker.split()
            if tuple(words[i : i + len(m)]) == tuple(m) and i not in inside:
                return i
    return len(words)


MAX_CONSIDERED = 6
"""The most conditions a differential (with the impressions and reasoning) may name and still count as
considered; a longer list is a shotgun, not a differential."""


def considered_conditions(
    kb: KnowledgeBase, facts: dict[str, Any], ordered: Collection[str], texts: list[str]
) -> list[str]:
    """The case's can't-miss conditions that ``texts`` name, or whose key exams were ``ordered`` (excluded).

    Texts naming more than ``MAX_CONSIDERED`` conditions in all count for nothing (only the exclusions)."""
    index = condition_index(kb)
    named = {i for t in set(texts) if t for _, _, i in index.contained(t)}
    if len(named) > MAX_CONSIDERED:  # a list of everything considers nothing: only exclusions by exam count
        texts, named = [], set()
    ids = named
    blob = " ".join(f" {fold(t)} " for t in texts if t)
    out = []
    for item in facts.get("cant_miss", []):
        names = [item["name"], *item.get("aliases", [])]
        excluded = any(k in ordered for k in item.get("key_exams", []))
        if item["id"] in ids or excluded or any(f" {fold(n)} " in blob for n in names):
            out.append(item["id"])
    return out


def cited_exams(kb: KnowledgeBase, reason: str) -> list[str]:
    """The exams and analytes ``reason`` names."""
    return sorted({i for _, _, i in analyte_index(kb).contained(reason)})


def differential_list(value: Any) -> list[str]:
    """A differential given as a list, or as one string separated by commas, semicolons or lines."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [p.strip() for p in re.split(r"[;,\n]", value) if p.strip()]
    if isinstance(value, list):
        return [str(v) for v in value if v is not None and str(v).strip()]
    raise ToolError('differential must be a list of diagnoses, e.g. ["pulmonary embolism", "pericarditis"]')


def impression_fit(kb: KnowledgeBase, facts: dict[str, Any], impression: str, covered: Collection[str]) -> bool:
    """Whether an order follows from its stated impression: the impression names a condition (of the knowledge
    base, or the case's own diagnosis) and the exam, or a panel reporting it (``covered``: the exam id and its
    analytes), is one of that condition's key exams or a bedside basic. "unsure" justifies nothing."""
    named = {i for _, _, i in condition_index(kb).contained(impression)}
    wanted = {k for c in named if c in kb.conditions for k in kb.conditions[c].key_exams}
    d = facts.get("diagnosis", {})
    names = [v for n in [d.get("name", ""), *d.get("aliases", [])] if n for v in name_variants(n)]
    case_index = NameIndex([("case", names, None)], id_is_name=False)
    if case_index.contained(impression) or facts.get("condition") in named:
        named.add("case")
        wanted |= set(facts.get("key_exams", []))
    wanted |= {"vitals", "spo2", "bedside_glucose"}
    return bool(named) and bool(wanted & set(covered))


MapsTo = Literal["knowledge base", "alias", "neither"]


@dataclass
class DiagnosisMap:
    """How a case's diagnosis name maps to the knowledge base."""

    maps_to: MapsTo
    condition: str | None = None
    """The knowledge-base condition it is (``None`` for ``neither``)."""
    via: str | None = None
    """The name it matched: the condition's name, an alias, or a written variant ("COPD" of "... (COPD)")."""
    near: list[str] = field(default_factory=list)
    """For ``neither``: knowledge-base conditions the matcher reads the name as ("Pneumonia due to
    Streptococcus pneumoniae" is pneumonia to it). The case is not linked to them, so an answer naming one of
    them ("pneumonia") is not credited; an alias in a knowledge-base overlay links them."""

    def describe(self) -> str:
        if self.maps_to != "neither":
            return f"{self.maps_to}: {self.condition} ({self.via!r})"
        if self.near:
            return f"neither; reads as {', '.join(self.near)}, but an answer naming it is not credited"
        return "neither (only the case's own name is credited)"


def map_diagnosis(kb: KnowledgeBase, name: str) -> DiagnosisMap:
    """``knowledge base`` when ``name`` is a condition's name or id; ``alias`` when it is one of a condition's
    aliases or a written variant of one ("Chronic obstructive pulmonary disease (COPD)" by "COPD"); ``neither``
    otherwise, with the conditions the env's matcher would read the name as (``near``)."""
    index = condition_index(kb)
    folded = fold(name)
    cid = index.names.get(folded)
    if cid is not None:
        cond = kb.conditions[cid]
        own = {fold(cond.name), fold(cid.replace("_", " "))}
        return DiagnosisMap("knowledge base" if folded in own else "alias", cid, name)
    for variant in name_variants(name)[1:]:
        cid = index.names.get(fold(variant))
        if cid is not None:
            return DiagnosisMap("alias", cid, variant)
    near = []
    for _, _, cid in index.contained(name):
        cond = kb.conditions[cid]
        facts = {"diagnosis": {"name": cond.name, "aliases": list(cond.aliases)}, "condition": cid}
        if match_diagnosis(kb, facts, name) == "case" and cid not in near:
            near.append(cid)
    return DiagnosisMap("neither", near=near)
