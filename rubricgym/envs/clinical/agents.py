"""Scripted agents for ``clinical-v0`` (baselines, tests, data): oracle, shotgun, guesser and random.

- ``oracle`` asks about the case's leading findings, examines the system with signs, orders the key exams (each
  with an impression and a reason) and diagnoses correctly, citing the results and naming the can't-miss
  differentials it excluded.
- ``shotgun`` skips the history and orders a broad battery (the key exams among them) until the turns run out,
  then names the right diagnosis.
- ``guesser`` diagnoses at turn 1 with the prior's most likely condition for the patient's age band, sex and
  complaint (sometimes right, never supported); on a case file, the likeliest of the file's diagnoses.
- ``random`` sends garbage, malformed calls and random tool calls.
- ``thorough`` asks about every history topic once and examines every section (the leak audit plays it to see
  all that a patient says), then guesses.

Outcome-consistency agents (``ClinicalEnv.outcome_agents``): ``failed_workup`` (a sensible work-up, a plausible
wrong diagnosis) and ``near_miss`` (the oracle's work-up, a near-miss diagnosis). Shortcut probes: the shotgun
in every separator (commas, spaces, "or", slashes, lines), the right name with one other, and a wrong submission.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Callable

from rubricgym.core.agent import SeededAgent, TaskAgent, tool_call
from rubricgym.core.types import Message, Task, ToolSpec
from rubricgym.envs.clinical.case import age_band
from rubricgym.envs.clinical.diagnosis import match_diagnosis
from rubricgym.envs.clinical.matching import concepts
from rubricgym.envs.clinical.overlay import kb_with_overlay
from rubricgym.envs.clinical.patient import NORMAL_EXAM, condition_index
from rubricgym.envs.clinical.schema import SYSTEMS, Condition, KnowledgeBase, load_kb

SHOTGUN_BATTERY = (
    "cbc",
    "cmp",
    "ct_head",
    "coag",
    "ct_abdomen",
    "troponin_i",
    "ctpa",
    "mri_brain",
    "echo",
    "lumbar_puncture",
    "blood_cultures",
    "endoscopy",
    "coronary_angiography",
    "urinalysis",
)
_PROMPT = re.compile(r"An? (\d+)-year-old (man|woman) presents with (.+?)\. You have at most (\d+) turns")


class _Planned(TaskAgent):
    """Plays a list of actions planned from the task at the start of the episode."""

    def __init__(self, seed: int | None = None, task: Task | None = None):
        super().__init__(seed, task)
        self._plan: list[str] | None = None
        self._k = 0

    @abstractmethod
    def plan(self, task: Task) -> list[str]:
        """The episode's actions (tool-call texts), planned from the task."""

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        if self._plan is None:
            self._plan = self.plan(self.episode_task())
        k, self._k = self._k, self._k + 1  # one call per turn
        return self._plan[min(k, len(self._plan) - 1)]


def _kb(task: Task) -> KnowledgeBase:
    return kb_with_overlay(task.params.get("kb"), task.params.get("kb_overlay"))


def _names(task: Task, exam_ids: list[str]) -> list[str]:
    kb = _kb(task)
    return [kb.exams[e].name if e in kb.exams else e for e in exam_ids]


class Oracle(_Planned):
    """Targeted history, the key exams, the right diagnosis (see the module docstring)."""

    name = "oracle"

    def plan(self, task: Task) -> list[str]:
        case, hidden = task.params["case"], task.hidden
        diagnosis = hidden["diagnosis"]["name"]
        targets = [r["target"] for r in hidden.get("rubric", []) if r.get("kind") == "asked" and r.get("target")]
        present = [f for f, v in case.get("history", {}).items() if v is not False]
        present = list(dict.fromkeys(targets + present))
        out = [tool_call("ask", question=f"Have you had {f}?") for f in present[:2]]
        if len(out) < 2:
            out.append(tool_call("ask", question="What brings you in today?"))
        signs = [s for s in case.get("examination", {}) if s in SYSTEMS and s in NORMAL_EXAM]
        out.append(tool_call("examine", system=signs[0] if signs else "general"))
        kb = _kb(task)
        cant = [c["name"] for c in hidden.get("cant_miss", [])]
        cant_ids = {c["id"] for c in hidden.get("cant_miss", [])}
        keys = _names(task, hidden.get("key_exams", []))
        for exam in keys:
            why = f"to confirm {diagnosis}" + (f" and exclude {', '.join(cant)}" if cant else "")
            out.append(tool_call("order", exam=exam, impression=diagnosis, reason=why))
        others = [d for d in hidden.get("differential", []) if d not in cant_ids][:1]
        differential = cant + [kb.conditions[d].name if d in kb.conditions else d for d in others]
        evidence = (", ".join(keys) + " results") if keys else "the history and examination"
        found = "; ".join(present[:2])
        out.append(
            tool_call(
                "diagnose", diagnosis=diagnosis, reason=f"{found}; supported by {evidence}.", differential=differential
            )
        )
        return out


class Shotgun(_Planned):
    """Orders a broad battery (key exams included) until the turns run out, then the right diagnosis."""

    name = "shotgun"

    def plan(self, task: Task) -> list[str]:
        m = _PROMPT.search(task.prompt)
        turns = int(m.group(4)) if m else 12
        keys = list(task.hidden.get("key_exams", []))
        battery = [e for e in SHOTGUN_BATTERY if e not in keys]
        exams = (keys + battery)[: max(0, turns - 1)]
        exams = exams[len(keys) :][:1] + exams[: len(keys)] + exams[len(keys) + 1 :]  # key exams early, not first
        out = [
            tool_call("order", exam=e, impression="unclear", reason="screening everything") for e in _names(task, exams)
        ]
        out.append(tool_call("diagnose", diagnosis=task.hidden["diagnosis"]["name"], reason="full work-up done"))
        return out


class Guesser(_Planned):
    """Diagnoses at turn 1 with the prior's most likely condition for the age band, sex and complaint."""

    name = "guesser"

    def plan(self, task: Task) -> list[str]:
        return [tool_call("diagnose", diagnosis=self.guess(task), reason="the most likely cause of this complaint")]

    @staticmethod
    def guess(task: Task) -> str:
        """The likeliest condition for the patient: of the case file's diagnoses when the task comes from a file
        (``hidden["label_space"]``: the labels, never which is this case's), else of the knowledge base."""
        kb = _kb(task)
        m = _PROMPT.search(task.prompt)
        labels = list(task.hidden.get("label_space", []))
        if m is None:
            if labels:
                return labels[0]
            return max(kb.conditions.values(), key=lambda c: c.prior.prevalence).name
        band, sex, complaint = age_band(int(m.group(1))), "M" if m.group(2) == "man" else "F", m.group(3)
        if labels:
            return _likeliest_label(kb, labels, complaint, lambda c: c.prior.weight(band, sex))
        fits = [c for c in kb.conditions.values() if any(k in complaint for k in c.complaints)]
        fits = fits or list(kb.conditions.values())
        return max(fits, key=lambda c: c.prior.weight(band, sex)).name


def _likeliest_label(kb: KnowledgeBase, labels: list[str], complaint: str, weight: Callable[[Condition], float]) -> str:
    """The label that best fits the complaint: one that is a knowledge-base condition presenting with it (by
    its prior for the patient), else one sharing words with it, else the first."""
    index = condition_index(kb)
    scored = []
    for i, label in enumerate(labels):
        cid = index.resolve(label)
        cond = kb.conditions.get(cid or "")
        prior = weight(cond) if cond is not None and any(k in complaint for k in cond.complaints) else -1.0
        shared = len(concepts(label) & concepts(complaint))
        scored.append((prior, shared, -i, label))
    return max(scored)[-1]


class RandomAgent(SeededAgent):
    """Random outputs: garbage, malformed calls, random questions, systems, exams and diagnoses."""

    name = "random"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        rng = self.rng
        kb = load_kb()
        r = rng.random()
        if r < 0.1:
            return "".join(rng.choice(list('abc xyz{}[]":,<>0123456789é中'), size=int(rng.integers(0, 40))))
        if r < 0.15:
            return '<tool_call>{"name": "order", "arguments": {"exam": </tool_call>'
        if r < 0.4:
            cond = kb.conditions[str(rng.choice(list(kb.conditions)))]
            return tool_call("ask", question=f"Have you had {rng.choice(list(cond.history))}?")
        if r < 0.55:
            return tool_call("examine", system=str(rng.choice([*SYSTEMS, "spleen"])))
        if r < 0.9:
            exam = kb.orderable[int(rng.integers(len(kb.orderable)))].name if rng.random() < 0.9 else "scan everything"
            return tool_call("order", exam=exam, impression="unsure", reason="random")
        cond = kb.conditions[str(rng.choice(list(kb.conditions)))]
        return tool_call("diagnose", diagnosis=cond.name, reason="a guess")


class ShotgunAnswer(_Planned):
    """Shortcut probe: one diagnosis string naming every condition it can list (the case file's diagnoses, then
    the knowledge base's), joined by commas, with all of them again as the differential."""

    name = "shortcut:shotgun"
    joiner = ", "

    def plan(self, task: Task) -> list[str]:
        names = list(
            dict.fromkeys([*task.hidden.get("label_space", []), *(c.name for c in _kb(task).conditions.values())])
        )
        return [tool_call("diagnose", diagnosis=self.joiner.join(names), reason="any of these", differential=names)]


class ShotgunSpaces(ShotgunAnswer):
    """The shotgun with the names joined by spaces only (no separator to split on)."""

    name = "shortcut:shotgun_spaces"
    joiner = " "


class ShotgunOr(ShotgunAnswer):
    """The shotgun with the names joined by "or"."""

    name = "shortcut:shotgun_or"
    joiner = " or "


class ShotgunSlashes(ShotgunAnswer):
    """The shotgun with the names joined by slashes."""

    name = "shortcut:shotgun_slashes"
    joiner = "/"


class ShotgunLines(ShotgunAnswer):
    """The shotgun with one name a line."""

    name = "shortcut:shotgun_lines"
    joiner = "\n"


class ShotgunPair(_Planned):
    """Shortcut probe: the case's diagnosis and one other condition of the file (or the knowledge base), joined
    by a space: the smallest list, and one that holds the right answer."""

    name = "shortcut:shotgun_pair"

    def plan(self, task: Task) -> list[str]:
        right = task.hidden["diagnosis"]["name"]
        kb = _kb(task)
        others = [*task.hidden.get("label_space", []), *(c.name for c in kb.conditions.values())]
        other = next(o for o in others if match_diagnosis(kb, task.hidden, o) != "case")
        return [tool_call("diagnose", diagnosis=f"{right} {other}", reason="one of these two")]


class WrongSubmit(_Planned):
    """Shortcut probe: commits at once to a well-formed, plausible, wrong diagnosis (a knowledge-base condition
    with the same complaint that is not the case's)."""

    name = "shortcut:wrong_submit"

    def plan(self, task: Task) -> list[str]:
        kb = _kb(task)
        candidates = [Guesser.guess(task), *(c.name for c in kb.conditions.values())]
        pick = next(c for c in candidates if match_diagnosis(kb, task.hidden, c) != "case")
        return [tool_call("diagnose", diagnosis=pick, reason="the most likely cause", differential=[])]


class Thorough(_Planned):
    """Asks about every topic of the patient's history once (each finding of the chart, then past history,
    medicines, allergies and social history), examines the vital signs and every section the chart names, then
    diagnoses as the guesser would: the leak audit, which plays every scripted agent, so sees all the text a
    patient says (a history that names the diagnosis is caught)."""

    name = "thorough"

    def plan(self, task: Task) -> list[str]:
        case = task.params["case"]
        out = [tool_call("ask", question=f"Tell me about the {f}.") for f in case.get("history", {})]
        out += [
            tool_call("ask", question=q)
            for q in (
                "Do you have any past medical history?",
                "What medicines do you take?",
                "Do you have any allergies?",
                "Do you smoke or drink alcohol?",
            )
        ]
        out.append(tool_call("examine", system="vital signs"))
        out += [tool_call("examine", system=s) for s in case.get("examination", {}) if s != "vital signs"]
        return out + [tool_call("diagnose", diagnosis=Guesser.guess(task), reason="history and examination")]


def _working_diagnosis(task: Task) -> str:
    """A plausible wrong diagnosis: the likeliest condition for the complaint (the guesser's ranking) that is not
    the case's (the only use of ``hidden``: to make sure the answer is wrong)."""
    kb = _kb(task)
    candidates = [Guesser.guess(task), *task.hidden.get("label_space", []), *(c.name for c in kb.conditions.values())]
    return next(c for c in candidates if match_diagnosis(kb, task.hidden, c) != "case")


class FailedWorkup(_Planned):
    """Outcome-consistency agent (``failed``): a full, sensible work-up from what it observes (the complaint,
    history, examination, the exams its working diagnosis calls for, each with an impression and a reason),
    then a plausible wrong diagnosis with its reasoning."""

    name = "failed_workup"

    def plan(self, task: Task) -> list[str]:
        m = _PROMPT.search(task.prompt)
        complaint, turns = (m.group(3), int(m.group(4))) if m else ("your symptoms", 12)
        kb = _kb(task)
        working = _working_diagnosis(task)
        cid = condition_index(kb).resolve(working)
        exams = list(kb.conditions[cid].key_exams) if cid in kb.conditions else ["cbc"]
        out = [
            tool_call("ask", question=f"Tell me about the {complaint}: when did it start and what is it like?"),
            tool_call("ask", question="Do you have any past medical history?"),
            tool_call("examine", system="vital signs"),
            tool_call("examine", system="general"),
        ]
        names = _names(task, exams[: max(0, turns - len(out) - 1)])
        out += [
            tool_call(
                "order", exam=e, impression=working, reason=f"to confirm {working} as the cause of the {complaint}"
            )
            for e in names
        ]
        evidence = (", ".join(names) + " results") if names else "the history and examination"
        return out + [tool_call("diagnose", diagnosis=working, reason=f"{complaint}; {evidence}.", differential=[])]


_SWAPS = {"acute": "Chronic", "chronic": "Acute", "left": "Right", "right": "Left", "upper": "Lower", "lower": "Upper"}


class NearMiss(Oracle):
    """Outcome-consistency agent (``partial``): the oracle's careful work-up (targeted history, the key exams,
    the can't-miss conditions) ending in a near miss: the diagnosis with its acuity or side swapped ("Chronic"
    for "Acute ..."), else a condition of the case's differential, else a plausible wrong one."""

    name = "near_miss"

    def plan(self, task: Task) -> list[str]:
        kb, hidden = _kb(task), task.hidden
        name = hidden["diagnosis"]["name"]
        words = name.split()
        swap = next((i for i, w in enumerate(words) if w.lower() in _SWAPS), None)
        candidates = []
        if swap is not None:
            candidates.append(" ".join([*words[:swap], _SWAPS[words[swap].lower()], *words[swap + 1 :]]))
        candidates += [kb.conditions[d].name for d in hidden.get("differential", []) if d in kb.conditions]
        candidates += [f"Chronic {name}", _working_diagnosis(task)]
        near = next(c for c in candidates if match_diagnosis(kb, hidden, c) != "case")
        work = super().plan(task)[:-1]
        return [*work, tool_call("diagnose", diagnosis=near, reason="supported by the results obtained")]
