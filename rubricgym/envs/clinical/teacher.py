"""The clinical ``teacher``: an honest physician whose episodes are fit to clone (warm start, issue #38).

Unlike the ``oracle`` (``agents.py``), which plays from the case's hidden record, the teacher acts only on what the
policy sees: the task prompt (age, sex, presenting complaint, turn budget) and the patient's, examination's and
laboratory's replies so far. It reasons over the public knowledge base (conditions with their history likelihoods,
examination findings and exam effects) the way a physician reasons over textbook knowledge:

1. the candidates are the conditions that present with the complaint, weighed by their prior for the patient;
2. it asks the history questions that best tell the candidates apart (and that a likely diagnosis makes likely),
   examines the system where they differ most, then orders the key exams of its working diagnosis (and of its
   closest rival while the two are not yet told apart), each with the impression and a reason;
3. every reply updates a naive-Bayes posterior (a finding present or denied, an examination text, a flagged or
   in-range value, a report's text against what each candidate predicts); it commits to the leading candidate
   with the abnormal results it saw and the candidate's can't-miss conditions as the differential.

Its path varies with its seed (how many questions, which of the near-best questions first, their wording, the
order of the exams, whether it checks the vital signs) so a clone learns a way of working, not one script. It
reads everything it knows from ``messages`` on every turn: no state survives between turns but the seed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from rubricgym.core.agent import SeededAgent, tool_call
from rubricgym.core.parsing import parse_tool_call
from rubricgym.core.types import Message, Task, ToolSpec
from rubricgym.envs.clinical.diagnosis import MAX_CONSIDERED, cited_exams
from rubricgym.envs.clinical.matching import concepts, fold
from rubricgym.envs.clinical.overlay import kb_with_overlay
from rubricgym.envs.clinical.patient import NORMAL_EXAM, condition_index, resolve_exam
from rubricgym.envs.clinical.schema import AGE_BANDS, SYSTEMS, Condition, KnowledgeBase

_PROMPT = re.compile(
    r"(\d+)-(year|month|day)-old (\w+) presents with (.+?)\. You have at most (\d+) turns", re.IGNORECASE
)
_YES = re.compile(r"Yes: (.+?)\.(?=\s|\"|$)")
_NO = re.compile(r"No, I haven't had (.+?)\.(?=\s|\"|$)")
_RESULT = "Here is the result: "
_ALREADY = re.compile(r"^Already resulted at turn \d+\. ")
_EXAMINATION = re.compile(r"^Examination \((.+?)\): (.*)$", re.DOTALL)
_VALUE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\b(.*)$")
_FLAG = re.compile(r"\((H|L), ref ")
UNLIKELY = math.log(0.03)
"""Log-likelihood of an observation a candidate does not predict (an abnormal value it leaves normal, another
examination text): small, not zero, so one surprising reply never rules a candidate out for good."""
MAX_CHARS = 220
"""The longest action the teacher writes (about 60 SmolLM2 tokens after the demo's response prefix, under its
64-token turns), so a clone of it is never cut off mid-call."""
SHORT_NAME = 14
"""A name up to this long is used as is; a longer one gives way to a short alias where the call would not fit."""
CONFIDENT = 0.9
"""Posterior of the leading candidate at which the teacher commits once its key exams are done."""
QUESTIONS = (
    "Have you had {f}?",
    "Have you noticed any {f}?",
    "Any {f} lately?",
    "Have you been having {f}?",
)
"""Wordings of a history question; every word around ``{f}`` is a stop word of the patient's matcher, so each
asks about the finding and nothing else."""
_SUBJECTS = [re.compile("^" + re.escape(q).replace(re.escape("{f}"), "(.+)") + "$") for q in QUESTIONS]
"""Each wording as a pattern that reads the finding back out of a question the teacher asked."""
OPEN_QUESTIONS = ("What brings you in today?", "What happened, in your own words?")
ORDER_REASONS = (
    "{why}; {exam} would confirm {dx}",
    "to confirm {dx}: {why}",
    "{why}, so {exam} to test for {dx}",
)
RIVAL_REASONS = (
    "to tell {dx} from {rival}",
    "{exam} separates {dx} from {rival}",
)


@dataclass
class Seen:
    """What the episode has shown so far, read back from the messages (the teacher's whole memory)."""

    age: float = 50.0
    sex: str = "U"
    complaint: str = ""
    turns: int = 12
    turn: int = 0
    """Assistant turns taken."""
    present: list[str] = field(default_factory=list)
    absent: set[str] = field(default_factory=set)
    asked: list[str] = field(default_factory=list)
    """Findings asked about (the question's subject), in order."""
    open_asked: bool = False
    examined: dict[str, str] = field(default_factory=dict)
    """System -> the examination text shown."""
    values: dict[str, tuple[float, str]] = field(default_factory=dict)
    """Analyte id -> (value, flag ``H``/``L``/``""``)."""
    texts: dict[str, str] = field(default_factory=dict)
    """Report exam id -> the text shown."""
    ordered: list[str] = field(default_factory=list)
    """Exam ids ordered (or tried), in order."""
    resulted: set[str] = field(default_factory=set)
    """Exam and analyte ids an order reported (what the diagnosis's reasoning may cite)."""
    abnormal: list[str] = field(default_factory=list)
    """Exam or analyte ids whose ordered result was abnormal, in the order seen."""


class Teacher(SeededAgent):
    """An honest clinical teacher (see the module docstring): it never receives the task, only the chat.

    ``kb``/``kb_overlay``: the knowledge base it reasons with (default: the bundled one), as the env's knobs of the
    same names; the env's catalogue is public, the case's record is not.
    """

    name = "teacher"

    def __init__(self, seed: int | None = None, kb: str | None = None, kb_overlay: str | None = None):
        super().__init__(seed)
        self.kb_path, self.overlay_path = kb, kb_overlay
        self.kb: KnowledgeBase = kb_with_overlay(kb, kb_overlay)
        self._names = sorted(((e.name, e.id) for e in self.kb.exams.values()), key=lambda p: len(p[0]), reverse=True)

    def episode(self, task: Task, seed: int | None) -> Teacher:
        """A fresh teacher for one episode; ``task`` is dropped unread (its ``hidden`` is the answer)."""
        return Teacher(seed if seed is not None else self.seed, self.kb_path, self.overlay_path)

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        seen = self.read(messages)
        return self.decide(seen)

    # ---- reading the chat -------------------------------------------------------------------------------

    def read(self, messages: list[Message]) -> Seen:
        """Everything the chat has shown: the prompt's patient and budget, then each action with its reply."""
        seen = Seen()
        prompt = next((m.content or "" for m in messages if m.role == "user"), "")
        if m := _PROMPT.search(prompt):
            n, unit, who = int(m.group(1)), m.group(2).lower(), m.group(3).lower()
            seen.age = n / {"year": 1, "month": 12, "day": 365}[unit]
            seen.sex = "M" if who in ("man", "boy") else "F" if who in ("woman", "girl") else "U"
            seen.complaint, seen.turns = m.group(4), int(m.group(5))
        first = next((i for i, m in enumerate(messages) if m.role == "user"), len(messages))
        for i, msg in enumerate(messages[first + 1 :], start=first + 1):
            if msg.role != "assistant":
                continue
            seen.turn += 1
            reply = next((m.content or "" for m in messages[i + 1 :] if m.role in ("user", "tool")), "")
            call = parse_tool_call(msg.content or "")
            if isinstance(call, str):
                continue
            args = call.arguments
            if call.name == "ask":
                self._read_answer(seen, str(args.get("question", "")), reply)
            elif call.name == "examine":
                if m := _EXAMINATION.match(reply.strip()):
                    seen.examined[m.group(1)] = m.group(2).strip()
                    if m.group(1) == "vital signs":
                        self._read_lines(seen, m.group(2).split("; "), ordered=False)
                else:
                    seen.examined[str(args.get("system", ""))] = ""
            elif call.name == "order":
                exam = self._exam_id(str(args.get("exam", "")))
                if exam is not None and exam not in seen.ordered:
                    seen.ordered.append(exam)
                if reply.startswith(_RESULT):
                    body = _ALREADY.sub("", reply[len(_RESULT) :])
                    if exam is not None:
                        seen.resulted.update([exam, *self.kb.analytes_of(exam)])
                    self._read_lines(seen, body.splitlines(), ordered=True, panel=exam)
        return seen

    def _read_answer(self, seen: Seen, question: str, reply: str) -> None:
        subject = next((m.group(1) for q in _SUBJECTS if (m := q.match(question.strip()))), None)
        yes = [f.strip() for f in _YES.findall(reply)]
        no = [f.strip() for f in _NO.findall(reply)]
        seen.present += [f for f in yes if f not in seen.present]
        seen.absent |= set(no)
        if subject is None:
            seen.open_asked = True
            return
        seen.asked.append(subject)
        if (yes or no) and subject not in yes:  # the patient names every present finding the question matches
            seen.absent.add(subject)

    def _read_lines(self, seen: Seen, lines: list[str], ordered: bool, panel: str | None = None) -> None:
        for raw in lines:
            line = raw.strip()
            hit = next(((n, i) for n, i in self._names if line.startswith(n)), None)
            if hit is None:
                continue
            name, exam_id = hit
            rest = line[len(name) :]
            exam = self.kb.exams[exam_id]
            if exam.is_analyte and (v := _VALUE.match(rest)):
                flag = f.group(1) if (f := _FLAG.search(rest)) else ""
                if not flag and "adult reference range only" in rest and exam.ref is not None:
                    lo, hi = exam.ref_for(seen.sex if seen.sex in "MF" else "M")
                    value = float(v.group(1))
                    flag = "H" if value > hi else "L" if value < lo else ""
                seen.values[exam_id] = (float(v.group(1)), flag)
                if ordered and flag and exam_id not in seen.abnormal:
                    seen.abnormal.append(exam_id)
            elif rest.startswith(": "):
                text = rest[2:].strip()
                seen.texts[exam_id] = text
                if ordered and text != (exam.normal or "").strip() and exam_id not in seen.abnormal:
                    seen.abnormal.append(exam_id)
        if ordered and panel is not None and panel not in seen.abnormal:
            members = set(self.kb.analytes_of(panel)) - {panel}
            if members & set(seen.abnormal):
                seen.abnormal.append(panel)

    def _exam_id(self, text: str) -> str | None:
        try:
            return resolve_exam(self.kb, text)
        except Exception:  # noqa: BLE001 - a name the catalogue refuses is an order that never ran
            return None

    # ---- reasoning --------------------------------------------------------------------------------------

    def candidates(self, seen: Seen) -> list[Condition]:
        """The conditions that present with the complaint (every condition if none does)."""
        complaint = fold(seen.complaint)
        fits = [c for c in self.kb.conditions.values() if any(fold(k) == complaint for k in c.complaints)]
        if not fits:
            words = concepts(seen.complaint)
            fits = [c for c in self.kb.conditions.values() if any(concepts(k) & words for k in c.complaints)]
        return fits or list(self.kb.conditions.values())

    def posterior(self, seen: Seen, conds: list[Condition]) -> np.ndarray:
        """P(condition | what was seen) over ``conds`` (naive Bayes over the knowledge base)."""
        band = AGE_BANDS[0] if seen.age < 40 else AGE_BANDS[1] if seen.age < 65 else AGE_BANDS[2]
        logp = []
        for c in conds:
            sex = (c.prior.weight(band, "M") + c.prior.weight(band, "F")) / 2
            prior = c.prior.weight(band, seen.sex) if seen.sex in "MF" else sex
            score = math.log(max(prior, 1e-6))
            for f in seen.present:
                score += math.log(c.history[f]) if f in c.history else UNLIKELY
            for f in seen.absent:
                if f in c.history:
                    score += math.log(max(1.0 - c.history[f], 0.03))
            for system, text in seen.examined.items():
                expected = c.exam.get(system) or NORMAL_EXAM.get(system)
                if expected is not None and text and system != "vital signs":
                    score += 0.0 if text == expected else UNLIKELY
            for a, (value, flag) in seen.values.items():
                score += self._value_fit(c, a, value, flag)
            for e, text in seen.texts.items():
                effect = c.effects.get(e)
                expected = effect if isinstance(effect, str) else self.kb.exams[e].normal
                score += 0.0 if expected is None or text == expected.strip() else UNLIKELY
            logp.append(score)
        p = np.exp(np.array(logp) - max(logp))
        return p / p.sum()

    def _value_fit(self, c: Condition, analyte: str, value: float, flag: str) -> float:
        effect = c.effects.get(analyte)
        if isinstance(effect, tuple | list):
            lo, hi = float(effect[0]), float(effect[1])
            slack = 0.02 * max(abs(lo), abs(hi), 1.0)
            return 0.0 if lo - slack <= value <= hi + slack else UNLIKELY
        if isinstance(effect, str) and effect in ("high", "very high", "low", "very low"):
            return 0.0 if flag == ("H" if "high" in effect else "L") else UNLIKELY
        derived = self.kb.exams[analyte].derived
        if derived is not None and derived[0] in c.effects:
            return 0.0  # follows its source, which the condition moves
        return UNLIKELY if flag else 0.0

    # ---- acting -----------------------------------------------------------------------------------------

    def decide(self, seen: Seen) -> str:
        """The next action for what was seen (deterministic in the seed and the chat)."""
        style = np.random.default_rng(self.seed or 0)  # the episode's habits: the same draws every turn
        n_asks = 3 if style.random() < 0.5 else 2
        open_first = style.random() < 0.25
        check_vitals = style.random() < 0.4
        wording = int(style.integers(len(QUESTIONS)))
        rng = np.random.default_rng([self.seed or 0, seen.turn])  # this turn's choices

        conds = self.candidates(seen)
        post = self.posterior(seen, conds)
        order = np.argsort(-post)
        top = conds[int(order[0])]
        left = seen.turns - seen.turn
        pending = [k for k in top.key_exams if k not in seen.ordered and self.kb.exams[k].orderable]
        reserve = 1 + len(pending)  # the key exams of the working diagnosis, then the diagnosis
        asks = len(seen.asked) + seen.open_asked
        exams = sum(s != "vital signs" for s in seen.examined)

        if left <= 1:
            return self.diagnose(seen, conds, post)
        if asks < n_asks and left - reserve - (exams == 0) > 0:
            if open_first and not seen.open_asked and asks == 0:
                return tool_call("ask", question=OPEN_QUESTIONS[int(rng.integers(len(OPEN_QUESTIONS)))])
            finding = self.next_question(seen, conds, post, rng)
            if finding is not None:
                return tool_call("ask", question=QUESTIONS[wording].format(f=finding))
        if exams == 0 and left - reserve > 0:
            return tool_call("examine", system=self.next_system(seen, conds, post, rng))
        if check_vitals and "vital signs" not in seen.examined and left - reserve > 1:
            return tool_call("examine", system="vital signs")
        if pending and left >= 2:
            return self.order(seen, top, pending, rng)
        if post[order[0]] < CONFIDENT and len(conds) > 1 and left >= 3:
            rival = conds[int(order[1])]
            tests = [k for k in rival.key_exams if k not in seen.ordered and self.kb.exams[k].orderable]
            if tests:
                return self.order(seen, top, tests, rng, rival=rival)
        return self.diagnose(seen, conds, post)

    def next_question(
        self, seen: Seen, conds: list[Condition], post: np.ndarray, rng: np.random.Generator
    ) -> str | None:
        """A history finding worth asking about: expected information over the candidates plus how likely the
        answer is yes (what the likely diagnoses make likely), drawn among the best three."""
        known = set(seen.present) | seen.absent | set(seen.asked)
        options = [f for f in self._vocabulary(conds) if f not in known]
        if not options:
            return None
        scored = []
        for f in options:
            p = np.array([c.history.get(f, 0.0) for c in conds])
            yes = float(post @ p)
            gain = _entropy(yes) - float(post @ np.array([_entropy(x) for x in p]))
            scored.append((gain + 0.5 * yes, f))
        scored.sort(key=lambda x: -x[0])
        best = scored[: min(3, len(scored))]
        weights = np.array([max(s, 1e-3) for s, _ in best]) ** 2
        return best[int(rng.choice(len(best), p=weights / weights.sum()))][1]

    def next_system(self, seen: Seen, conds: list[Condition], post: np.ndarray, rng: np.random.Generator) -> str:
        """The system whose examination best tells the candidates apart (ties drawn at random)."""
        scored = []
        for s in SYSTEMS:
            if s == "vital signs" or s in seen.examined:
                continue
            groups: dict[str, float] = {}
            for c, p in zip(conds, post, strict=True):
                text = c.exam.get(s) or NORMAL_EXAM[s]
                groups[text] = groups.get(text, 0.0) + float(p)
            scored.append((-sum(q * math.log(q) for q in groups.values() if q > 0), s))
        if not scored:
            return "general"
        top = max(g for g, _ in scored)
        near = [s for g, s in scored if g >= top - 0.05]
        return near[int(rng.integers(len(near)))]

    def order(
        self,
        seen: Seen,
        working: Condition,
        exams: list[str],
        rng: np.random.Generator,
        rival: Condition | None = None,
    ) -> str:
        """Order one of ``exams`` (the least invasive first, ties at random) for the working diagnosis, with the
        impression and a reason (the seeded wording, else shorter ones that fit ``MAX_CHARS``)."""
        exams = sorted(exams, key=lambda e: (self.kb.exams[e].invasiveness, rng.random()))
        exam = self.exam_label(exams[0])
        dx = working.name
        if rival is not None:
            impression = f"{self.condition_label(working)} vs {self.condition_label(rival)}"
            first = RIVAL_REASONS[int(rng.integers(len(RIVAL_REASONS)))]
            wordings = [first.format(dx=dx, rival=rival.name, exam=exam)]
            wordings.append(
                first.format(dx=self.condition_label(working), rival=self.condition_label(rival), exam=exam)
            )
        else:
            impression = dx
            clue = self._clue(seen, working)
            first = ORDER_REASONS[int(rng.integers(len(ORDER_REASONS)))]
            wordings = [first.format(dx=dx, exam=exam, why=clue), f"{clue}; confirm {self.condition_label(working)}"]
        wordings.append(f"to confirm {self.condition_label(working)}")
        calls = [tool_call("order", exam=exam, impression=impression, reason=w) for w in wordings]
        return next((c for c in calls if len(c) <= MAX_CHARS), calls[-1])

    def diagnose(self, seen: Seen, conds: list[Condition], post: np.ndarray) -> str:
        """Commit to the leading candidate, citing the abnormal results seen; its can't-miss conditions (then the
        runner-up) as the differential, shortened until the call fits ``MAX_CHARS``."""
        ranked = [conds[int(i)] for i in np.argsort(-post)]
        top = ranked[0]
        cited = [self.exam_label(e) for e in seen.abnormal if e in seen.resulted][:3]
        clue = self._clue(seen, top)
        reason = f"{clue}; abnormal {', '.join(cited)}" if cited else f"{clue}; results in keeping"
        if any(c not in seen.resulted for c in cited_exams(self.kb, reason)):  # cite only what was seen
            reason = f"abnormal {', '.join(cited)}" if cited else "history and examination fit"
        others = [self.kb.conditions[d] for d in top.cant_miss if d in self.kb.conditions]
        others += [c for c in ranked[1:2] if c not in others]
        others = [c for c in others if c.id != top.id][: MAX_CONSIDERED - 1]
        short = f"abnormal {', '.join(cited)}" if cited else reason
        labels = [self.condition_label(c) for c in others]
        must = max(1, len([c for c in others if c.id in top.cant_miss]))
        options = [
            (reason, [c.name for c in others]),
            (reason, labels),
            (short, labels),
            (short, labels[:must]),
            (short, labels[:1]),
            (f"abnormal {cited[0]}" if cited else "history and examination fit", []),
        ]
        calls = [tool_call("diagnose", diagnosis=top.name, reason=r, differential=d) for r, d in options]
        return next((c for c in calls if len(c) <= MAX_CHARS), calls[-1])

    def exam_label(self, exam_id: str) -> str:
        """How the teacher names an exam: the catalogue name when short, else its shortest alias (an acronym in
        capitals) that still names this exam alone, in an order and in a reason's citation."""
        exam = self.kb.exams[exam_id]
        if len(exam.name) <= SHORT_NAME:
            return exam.name
        for alias in sorted(exam.aliases, key=len):
            label = alias.upper() if len(alias) <= 4 and " " not in alias and alias != "echo" else alias
            if len(alias) >= 3 and self._exam_id(label) == exam_id and cited_exams(self.kb, label) == [exam_id]:
                return label
        return exam.name

    def condition_label(self, cond: Condition) -> str:
        """How the teacher names a condition in a differential or a rival impression: the name when short, else
        its shortest alias of two words or more, or an acronym (in capitals) that names it alone."""
        if len(cond.name) <= SHORT_NAME + 6:
            return cond.name
        for alias in sorted(cond.aliases, key=len):
            acronym = " " not in alias and len(alias) <= 6
            if (acronym or " " in alias) and len(alias) >= 3 and condition_index(self.kb).resolve(alias) == cond.id:
                return alias.upper() if acronym else alias
        return cond.name

    # ---- helpers ----------------------------------------------------------------------------------------

    def _clue(self, seen: Seen, cond: Condition) -> str:
        """The observed finding that best supports ``cond`` (else the complaint), safe to cite."""
        fits = sorted((f for f in seen.present if f in cond.history), key=lambda f: -cond.history[f])
        for f in fits:
            if all(c in seen.resulted for c in cited_exams(self.kb, f)):
                return f
        return seen.complaint or "the presentation"

    def _vocabulary(self, conds: list[Condition] | None = None) -> list[str]:
        return list(dict.fromkeys(f for c in conds or self.kb.conditions.values() for f in c.history))


def _entropy(p: float) -> float:
    if p <= 0.0 or p >= 1.0:
        return 0.0
    return -(p * math.log(p) + (1 - p) * math.log(1 - p))
