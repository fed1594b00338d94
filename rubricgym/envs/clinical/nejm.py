"""Import NEJM-layout case collections (image-challenge cases: agent-clinic's NEJM and NEJM-extended files) into the
case format of ``cases.py``.

The layout: one object per case with ``question`` (the vignette and its question), ``image_url`` (often empty),
``answers`` (``{text, correct}`` options, exactly one correct: the diagnosis), ``patient_info`` (what the patient
knows, one paragraph, often written to a patient actor in the second person with bullets) and ``physical_exams``
(examination and test results, one paragraph); the extended collection adds ``type`` (the case's modalities).

There are no separate exam or test fields, so the text is split: the patient's paragraph becomes history answers
in the first person (role instructions such as "you are not aware of the results" are dropped), the results
paragraph becomes named results ("CT scan of the neck: ...", "D-dimer 2.1 mg/L", "Compression ultrasonography
shows ...") and examination sections (vital signs, "On examination ..."), and the question gives only the
presenting complaint and its examination sentences. The question's other text and the wrong options never reach
the agent: the options become the case's hidden differential. Catalogue handling (exam names, units, overlay
exams, knowledge-base conditions) is the OSCE importer's.
"""

from __future__ import annotations

import re
from typing import Any

from rubricgym.envs.clinical.matching import concepts, fold
from rubricgym.envs.clinical.osce import (
    CaseReport,
    OsceImporter,
    diagnosis_mentions,
    parse_demographics,
)
from rubricgym.envs.clinical.patient import SYSTEMS, condition_index, exam_index, resolve_system

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")
_PIECE = re.compile(r"\s+[-•]\s+|\s*\n+\s*|(?:^|\s)\d{1,2}[.)]\s+(?=[A-Z*])")
_LABEL = re.compile(r"^([A-Za-z][^:]{0,80}?):\s*(.*)$", re.S)
_FIGURE = re.compile(
    r"\s*\((?:left|right|middle|top|bottom|center|centre|arrows?|arrowheads?|asterisks?|box|inset|panel [a-z])"
    r"(?:[,;][^)]*)?\)",
    re.I,
)
_PREAMBLE = re.compile(
    r"^[^.:]{0,200}?\b(?:information|extracted|case report|relevant)\b[^:]{0,120}:\s*|"
    r"^[^.:]{0,120}\b(?:here(?:'s| is)|need to (?:know|convey))\b[^.:]*:\s*",
    re.I,
)
_ROLE = re.compile(
    r"^(?:(?:for|in) your role as (?:an?|the) patient(?: actor)?|as (?:an?|the) patient(?: actor)?)[^,:]*[,:]\s*", re.I
)
_INSTRUCTION = re.compile(
    r"\b(?:remember|not aware of|aren't aware|don't know|do not know|haven't been told|have not been told|your "
    r"character|haven't seen any|but might influence|knowledge is limited|do not reveal|don't reveal|"
    r"convey (?:your|the) symptoms|not know the)\b",
    re.I,
)
_PURE_DEMOGRAPHICS = re.compile(r"^(?:i am|i'm)\s+an?\s+[\w\s-]*?\d+[- ]\w+[- ]old\s+[\w-]+\.?$", re.I)
_SOCIAL = re.compile(r"\b(?:smok\w*|alcohol|drinks?|drinking|occupation|works? as|retired|lives? with|emigrat\w*)\b")
_PRESENTED = re.compile(
    r"\b(?:presented|presents|came|comes|was (?:seen|evaluated|referred|brought|admitted)|is (?:seen|evaluated|"
    r"referred|brought))\b.*?\bwith\s+(.+)$",
    re.I,
)
_HAS_HAD = re.compile(r"\b(?:has|had) had\s+(.+)$|\b(?:reports?|reported|complains? of|complained of)\s+(.+)$", re.I)
_EXAM_LEAD = re.compile(
    r"^(?:on|at) (?:physical )?examination,?\s*|^(?:the )?physical examination (?:showed|"
    r"revealed|was notable for)\s*|^examination (?:showed|revealed)\s*",
    re.I,
)
_EXAM_LABEL = re.compile(
    r"^(?:on )?(?:physical )?exam(?:ination)?\b|^vital signs?\b|^vitals\b|^general appearance|^inspection|"
    r"^palpation|^auscultation|^on examination",
    re.I,
)
_VITALS = re.compile(
    r"\b(?:temperature|pulse|heart rate|blood pressure|respiratory rate|oxygen saturation|spo2|sats|bp)\b", re.I
)
_SHOWED = re.compile(
    r"^(?P<test>.{3,90}?)\s+(?:showed|shows|revealed|reveals|demonstrated|demonstrates|was notable for|were notable "
    r"for|identified|detected|confirmed|was (?:positive|negative|normal)|were (?:positive|negative|normal))\b",
    re.I,
)
_TEST_WORD = re.compile(
    r"\b(?:ultrasound|ultrasonography|sonography|ct|mri|radiograph\w*|x-ray|xray|biopsy|culture\w*|tests?|"
    r"testing|assay|scan|echo\w*|ecg|ekg|electrocardiogra\w*|levels?|count|smear|stain\w*|analysis|aspirate|"
    r"\w*scopy|serolog\w*|pcr|antibod\w*|electrophoresis|catheteri[sz]ation|angiogra\w*|microscopy|studies|"
    r"panel|imaging|tomography|histolog\w*|patholog\w*|immunohisto\w*|cytology|lavage|puncture|titer|titre)\b",
    re.I,
)
_LAB_HEADER = re.compile(
    r"\b(?:laborator\w*|lab|labs|blood|imaging|biopsy|tests?|serolog\w*|cultures?|studies|results?)\b", re.I
)
_ANALYTE = re.compile(
    r"^(?P<name>[A-Za-z][A-Za-z0-9\-/ ]{1,40}?)\s*(?:level|count|of|was|is|:)?\s*(?P<value>[<>≤≥]?\s*\d.*)$"
)
_HEADER = re.compile(
    r"\s+(?=(?:[A-Z][\w-]*\s+)(?:[\w-]+\s+){0,3}(?:results?|findings|studies|testing|tests|examination)\s*:)"
)
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"})
_LABEL_TAIL = re.compile(r"\s*\b(?:findings?|results?|report|levels?|testing|studies|values?|readings?)\s*$", re.I)
_BODY_SYSTEMS = (
    (
        re.compile(
            r"\b(?:skin|rash|lesions?|papules?|plaques?|macules?|nodules?|erythema\w*|telangiectas\w*|ulcer\w*)\b", re.I
        ),
        "skin",
    ),
    (re.compile(r"\b(?:lungs?|breath sounds|crackles|wheez\w*|rales|chest wall|respirat\w*)\b", re.I), "respiratory"),
    (re.compile(r"\b(?:heart|murmur\w*|jugular|venous pressure|gallop|rub)\b", re.I), "cardiovascular"),
    (re.compile(r"\b(?:abdomen|abdominal|liver|spleen|hepato\w*|spleno\w*|bowel sounds)\b", re.I), "abdominal"),
    (
        re.compile(r"\b(?:neurolog\w*|reflex\w*|cranial|sensation|sensory|weakness|gait|ataxi\w*|neuropathy)\b", re.I),
        "neurological",
    ),
    (
        re.compile(r"\b(?:joints?|calf|calves|legs?|ankles?|knees?|muscles?|oedema|edema|contractures?|spine)\b", re.I),
        "musculoskeletal",
    ),
    (
        re.compile(r"\b(?:neck|throat|tonsils?|ears?|eyes?|lymphadenopathy|lymph nodes?|thyroid|mouth|tongue)\b", re.I),
        "head and neck",
    ),
    (re.compile(r"\b(?:pelvic|vaginal|cervix|adnexa\w*|uterus|rectal)\b", re.I), "pelvic"),
)
_PRONOUNS = (
    (r"\byou're\b", "I'm"),
    (r"\byou've\b", "I've"),
    (r"\byou'll\b", "I'll"),
    (r"\byou'd\b", "I'd"),
    (r"\byou are\b", "I am"),
    (r"\byou were\b", "I was"),
    (r"\byourself\b", "myself"),
    (r"\byours\b", "mine"),
    (r"\byour\b", "my"),
    (
        r"\b(to|at|with|for|told|asked|gave|give|tell|by|from|on|of|about|examined|examining|see|saw|noted|"
        r"showed|show)\s+you\b",
        r"\1 me",
    ),
    (r"\byou\b", "I"),
)


def first_person(text: str) -> str:
    """What a patient actor is told ("You have had a dry cough") as the patient says it ("I have had a dry
    cough")."""
    for pattern, repl in _PRONOUNS:
        text = re.sub(pattern, _Swap(repl), text, flags=re.I)
    return re.sub(r"\bi\b", "I", text)


class _Swap:
    """A ``re.sub`` replacement that keeps the capital of what it replaces ("You" -> "I", "your" -> "my")."""

    def __init__(self, repl: str):
        self.repl = repl

    def __call__(self, m: re.Match[str]) -> str:
        out = m.expand(self.repl)
        return out[:1].upper() + out[1:] if m.group(0)[:1].isupper() else out


def _clean(text: str) -> str:
    text = text.translate(_QUOTES).replace("**", "").replace("\u00a0", " ")
    return _FIGURE.sub("", re.sub(r"[ \t]+", " ", text)).strip()


def _pieces(text: str) -> list[str]:
    """The bullets, numbered items and lines of a free-text paragraph (empty ones and bare numbers dropped)."""
    return [p.strip(" -;") for p in _PIECE.split(text) if p and len(re.findall(r"[A-Za-z]", p)) >= 2]


def _words(text: str) -> list[str]:
    """The words of a sentence, lower-cased, as a history topic ("i've had fevers at night")."""
    return re.findall(r"[a-z0-9][a-z0-9'-]*", text.lower())


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def _body_system(text: str) -> str:
    """The examination system a finding sentence is about (``general`` when it names none)."""
    return next((system for pattern, system in _BODY_SYSTEMS if pattern.search(text)), "general")


def _test_name(label: str) -> str:
    """A results label as an exam name: "Skin biopsy results" -> "Skin biopsy", "Tests for cryptococcus" ->
    "Cryptococcus test"."""
    name = _LABEL_TAIL.sub("", label).strip(" .,")
    m = re.match(r"^(?:tests?|testing|screening)\s+for\s+(.+)$", name, re.I)
    if m:
        name = f"{m.group(1)} test"
    name = re.sub(r"^(?:a|an|the|subsequent|repeat|further)\s+", "", name, flags=re.I)
    return name[:1].upper() + name[1:] if name else label


def _shape_problem(record: dict[str, Any]) -> str | None:
    """Why a NEJM record's fields have the wrong types, or ``None``."""
    answers = record.get("answers")
    if not isinstance(answers, list) or not answers:
        return "answers must be a list of {text, correct} options (the correct one is the diagnosis)"
    for n, a in enumerate(answers):
        if not isinstance(a, dict) or not isinstance(a.get("text"), str):
            return f"answers[{n}] must be an object with text and correct, got {str(a)[:40]!r}"
    for key in ("question", "patient_info"):
        if record.get(key) not in (None, "") and not isinstance(record.get(key), str):
            return f"{key} must be text, got {type(record[key]).__name__}"
    if record.get("physical_exams") not in (None, "") and not isinstance(record["physical_exams"], str | dict):
        kind = type(record["physical_exams"]).__name__
        return f"physical_exams must be text (or an object of named findings), got {kind}"
    return None


def _correct(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "yes", "1")) or value == 1


class NejmImporter(OsceImporter):
    """Converts NEJM records against one knowledge base (exam names, units and overlay exams as the OSCE importer
    handles them)."""

    overlay_prefix = "nejm_"

    def case(self, index: int, record: Any) -> tuple[dict[str, Any] | None, CaseReport]:
        report = CaseReport(index, f"nejm-{index:04d}")
        if isinstance(record, Exception):
            report.error = str(record)
            return None, report
        if not isinstance(record, dict):
            report.error = "not a NEJM record (an object with question, answers, patient_info, physical_exams)"
            return None, report
        problem = _shape_problem(record)
        if problem is not None:
            report.error = problem
            return None, report
        right = [str(a["text"]).strip() for a in record["answers"] if _correct(a.get("correct"))]
        if len(right) != 1:
            report.error = (
                f'answers has {len(right)} options marked correct; exactly one (the diagnosis) must be "correct": true'
            )
            return None, report
        dx = right[0].rstrip(".")
        if not re.search(r"[^\W\d_]", dx):
            report.error = f"the correct answer {dx!r} names no condition (give the diagnosis' name)"
            return None, report
        wrong = [str(a["text"]).strip() for a in record["answers"] if not _correct(a.get("correct"))]
        question = _clean(str(record.get("question") or ""))
        info = _clean(str(record.get("patient_info") or ""))
        q_sentences = _sentences(question)
        age, unit, sex = self._demographics(q_sentences, info)
        if age is None:
            report.error = "neither question nor patient_info gives the patient's age (e.g. 'A 45-year-old man')"
            return None, report
        report.mapped.append(f"question/patient_info -> age {age} {unit}, sex {sex}")
        history, social = self._patient_history(info, report)
        self._gestation(q_sentences[0] if q_sentences else info, age, unit, history, report)
        complaint = self._complaint(q_sentences, history, report)
        examination: dict[str, str] = {}
        results: dict[str, Any] = {}
        self._findings(record.get("physical_exams"), examination, results, report)
        for s in q_sentences:
            if _EXAM_LEAD.match(s):
                text = _EXAM_LEAD.sub("", s).strip()
                text = text[:1].upper() + text[1:]
                system = _body_system(text)
                if text not in examination.get(system, ""):
                    examination[system] = f"{examination[system]} {text}" if system in examination else text
                    report.mapped.append(f"question: examination sentence -> examination {system!r}")
        profile: dict[str, Any] = {"age": age, "sex": sex, "age_unit": unit}
        if social:
            profile["social"] = " ".join(social)
        case: dict[str, Any] = {
            "id": report.case_id,
            "profile": profile,
            "complaint": complaint,
            "history": history,
            "examination": examination,
            "results": results,
            "diagnosis": {"name": dx},
            "differential": wrong,
            "source": "nejm",
        }
        self._diagnosis(case, report)
        known = set(case.get("differential", [])) | {case.get("condition")}
        names = condition_index(self.kb).names
        others = [w for w in wrong if names.get(fold(w)) not in known]  # not twice, by name and by id
        case["differential"] = list(dict.fromkeys([*case.get("differential", []), *others]))
        report.mapped.append(f"answers: {len(wrong)} other option(s) -> differential (hidden, never shown)")
        report.leaks, report.disclosed = diagnosis_mentions(self.kb, case)
        if record.get("image_url"):
            report.dropped.append("image_url: the image is not imported (the text describes what it shows)")
        report.dropped.append("question: only its presenting complaint and examination sentences are kept")
        for key in sorted(set(record) - {"question", "image_url", "answers", "patient_info", "physical_exams"}):
            report.dropped.append(f"{key}: not part of the case format")
        return case, report

    @staticmethod
    def _demographics(q_sentences: list[str], info: str) -> tuple[int | None, str, str]:
        """Age and sex from the question's first sentence ("A 9-year-old boy ..."), else the patient's text."""
        for text in (q_sentences[0] if q_sentences else "", *_sentences(info)):
            age, unit, sex = parse_demographics(text)
            if age is not None and re.search(r"\d", text):
                return age, unit, sex
        return None, "years", "U"

    def _patient_history(self, info: str, report: CaseReport) -> tuple[dict[str, str], list[str]]:
        """The patient's paragraph as history answers (first person), role instructions dropped; smoking, alcohol
        and work go to the social history."""
        text = _PREAMBLE.sub("", _ROLE.sub("", info), count=1)
        history: dict[str, str] = {}
        social: list[str] = []
        header = ""
        dropped = 0
        for piece in _pieces(text):
            m = _LABEL.match(piece)
            label, body = (m.group(1).strip(), m.group(2).strip()) if m else ("", piece)
            if m and not body:
                header = label
                continue
            for sentence in _sentences(body):
                said = first_person(_ROLE.sub("", sentence)).strip()
                if not said or _INSTRUCTION.search(sentence):
                    dropped += 1
                    continue
                if _PURE_DEMOGRAPHICS.match(said):
                    continue
                said = said[:1].upper() + said[1:]
                if _SOCIAL.search(said.lower()) and not label:
                    social.append(said)
                    continue
                key = (label or header).lower() if (label or header) and len(concepts(said)) < 2 else ""
                key = key or " ".join(_words(said)[:12])
                if label and label.lower() not in key:
                    key = f"{label.lower()}: {key}"
                while key in history:
                    key += " (more)"
                history[key] = said
        report.mapped.append(
            f"patient_info -> {len(history)} history answer(s), social history {'yes' if social else 'no'}"
        )
        if dropped:
            report.dropped.append(f"patient_info: {dropped} role instruction(s) to the patient actor")
        return history, social

    @staticmethod
    def _complaint(q_sentences: list[str], history: dict[str, str], report: CaseReport) -> str:
        """The presenting complaint from the question's first sentence ("... presented with X"), else the
        patient's first answer."""
        first = q_sentences[0].rstrip(".?") if q_sentences else ""
        m = _PRESENTED.search(first) or _HAS_HAD.search(first)
        if m:
            complaint = next(g for g in m.groups() if g)
            complaint = re.split(r"\.\s", complaint)[0].strip().rstrip(".")
            if len(complaint) > 200:
                complaint = complaint[:200].rsplit(" ", 1)[0]
            report.mapped.append("question: first sentence -> complaint")
            return complaint[:1].lower() + complaint[1:]
        if history:
            answer = next(iter(history.values())).rstrip(".")
            report.renamed.append("patient_info: first answer -> complaint (the question says no 'presented with')")
            return answer[:1].lower() + answer[1:]
        return "feeling unwell"

    def _findings(self, value: Any, examination: dict[str, str], results: dict[str, Any], report: CaseReport) -> None:
        """Split the examination-and-results paragraph into examination sections and named results."""
        if isinstance(value, dict):  # named findings: examination sections by name, the rest results
            for key, v in value.items():
                name = key.replace("_", " ")
                if _EXAM_LABEL.match(name) or resolve_system(name) in SYSTEMS:
                    self._examine(
                        examination, resolve_system(name) or fold(name), str(v), report, f"physical_exams.{key}"
                    )
                else:
                    results.update(self.results({key: v}, report, "physical_exams"))
            return
        text = _PREAMBLE.sub("", _clean(str(value or "")), count=1)
        text = _HEADER.sub("\n", text)  # "... no scale. Laboratory testing results: - ...": a header starts a line
        header = ""
        for piece in _pieces(text):
            label, body = "", list[str]()
            for sentence in _sentences(piece):
                m = _LABEL.match(sentence)
                if m and len(m.group(1).split()) <= 8:  # a new "Name: text" item
                    if label:
                        self._labelled(label, " ".join(body), examination, results, report)
                    label, body = m.group(1).strip(), [m.group(2).strip()] if m.group(2).strip() else []
                    if not body:
                        header, label = label, ""
                elif label and not re.match(r"^vital", label, re.I):  # more of the same report
                    body.append(sentence)
                else:
                    if label:
                        self._labelled(label, " ".join(body), examination, results, report)
                        label, body = "", []
                    self._sentence(sentence, header, examination, results, report)
            if label:
                self._labelled(label, " ".join(body), examination, results, report)

    def _labelled(
        self, label: str, text: str, examination: dict[str, str], results: dict[str, Any], report: CaseReport
    ) -> None:
        where = f"physical_exams {label!r}"
        if _VITALS.search(label) and not _TEST_WORD.search(label):  # "Blood pressure: 128/84 mmHg"
            self._examine(examination, "vital signs", f"{label}: {text}", report, where)
            return
        if _EXAM_LABEL.match(label):
            system = "vital signs" if re.match(r"^vital", label, re.I) else _body_system(text)
            self._examine(examination, system, text, report, where)
            return
        named = resolve_system(label)
        if named in SYSTEMS and not _TEST_WORD.search(label):  # "Cardiovascular examination: ..."
            self._examine(examination, named, text, report, where)
            return
        self._result(_test_name(label), text, results, report, where)

    def _sentence(
        self, sentence: str, header: str, examination: dict[str, str], results: dict[str, Any], report: CaseReport
    ) -> None:
        where = f"physical_exams sentence {sentence[:40]!r}"
        if len(_VITALS.findall(sentence)) >= 2:
            self._examine(examination, "vital signs", sentence, report, where)
            return
        m = _SHOWED.match(sentence)
        if m and _TEST_WORD.search(m.group("test")):
            self._result(_test_name(m.group("test")), sentence, results, report, where)
            return
        parts = [p.strip() for p in re.split(r",\s+|;\s+|\s+and\s+", sentence.rstrip(".")) if p.strip()]
        analytes = [(a, p) for p in parts if (a := _ANALYTE.match(p)) and self.exam(a.group("name")) is not None]
        if analytes and len(analytes) == len(parts):
            for a, _ in analytes:
                self._result(a.group("name").strip(), a.group("value").strip(), results, report, where)
            return
        named = [(i, j, e) for i, j, e in exam_index(self.kb).contained(sentence) if i == 0]
        if named and _TEST_WORD.search(sentence) or named and header and _LAB_HEADER.search(header):
            self._result(self.kb.exams[named[0][2]].name, sentence, results, report, where)  # "Full blood count normal"
            return
        if header and _LAB_HEADER.search(header):  # "Laboratory testing results: - Peripheral eosinophilia present"
            self._result(_test_name(header), sentence, results, report, where, join=True)
            return
        self._examine(examination, _body_system(sentence), sentence, report, where)

    def _examine(self, examination: dict[str, str], system: str, text: str, report: CaseReport, where: str) -> None:
        text = text.strip()
        examination[system] = f"{examination[system]} {text}" if system in examination else text
        report.mapped.append(f"{where} -> examination {system!r}")

    def _result(
        self, name: str, text: str, results: dict[str, Any], report: CaseReport, where: str, join: bool = False
    ) -> None:
        """One named result: a catalogue exam (numbers in its unit where they convert), else an overlay exam;
        ``join`` adds to a result of that name already given (the lines under one header)."""
        found = self.exam(name)
        if found is None:
            found = self._overlay_exam(name, text, report)
            value: Any = text
        else:
            exam = self.kb.exams[found]
            value = text if exam.members or not exam.is_analyte else self._value(found, text, where, report)
            report.mapped.append(f"{where} -> {exam.name}")
        if join and isinstance(results.get(found), str):
            results[found] = f"{results[found]}; {value}"
        elif found in results and isinstance(results[found], str) and isinstance(value, str):
            results[found] = f"{results[found]} {value}"
        else:
            results[found] = value
