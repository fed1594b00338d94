"""Matching free text to the knowledge base: history questions to findings, exam and diagnosis names to entries.

We chose lexical matching with a synonym table over embeddings: it is deterministic, needs no model, costs
microseconds per question (the env must never slow a training run) and its failures are easy to read and fix by
adding a synonym. Words are lower-cased, British spellings folded to American (``ae``/``oe`` -> ``e``),
crudely stemmed and mapped to a canonical word; a question matches a finding by IDF-weighted word overlap.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

_SUGGEST_CUT = 0.4  # the similarity a "did you mean" suggestion needs
_WORD = re.compile(r"[a-z0-9]+")
_ICD = re.compile(r"\b([A-Z][0-9]{2}(?:\.[0-9A-Z]{1,4})?)\b")
_STOP_WORDS = (
    "a an the and or of to in on at for with without from by is are was were be been do does did you your yours "
    "have has had any anything some ever there this that these those it its i me my we our us how what when "
    "where which who why can could would should will please tell about more bit feel feeling felt get got "
    "lately recently recent notice noticed experience experienced experiencing having also other than like "
    "into up down since past much many very really just yes no not"
)
STOP = frozenset(_STOP_WORDS.split())
# canonical word -> variants (after spelling folding and stemming, variants map to the canonical word)
SYNONYMS: dict[str, tuple[str, ...]] = {
    "breath": ("breathless", "breathlessness", "dyspnea", "dyspnoea", "sob", "breathing", "winded", "puff"),
    "pain": ("ache", "aching", "hurt", "hurts", "hurting", "sore", "soreness", "discomfort", "painful"),
    "chest": ("thorax", "breastbone", "sternum", "thoracic"),
    "spread": ("radiate", "radiating", "radiation", "spreading", "go", "goes", "going", "travel", "move", "moved"),
    "sweat": ("sweating", "sweaty", "sweats", "diaphoresis", "diaphoretic", "clammy", "perspiration"),
    "vomit": ("vomiting", "vomited", "sick", "throwing", "emesis", "retching"),
    "nausea": ("nauseous", "nauseated", "queasy"),
    "fever": ("temperature", "febrile", "pyrexia", "hot", "feverish", "fevers"),
    "chill": ("chills", "shiver", "shivers", "rigor", "rigors", "shaking", "shake"),
    "cough": ("coughing", "coughs"),
    "sputum": ("phlegm", "mucus", "spit"),
    "blood": ("bloody", "bleeding", "bleed", "haemorrhage", "hemorrhage", "haematemesis", "hematemesis"),
    "urine": ("urinate", "urinating", "urination", "pee", "peeing", "wee", "urinary", "micturition", "water"),
    "stool": ("stools", "bowel", "bowels", "poo", "feces", "faeces", "motion", "motions"),
    "diarrhea": ("diarrhoea", "loose", "runny", "watery"),
    "swell": ("swollen", "swelling", "edema", "oedema", "puffy", "puffiness", "enlarged", "lump"),
    "leg": ("legs", "calf", "calves", "ankle", "ankles", "shin", "thigh"),
    "head": ("headache", "headaches", "migraine"),
    "smoke": ("smoker", "smoking", "cigarette", "cigarettes", "tobacco"),
    "alcohol": ("drink", "drinking", "drinker", "booze", "beer", "wine", "alcoholic"),
    "tired": (
        "tiredness",
        "fatigue",
        "fatigued",
        "exhausted",
        "exhaustion",
        "weary",
        "lethargy",
        "lethargic",
        "energy",
    ),
    "weak": ("weakness", "paralysis", "paralysed", "numb", "numbness"),
    "dizzy": ("dizziness", "lightheaded", "light", "faint", "fainting", "fainted", "vertigo", "syncope", "collapse"),
    "rash": ("spots", "blotches", "hives", "urticaria", "itchy", "itching", "itch", "petechiae"),
    "weight": ("weigh", "kg", "pounds"),
    "gain": ("put", "gained", "heavier", "increase", "increased", "fatter"),
    "loss": ("lost", "lose", "losing", "thinner", "dropped"),
    "confuse": ("confused", "confusion", "disorientated", "disoriented", "muddled", "drowsy", "drowsiness"),
    "travel": ("trip", "abroad", "holiday", "flight", "flew", "fly"),
    "thirst": ("thirsty", "drinking", "polydipsia"),
    "period": ("periods", "menstrual", "menses", "lmp", "menstruation"),
    "pregnant": ("pregnancy", "expecting", "gestation"),
    "palpitation": ("palpitations", "racing", "pounding", "fluttering", "heartbeat"),
    "jaw": ("mandible",),
    "arm": ("arms", "shoulder"),
    "stiff": ("stiffness", "rigid", "rigidity"),
    "neck": ("nuchal",),
    "eye": ("eyes", "vision", "visual", "sight", "see"),
    "yellow": ("jaundice", "jaundiced", "yellowing"),
    "sudden": ("suddenly", "abrupt", "abruptly", "thunderclap", "instant"),
    "medicine": ("medication", "medications", "medicines", "tablets", "pills", "drugs", "prescription"),
    "seizure": ("fit", "fits", "convulsion", "convulsions", "seizures", "epileptic"),
    "joint": ("joints", "knee", "toe", "wrist", "knuckles", "hip"),
    "lie": ("lying", "flat", "supine", "recline"),
    "exertion": ("exercise", "exert", "walking", "effort", "stairs", "exertional"),
}
_CANON = {v: k for k, vs in SYNONYMS.items() for v in vs}


def fold(text: str) -> str:
    """Lower-case with British spellings folded (haem -> hem, oe/ae -> e) and punctuation turned to spaces."""
    t = text.lower().replace("haem", "hem").replace("oe", "e").replace("ae", "e")
    return " ".join(_WORD.findall(t))


def _stem(w: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


@functools.lru_cache(maxsize=65536)
def concept(word: str) -> str:
    """The canonical form of one (folded) word."""
    if word in _CANON:
        return _CANON[word]
    stem = _stem(word)
    return _CANON.get(stem, stem)


def concepts(text: str) -> frozenset[str]:
    """The content concepts of ``text`` (stop words dropped, synonyms merged)."""
    return frozenset(concept(w) for w in fold(text).split() if w not in STOP)


class FindingIndex:
    """Scores a question against a fixed vocabulary of finding phrases by IDF-weighted concept overlap."""

    def __init__(self, phrases: Iterable[str]):
        self.phrases = list(dict.fromkeys(phrases))
        self.sets = {p: concepts(p) for p in self.phrases}
        df = Counter(c for s in self.sets.values() for c in s)
        n = max(1, len(self.phrases))
        self.idf = {c: math.log(1 + n / k) for c, k in df.items()}

    def score(self, question: frozenset[str], phrase: str) -> float:
        """How well the phrase answers the question, in [0, 1]: mostly how much of the question it explains.

        Words no finding uses weigh little (they cannot tell findings apart); shared rare words weigh most.
        """
        ps = self.sets.get(phrase) or concepts(phrase)
        shared = question & ps
        if not shared:
            return 0.0
        w = self.idf.get
        got = sum(w(c, 0.5) for c in shared)
        return 0.7 * got / sum(w(c, 0.5) for c in question) + 0.3 * got / sum(w(c, 0.5) for c in ps)

    def best(self, question: str, among: Sequence[str], threshold: float = 0.45) -> list[tuple[float, str]]:
        """The phrases of ``among`` scoring at least ``threshold`` for ``question``, best first."""
        q = concepts(question)
        if not q:
            return []
        scored = [(self.score(q, p), p) for p in among]
        return sorted(((s, p) for s, p in scored if s >= threshold), key=lambda x: -x[0])


class NameIndex:
    """Resolves free-text names (exams, diagnoses) to entry ids through names, aliases and codes."""

    def __init__(
        self, entries: Iterable[tuple[str, Sequence[str], str | None]], min_len: int = 1, id_is_name: bool = True
    ):
        self.names: dict[str, str] = {}  # folded name -> id
        self.display: dict[str, str] = {}  # id -> display name
        self.codes: dict[str, str] = {}  # ICD-10 without the dot -> id
        for id_, names, code in entries:
            self.display.setdefault(id_, names[0] if names else id_)
            for n in (id_.replace("_", " "), *names) if id_is_name else names:
                if len(fold(n)) >= min_len:
                    self.names.setdefault(fold(n), id_)
            if code:
                self.codes.setdefault(code.replace(".", "").upper(), id_)
        self._by_len = sorted(self.names, key=len, reverse=True)
        lengths: dict[str, set[int]] = {}
        for n in self.names:
            parts = n.split()
            lengths.setdefault(parts[0], set()).add(len(parts))
        self._lengths = {w: tuple(sorted(ns, reverse=True)) for w, ns in lengths.items()}

    def resolve(self, text: str, filler: frozenset[str] | None = None) -> str | None:
        """The id ``text`` names: exact name, ICD code, the earliest (then longest) contained name, or a close typo.

        With ``filler``, a contained name counts only when every other word of ``text`` is a filler word
        ("Troponin I level", not "CA-125", which contains the calcium alias "Ca"). A typo must be close word by
        word ("pnuemonia", "troponn I"), so "Rectal biopsy" is not "Renal biopsy"."""
        folded = fold(text)
        if not folded:
            return None
        if folded in self.names:
            return self.names[folded]
        for code in _ICD.findall(text.upper()):
            if code.replace(".", "") in self.codes:
                return self.codes[code.replace(".", "")]
        padded = f" {folded} "
        found = [(padded.find(f" {n} "), -len(n), n) for n in self._by_len if f" {n} " in padded]
        if filler is not None:
            words = folded.split()
            found = [f for f in found if all(w in filler for w in _rest(words, f[2].split()))]
        if found:
            return self.names[min(found)[2]]
        for close in difflib.get_close_matches(folded, list(self.names), n=3, cutoff=0.8):
            if close_words(folded, close):
                return self.names[close]
        return None

    def contained(self, text: str) -> list[tuple[int, int, str]]:
        """The (start word, end word, id) of the names that occur in ``text`` as whole words, longest first and
        never overlapping ('CT pulmonary angiogram' is one match, not also 'angiogram'). Only n-grams that start
        with a name's first word are looked up, so the cost grows with the text, not with the catalogue."""
        words = fold(text).split()
        found = []
        for i, w in enumerate(words):
            for n in self._lengths.get(w, ()):
                id_ = self.names.get(" ".join(words[i : i + n])) if i + n <= len(words) else None
                if id_ is not None:
                    found.append((i, i + n, id_))
        found.sort(key=lambda f: f[0] - f[1])
        out: list[tuple[int, int, str]] = []
        for start, end, id_ in found:
            if all(end <= s or start >= e for s, e, _ in out):
                out.append((start, end, id_))
        return out

    def suggest(self, text: str, n: int = 5) -> list[str]:
        """Display names of the entries closest to ``text`` (for 'did you mean' observations), closest first.

        A name scores the best of its spelling similarity (with and without spaces) and its word overlap.
        """
        folded = fold(text)
        words, compact = set(folded.split()), folded.replace(" ", "")
        best: dict[str, float] = {}
        for name, id_ in self.names.items():
            nwords = set(name.split())
            score = max(
                _spelling(folded, name),
                _spelling(compact, name.replace(" ", "")),
                len(words & nwords) / len(words | nwords) + 0.1 if words & nwords else 0.0,
            )
            best[id_] = max(best.get(id_, 0.0), score)
        ranked = sorted((i for i, sc in best.items() if sc >= _SUGGEST_CUT), key=lambda i: -best[i])
        return [self.display[i] for i in ranked[:n]]


def _spelling(a: str, b: str) -> float:
    """``SequenceMatcher``'s similarity of ``a`` and ``b``, or 0 when their lengths alone keep it under the 0.4 that
    ``suggest`` keeps (its upper bound, 2 min / sum): the match is quadratic, and an agent's 100,000-character text
    against every name took ~40 s."""
    if 2 * min(len(a), len(b)) < _SUGGEST_CUT * (len(a) + len(b)):
        return 0.0
    return difflib.SequenceMatcher(None, a, b).ratio()


def _rest(words: list[str], name: list[str]) -> list[str]:
    """``words`` without the first occurrence of the run ``name``."""
    n = len(name)
    for i in range(len(words) - n + 1):
        if words[i : i + n] == name:
            return words[:i] + words[i + n :]
    return words


def close_words(a: str, b: str) -> bool:
    """Whether two folded names are the same words with typos: as many words, each close to its partner (a word
    of three letters or fewer, or with digits, must be equal)."""
    wa, wb = a.split(), b.split()
    if len(wa) != len(wb):
        return False
    for x, y in zip(wa, wb, strict=True):
        if x == y:
            continue
        if len(x) <= 3 or len(y) <= 3 or any(c.isdigit() for c in x + y):
            return False
        if difflib.SequenceMatcher(None, x, y).ratio() < 0.8:
            return False
    return True
