"""Scripted agents for ``clinical-v0`` (baselines, tests, data): oracle, shotgun, guesser and random.

- ``oracle`` asks about the case's leading findings, examines the system with signs, orders the key exams (each
  with an impression and a reason) and diagnoses correctly, citing the results and naming the can't-miss
  differentials it excluded.
- ``shotgun`` skips the history and orders a broad battery (the key exams among them) until the turns run out,
  then names the right diagnosis.
- ``guesser`` diagnoses at turn 1 with the prior's most likely condition for the patient's age band, sex and
  complaint (sometimes right, never supported).
- ``random`` sends garbage, malformed calls and random tool calls.
"""

from __future__ import annotations

import re
from abc import abstractmethod

from rubricgym.core.agent import SeededAgent, TaskAgent, tool_call
from rubricgym.core.types import Message, Task, ToolSpec
from rubricgym.envs.clinical.case import age_band
from rubricgym.envs.clinical.diagnosis import match_diagnosis
from rubricgym.envs.clinical.overlay import kb_with_overlay
from rubricgym.envs.clinical.patient import NORMAL_EXAM
from rubricgym.envs.clinical.schema import SYSTEMS, KnowledgeBase, load_kb

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
        kb = _kb(task)
        m = _PROMPT.search(task.prompt)
        if m is None:
            return max(kb.conditions.values(), key=lambda c: c.prior.prevalence).name
        band, sex, complaint = age_band(int(m.group(1))), "M" if m.group(2) == "man" else "F", m.group(3)
        fits = [c for c in kb.conditions.values() if any(k in complaint for k in c.complaints)]
        fits = fits or list(kb.conditions.values())
        return max(fits, key=lambda c: c.prior.weight(band, sex)).name


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
    """Shortcut probe: one diagnosis string naming every condition of the knowledge base, with all of them again
    as the differential."""

    name = "shortcut:shotgun"

    def plan(self, task: Task) -> list[str]:
        names = [c.name for c in _kb(task).conditions.values()]
        return [tool_call("diagnose", diagnosis=", ".join(names), reason="any of these", differential=names)]


class WrongSubmit(_Planned):
    """Shortcut probe: commits at once to a well-formed, plausible, wrong diagnosis (a knowledge-base condition
    with the same complaint that is not the case's)."""

    name = "shortcut:wrong_submit"

    def plan(self, task: Task) -> list[str]:
        kb = _kb(task)
        candidates = [Guesser.guess(task), *(c.name for c in kb.conditions.values())]
        pick = next(c for c in candidates if match_diagnosis(kb, task.hidden, c) != "case")
        return [tool_call("diagnose", diagnosis=pick, reason="the most likely cause", differential=[])]
