"""The virtual patient (the programmatic world model): history answers, examination and exam results.

Every value is drawn from a private seeded stream per case and analyte, so it is fixed on first draw: asking
twice gives the same answer, a panel and its member agree, and another env instance draws the same numbers.
Results shift with the case's condition (``Condition.effects``); unrelated analytes come back inside their
reference range with realistic noise; derived analytes follow their source (haematocrit ~ 3 x haemoglobin).
"""

from __future__ import annotations

import functools
import re
import zlib
from dataclasses import dataclass

from rubricgym.core.tools import ToolError
from rubricgym.envs.clinical.case import CaseRecord
from rubricgym.envs.clinical.matching import FindingIndex, NameIndex, concepts, fold
from rubricgym.envs.clinical.schema import SYSTEMS, Exam, KnowledgeBase

NORMAL_EXAM = {
    "general": "Alert and comfortable at rest; well perfused; not pale, jaundiced or cyanosed.",
    "cardiovascular": "Regular pulse; normal heart sounds without murmurs; JVP not raised; no peripheral oedema.",
    "respiratory": "Normal chest expansion; vesicular breath sounds without added sounds; resonant to percussion.",
    "abdominal": "Soft, non-tender abdomen; no masses or organomegaly; normal bowel sounds.",
    "neurological": "Alert and orientated; cranial nerves intact; normal power, tone, reflexes and sensation.",
    "musculoskeletal": "No joint swelling, tenderness or deformity; full range of movement.",
    "skin": "No rash, bruising or lesions.",
    "head and neck": "No lymphadenopathy; normal throat; thyroid not enlarged.",
    "pelvic": "Normal external genitalia; no adnexal or cervical motion tenderness.",
}
SYSTEM_ALIASES = {
    "vital signs": ["vitals", "observations", "obs", "blood pressure", "pulse", "bp", "heart rate", "temperature"],
    "general": ["general appearance", "appearance", "general inspection", "overall"],
    "cardiovascular": ["cardiac", "heart", "cvs", "cardio", "precordium"],
    "respiratory": ["lungs", "chest", "resp", "breathing", "pulmonary"],
    "abdominal": ["abdomen", "abdo", "belly", "stomach", "gastrointestinal"],
    "neurological": ["neuro", "nervous system", "neurology", "cranial nerves", "reflexes"],
    "musculoskeletal": ["msk", "joints", "joint", "limbs", "legs", "back", "spine", "muscles"],
    "skin": ["dermatological", "rash", "skin inspection"],
    "head and neck": ["ent", "throat", "neck", "lymph nodes", "head", "eyes", "thyroid", "mouth"],
    "pelvic": ["gynaecological", "gynecological", "vaginal", "speculum", "pelvis", "genitourinary", "bimanual"],
}
LEVELS = {"high": (0.1, 0.6), "very high": (1.0, 3.0), "low": (-0.45, -0.1), "very low": (-0.9, -0.5)}


_MASK = (1 << 64) - 1


class _Stream:
    """A tiny counter-based stream of uniforms (splitmix64): as reproducible as ``random.Random(seed)`` and
    ~20x cheaper to start, which matters as every analyte of every case gets its own stream."""

    __slots__ = ("state",)

    def __init__(self, seed: int):
        self.state = seed & _MASK

    def random(self) -> float:
        self.state = z = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return ((z ^ (z >> 31)) >> 11) / 9007199254740992.0

    def uniform(self, a: float, b: float) -> float:
        return a + (b - a) * self.random()

    def triangular(self, low: float, high: float, mode: float) -> float:
        u, c = self.random(), (mode - low) / (high - low)
        if u > c:
            u, c, low, high = 1.0 - u, 1.0 - c, high, low
        return low + (high - low) * (u * c) ** 0.5


@dataclass(frozen=True, slots=True)
class Line:
    """One reported value: an analyte with its flag, or a report."""

    exam: str
    text: str
    abnormal: bool


@functools.lru_cache(maxsize=8)
def finding_index(kb: KnowledgeBase) -> FindingIndex:
    return FindingIndex(f for c in kb.conditions.values() for f in c.history)


@functools.lru_cache(maxsize=8)
def exam_index(kb: KnowledgeBase) -> NameIndex:
    return NameIndex((e.id, [e.name, *e.aliases], None) for e in kb.orderable)


EXAM_FILLER = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "for",
        "please",
        "order",
        "check",
        "test",
        "tests",
        "testing",
        "level",
        "levels",
        "serum",
        "plasma",
        "blood",
        "assay",
        "measurement",
        "measure",
        "stat",
        "urgent",
        "repeat",
        "full",
        "complete",
        "with",
        "without",
        "contrast",
        "scan",
        "study",
        "get",
        "do",
        "run",
        "send",
        "request",
        "obtain",
        "perform",
        "arrange",
        "i",
        "we",
        "me",
        "us",
        "would",
        "like",
        "want",
        "need",
        "to",
        "now",
    ]
)
"""Words an order may add around an exam's name ("serum troponin I level, stat") without changing which it is."""


def resolve_exam(kb: KnowledgeBase, text: str) -> str:
    """The catalogue id of the one exam ``text`` names; ``ToolError`` (with the closest names) otherwise.

    A name is matched exactly, or contained with only filler words around it, or through a word-by-word typo;
    anything less certain is refused with the closest catalogue names, so an agent learns the catalogue's names
    instead of getting another exam's result ("CA-125" is not Calcium)."""
    index = exam_index(kb)
    folded = fold(text)
    if not folded:
        raise ToolError("the exam name is empty; order one exam by name, e.g. 'CBC' or 'Chest X-ray'")
    exam_id = index.names.get(folded)
    if exam_id is None:
        found = index.contained(text)
        if len({i for _, _, i in found}) > 1:
            names = ", ".join(dict.fromkeys(index.display[i] for _, _, i in found))
            raise ToolError(f"order one exam per turn; {text!r} names several ({names})")
        exam_id = index.resolve(text, filler=EXAM_FILLER)
    if exam_id is None:
        close = index.suggest(text)
        hint = f" Closest catalogue names: {', '.join(close)}." if close else ""
        raise ToolError(f"{text!r} is not in the exam catalogue.{hint}")
    return exam_id


@functools.lru_cache(maxsize=8)
def condition_index(kb: KnowledgeBase) -> NameIndex:
    return NameIndex((c.id, [c.name, *c.aliases], c.icd10) for c in kb.conditions.values())


@functools.lru_cache(maxsize=8)
def analyte_index(kb: KnowledgeBase) -> NameIndex:
    """Every exam and analyte by name (what a diagnosis's reasoning may cite); names under 3 letters ('k', 'pt')
    are left out, as in prose they are rarely the analyte."""
    return NameIndex(((e.id, [e.name, *e.aliases], None) for e in kb.exams.values()), min_len=3)


_SYSTEM_INDEX = NameIndex((s, [s, *SYSTEM_ALIASES.get(s, [])], None) for s in SYSTEMS)


def resolve_system(text: str) -> str | None:
    return _SYSTEM_INDEX.resolve(text)


def fmt(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}"


def ref_text(exam: Exam, lo: float, hi: float) -> str:
    d = exam.decimals
    return f"< {fmt(hi, d)}" if lo == 0 else f"{fmt(lo, d)}-{fmt(hi, d)}"


class VirtualPatient:
    """One case's patient. ``fixed`` are results the case record gives (analyte id -> number, exam id -> text)."""

    def __init__(self, kb: KnowledgeBase, case: CaseRecord, fixed: dict[str, float | str] | None = None):
        self.kb, self.case = kb, case
        cond = kb.conditions.get(case.condition or "")
        self.effects = dict(cond.effects) if cond else {}
        self.fixed = dict(fixed or {})
        self._values: dict[str, float | str] = {}
        self._key = (case.seed * 0x9E3779B1 + zlib.crc32(case.id.encode())) & _MASK

    # ---- results ----------------------------------------------------------------------------------------

    def value(self, exam_id: str) -> float | str:
        """The case's value of an analyte (a number) or report (text), drawn once."""
        v = self._values.get(exam_id)
        if v is None:
            v = self._values[exam_id] = self._draw(exam_id)
        return v

    def _draw(self, exam_id: str) -> float | str:
        exam = self.kb.exams[exam_id]
        if exam_id in self.fixed:
            return self.fixed[exam_id]
        rng = _Stream(self._key ^ zlib.crc32(exam_id.encode()))
        eff = self.effects.get(exam_id)
        if not exam.is_analyte:
            return eff if isinstance(eff, str) else exam.normal or ""
        lo, hi = exam.ref_for(self.case.profile.sex)
        width = (hi - lo) or max(hi, 1.0)
        if isinstance(eff, tuple | list):
            v = rng.uniform(float(eff[0]), float(eff[1]))
        elif isinstance(eff, str):
            a, b = LEVELS[eff]
            base = hi if a > 0 else lo
            v = max(0.0, base + rng.uniform(a, b) * width)
        elif exam.derived is not None:
            src = self.value(exam.derived[0])
            v = float(src) * exam.derived[1] * (1 + rng.uniform(-0.03, 0.03)) if isinstance(src, float | int) else lo
            if not (isinstance(self.effects.get(exam.derived[0]), tuple | list | str) or exam.derived[0] in self.fixed):
                v = min(max(v, lo), hi)  # a derived value of a normal source stays normal
        else:
            v = lo + width * (0.5 + rng.triangular(-0.4, 0.4, 0.0))
        return round(v, exam.decimals)

    def line(self, exam_id: str) -> Line:
        exam = self.kb.exams[exam_id]
        v = self.value(exam_id)
        if isinstance(v, str):
            return Line(exam_id, f"{exam.name}: {v}", _abnormal_text(v, exam.normal))
        if not self.case.profile.adult:  # the catalogue's ranges are adult ones: no flag on a child's value
            return Line(exam_id, f"{exam.name} {fmt(v, exam.decimals)} {exam.unit} (adult reference range only)", False)
        lo, hi = exam.ref_for(self.case.profile.sex)
        flag = "H" if v > hi else "L" if v < lo else ""
        tag = f"{flag}, " if flag else ""
        text = f"{exam.name} {fmt(v, exam.decimals)} {exam.unit} ({tag}ref {ref_text(exam, lo, hi)})"
        return Line(exam_id, text, bool(flag))

    def report(self, exam_id: str) -> list[Line]:
        """The lines an exam reports: a panel expands into its analytes (a text result given for a panel stays)."""
        exam = self.kb.exams[exam_id]
        given = self.case.examination.get("vital signs")
        if exam_id == "vitals" and given and "vitals" not in self.fixed:  # the case's own vital signs, as given
            return [Line(exam_id, f"{exam.name}: {given}", False)]
        if exam.members and not isinstance(self.fixed.get(exam_id), str):
            return [self.line(a) for a in self.kb.analytes_of(exam_id)]
        if exam.members:
            return [Line(exam_id, f"{exam.name}: {self.fixed[exam_id]}", True)]
        return [self.line(exam_id)]

    # ---- history and examination -----------------------------------------------------------------------

    def answer(self, question: str) -> tuple[str, list[str]]:
        """The patient's answer and the findings it matched (present or absent)."""
        case, index = self.case, finding_index(self.kb)
        hist = case.history
        present = [f for f, v in hist.items() if v is not False]
        local = FindingIndex(hist) if hist and not all(f in index.sets for f in hist) else index
        hits = local.best(question, present)
        if hits:
            top = hits[0][0]
            chosen = [f for s, f in hits if s >= top - 0.15][:3]
            return " ".join(_say(f, hist[f]) for f in chosen), chosen
        topic = _topic(question)
        if topic:
            return self._topic_answer(topic), []
        denied = [f for f, v in hist.items() if v is False]  # the case's own negatives come first on a tie
        absent = local.best(question, denied + [f for f in index.phrases if f not in hist])
        if absent:
            return f"No, I haven't had {absent[0][1]}.", [absent[0][1]]
        return (
            f"I'm not sure what you mean, doctor. I came in because of {case.complaint}. "
            "Could you ask me about a particular symptom?"
        ), []

    def _topic_answer(self, topic: str) -> str:
        p = self.case.profile
        if topic == "pmh":
            return "I have " + ", ".join(p.history) + "." if p.history else "I've generally been healthy."
        if topic == "meds":
            meds = "; ".join(p.medications)
            return f"I take {meds}." if meds else "I don't take any regular medicines."
        if topic == "allergies":
            return p.allergies
        if topic == "social":
            return p.social or "Nothing much to say: I live at home."
        if topic == "family":
            return "Nothing runs in the family that I know of."
        present = [f for f, v in self.case.history.items() if v is not False]
        first = _say(present[0], self.case.history[present[0]]) if present else ""
        return f"I came in because of {self.case.complaint}. {first}".strip()

    def examine(self, system: str) -> str:
        """A system's findings (the case's own text, else normal), or a section the case names itself."""
        if system in self.case.examination:
            return self.case.examination[system]
        if system == "vital signs":
            return "; ".join(ln.text for ln in self.report("vitals"))
        return NORMAL_EXAM[system]

    def section(self, text: str) -> str | None:
        """The case's own examination section that ``text`` names ("fundoscopy", "Neurological_Examination")."""
        wanted = fold(text)
        names = {fold(k): k for k in self.case.examination}
        if wanted in names:
            return names[wanted]
        hits = [k for f, k in names.items() if f" {wanted} " in f" {f} " or f" {f} " in f" {wanted} "]
        return hits[0] if len(hits) == 1 else None


_ABNORMAL_WORDS = re.compile(
    r"\b(elevated|raised|high|low|decreased|reduced|abnormal|positive|detected|increased|present|deficien\w*)\b", re.I
)
_NORMAL_WORDS = re.compile(r"\b(normal|negative|not detected|unremarkable|within (the )?normal)\b", re.I)


def _abnormal_text(value: str, normal: str | None) -> bool:
    """Whether a result given as text is abnormal: it differs from the catalogue's normal report and reads so
    ("Elevated", "positive"), or differs and says nothing of being normal."""
    if value.strip() == (normal or "").strip():
        return False
    if _ABNORMAL_WORDS.search(value):
        return not _NORMAL_WORDS.search(value) or bool(re.search(r"\b(elevated|raised|positive)\b", value, re.I))
    return normal is not None and not _NORMAL_WORDS.search(value)


def _say(finding: str, value: str | bool) -> str:
    if isinstance(value, str):
        return value
    return f"Yes: {finding}."


_TOPICS = {
    "pmh": (
        "medical history",
        "past history",
        "health problems",
        "conditions",
        "illnesses",
        "diagnosed with",
        "past medical",
        "pmh",
        "operations",
        "surgery",
    ),
    "meds": ("medication", "medicines", "medicine", "tablets", "pills", "drugs do you take", "prescribed"),
    "allergies": ("allerg",),
    "social": ("smoke", "smoking", "alcohol", "drink", "work", "job", "live", "social"),
    "family": ("family", "parents", "relatives"),
    "open": (
        "what brings",
        "what happened",
        "symptoms",
        "tell me",
        "describe",
        "how can i help",
        "what's wrong",
        "complaint",
        "problem today",
        "what is wrong",
    ),
}


def _topic(question: str) -> str | None:
    q = fold(question)
    for topic, keys in _TOPICS.items():
        if any(k in q for k in keys):
            return topic
    return "open" if not concepts(question) else None
