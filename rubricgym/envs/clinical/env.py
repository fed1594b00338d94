"""``clinical-v0``: interview and examine a virtual patient, order exams one at a time, commit to a diagnosis.

Seeded on DiagGym / DiagAgent / DiagBench (arXiv 2510.24654). Stages: ``history`` (ask), ``examination``
(examine), ``testing`` (order) and ``diagnosis`` (diagnose); at most 12 turns. The terminal reward is DiagGym's
``0.1·[diagnosis issued] + accuracy + 0.5·F1(ordered exams, key exams)``; the default rubric is physician-style
(``rubric.yaml``), the cost-aware one adds the work-up's cost and invasiveness (``rubric_cost.yaml``).

Cases are synthetic (a seeded generator over the knowledge base, ``kb=FOLDER`` for your own) or real
(``cases=FILE.jsonl`` in the DiagBench-like format of ``cases.py``; ``lenient=True`` loads the valid ones of a file
with bad cases; ``kb_overlay=`` adds exams and conditions over the catalogue, ``overlay.py``).
``patient={"base_url", "model"}`` lets an OpenAI-compatible model play the patient; ``world_model={...}`` lets one
generate exam results (``llm.py``).
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from rubricgym.core.env import RubricEnv, ToolError, ToolOutput
from rubricgym.core.steprecord import ToolRecord
from rubricgym.core.tools import tool
from rubricgym.core.types import Task, ToolCall
from rubricgym.envs.clinical import checks
from rubricgym.envs.clinical.case import (
    CaseRecord,
    cases_of_specialty,
    draw_of_specialty,
    generate_case,
    specialty_of,
)
from rubricgym.envs.clinical.cases import fixed_results, load_cases, read_cases
from rubricgym.envs.clinical.diagnosis import (
    cited_exams,
    considered_conditions,
    differential_list,
    impression_fit,
    match_diagnosis,
)
from rubricgym.envs.clinical.guidance import LEVELS as GUIDANCE_LEVELS
from rubricgym.envs.clinical.guidance import hint
from rubricgym.envs.clinical.llm import LLMConfig, ask_patient, generate_result
from rubricgym.envs.clinical.overlay import kb_with_overlay
from rubricgym.envs.clinical.patient import (
    SYSTEMS,
    VirtualPatient,
    condition_index,
    resolve_exam,
    resolve_system,
)
from rubricgym.envs.clinical.records import RECORDS, Ask, Diagnose, Examine, Order
from rubricgym.envs.clinical.rewards import diaggym_reward
from rubricgym.envs.clinical.schema import KnowledgeBase
from rubricgym.envs.clinical.task import case_task, heldout_presentation, reasoning_judged
from rubricgym.envs.clinical.visibility import case_secrets, has_overlay, opaque_id

ENV_ID = "clinical-v0"
GUIDE = """
You are the physician. Take a focused history (ask), examine the relevant systems (examine), order exams one at a
time with your current working diagnosis and why (order), then commit (diagnose) with your reasoning and the
differential you considered. Exams cost money and some carry risk: order what the case calls for."""
STAGE_OF = {"ask": "history", "examine": "examination", "order": "testing", "diagnose": "diagnosis"}
UNSEEN_SPLIT = "test-unseen"
"""The held-out split whose conditions training never draws (``unseen_conditions``)."""
UNSEEN_SHARE = 4
"""Of each specialty's conditions, one in ``UNSEEN_SHARE`` (at least one, when it has two or more) is unseen."""
MAX_REDRAWS = 500
"""Draws a generated case may take to land on its split's side of the partitions (``sample_task``)."""


def unseen_conditions(kb: KnowledgeBase) -> frozenset[str]:
    """The conditions only ``test-unseen`` draws: per specialty, the ``max(1, n // UNSEEN_SHARE)`` of its ``n``
    conditions (none when ``n`` is 1) that rank first by a stable hash of their id. Stable for a given knowledge
    base (an overlay that adds conditions to a specialty may move it)."""
    by_specialty: dict[str, list[str]] = {}
    for c in kb.conditions.values():
        by_specialty.setdefault(c.specialty, []).append(c.id)
    out: set[str] = set()
    for ids in by_specialty.values():
        if len(ids) >= 2:
            ranked = sorted(ids, key=lambda c: hashlib.sha1(f"clinical-v0|unseen|{c}".encode()).hexdigest())
            out.update(ranked[: max(1, len(ids) // UNSEEN_SHARE)])
    return frozenset(out)


class ClinicalEnv(RubricEnv):
    """Diagnosis of a virtual (or real-case) patient through history, examination and exams.

    Knobs (constructor keyword arguments), from the widest case pool to the narrowest:

    - ``kb``: a knowledge-base folder of your own (default: the bundled one, 11 specialties); ``kb_overlay``
      adds exams and conditions over it;
    - ``cases``: a JSONL file of real cases (DiagBench-like) instead of generated ones; ``lenient`` loads the
      valid cases of a file with bad ones;
    - ``specialty``: only cases of one knowledge-base specialty (``cardiology``, ``infectious disease``, ...:
      ``kb.specialties``), 6 to 12 candidate conditions instead of about 80, the middle rung of a curriculum
      a small model can climb;
    - ``condition``: only cases of one condition (the easiest rung: the work-up is the same every episode);
    - ``max_steps``: the turn budget (default 12);
    - ``patient`` / ``world_model``: an OpenAI-compatible model plays the patient / writes exam results.

    ``guidance`` gives three levels of hints for a failing group: where to look (specialty and organ system), the
    category of one key exam, and the whole work-up by category (``guidance.py``).

    Splits of generated cases (``sample_task``): ``train`` never draws an unseen condition (per specialty, one
    condition in four by a stable hash, ``unseen_conditions``; cardiology: 2 of 8) and never shows a held-out
    presentation (one patient presentation in four by a stable hash of its text, ``task.heldout_presentation``).
    ``test`` (and any other split name) draws new cases of the training conditions with held-out presentations:
    no case and no prompt is a training one, but its diagnoses are training diagnoses (a test image of a trained
    class). ``test-unseen`` draws cases of the unseen conditions only: no diagnosis is a training one. A cases
    file keeps its own order for every split and refuses ``test-unseen`` (its conditions are its own: pass a
    held-out file); ``condition=`` refuses it too.
    """

    env_id = ENV_ID
    stages = ("history", "examination", "testing", "diagnosis")
    held_out_splits = ("test", UNSEEN_SPLIT)
    default_max_steps = 12
    max_observation_chars = 4000
    check_set = checks.ALL
    step_records = RECORDS
    rubric_file = Path(__file__).with_name("rubric.yaml")
    public_info_keys = frozenset({"tool", "system", "cost", "invasiveness", "turnaround_h", "repeat"})
    """What a step's info may show the agent: the call as resolved and what the result said. Whether an exam is
    a key exam (``covers``, ``justified``) or the diagnosis is right stays in the private record."""
    discoverable = {
        "key_exams": frozenset({"order"}),
        "key_analytes": frozenset({"order"}),
        "diagnosis": frozenset({"order"}),
    }
    """An order's result names the exam and its analytes (a key exam the agent ordered, a panel member too), and
    a diagnostic test's result may name what it detects ("Influenza A: detected")."""
    shortcut_agents = {
        "shotgun": "rubricgym.envs.clinical.agents:ShotgunAnswer",
        "wrong_submit": "rubricgym.envs.clinical.agents:WrongSubmit",
        "shotgun_spaces": "rubricgym.envs.clinical.agents:ShotgunSpaces",
        "shotgun_or": "rubricgym.envs.clinical.agents:ShotgunOr",
        "shotgun_slashes": "rubricgym.envs.clinical.agents:ShotgunSlashes",
        "shotgun_lines": "rubricgym.envs.clinical.agents:ShotgunLines",
        "shotgun_pair": "rubricgym.envs.clinical.agents:ShotgunPair",
    }
    guidance_levels = GUIDANCE_LEVELS
    scripted_agents = {
        "oracle": "rubricgym.envs.clinical.agents:Oracle",
        "shotgun": "rubricgym.envs.clinical.agents:Shotgun",
        "guesser": "rubricgym.envs.clinical.agents:Guesser",
        "random": "rubricgym.envs.clinical.agents:RandomAgent",
        "thorough": "rubricgym.envs.clinical.agents:Thorough",
        "teacher": "rubricgym.envs.clinical.teacher:Teacher",
    }
    outcome_agents = {
        "failed": "rubricgym.envs.clinical.agents:FailedWorkup",
        "partial": "rubricgym.envs.clinical.agents:NearMiss",
    }

    def __init__(
        self,
        kb: str | None = None,
        cases: str | None = None,
        condition: str | None = None,
        kb_overlay: str | None = None,
        specialty: str | None = None,
        lenient: bool = False,
        patient: dict[str, Any] | None = None,
        world_model: dict[str, Any] | None = None,
        max_steps: int | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        self.kb_path = str(Path(kb).expanduser().resolve()) if kb else None
        overlay = kb_overlay or (cases if cases and has_overlay(cases) else None)
        self.overlay_path = str(Path(overlay).expanduser().resolve()) if overlay else None
        self.kb: KnowledgeBase = kb_with_overlay(self.kb_path, self.overlay_path)
        for note in self.kb.notes:
            warnings.warn(f"knowledge-base overlay: {note}", stacklevel=2)
        if condition is not None and condition not in self.kb.conditions:
            close = condition_index(self.kb).suggest(condition, 3)
            raise ValueError(f"unknown condition {condition!r}; close: {', '.join(close) or 'none'}")
        self.condition = condition
        self.specialty = specialty_of(self.kb, specialty, condition)
        self.cases: list[CaseRecord] = load_cases(cases, self.kb, strict=not lenient) if cases else []
        lines = read_cases(cases, self.kb).lines if cases else {}
        self._origins = {
            opaque_id(c.id): f"case {c.id!r} at {cases}:{lines[c.id]}" for c in self.cases if c.id in lines
        }
        """Task id -> the case's id and ``FILE:LINE`` (``task_origin``)."""
        if self.specialty is not None and self.cases:
            self.cases = cases_of_specialty(self.kb, self.cases, self.specialty, str(cases))
        self.label_space = sorted({c.diagnosis.name for c in self.cases}, key=str.lower)
        """The diagnoses of every case of the file: each task's ``hidden["label_space"]``, so a diagnosis naming
        another case's condition counts as naming a condition, and the baselines and probes know the labels."""
        self.too_long = [c.id for c in self.cases if len(c.key_exams) + 1 > self.max_steps]
        """Cases whose key exams and diagnosis need more turns than ``max_steps`` allows (warned at load)."""
        if self.too_long:
            warnings.warn(
                f"{cases}: {len(self.too_long)} case(s) need more turns than max_steps={self.max_steps} for their "
                f"key exams and the diagnosis (even a perfect agent cannot score on them): {', '.join(self.too_long)}",
                stacklevel=2,
            )
        self.patient_llm = LLMConfig.of(patient, "patient")
        self.world_llm = LLMConfig.of(world_model, "world_model")
        self._patient: VirtualPatient | None = None
        self._case: CaseRecord | None = None
        self._facts: dict[str, Any] = {}
        self._results_text: dict[str, str] = {}
        self._case_cache: tuple[Any, CaseRecord, dict[str, float | str]] | None = None
        self.unseen_conditions = unseen_conditions(self.kb)
        """The knowledge base's conditions that only ``test-unseen`` draws (``unseen_conditions``)."""

    @classmethod
    def secrets(cls, task: Task) -> list[tuple[str, Any]]:
        """The diagnosis (name, aliases, ICD-10 code, KB condition), the case's own id, the key exams and the
        can't-miss conditions; the rubric's wording and the rule-out lists are derived from these. A name that the
        exam catalogue or the case's own findings use ("family history of diabetes") is public, not a secret."""
        return case_secrets(task)

    @classmethod
    def llm_rubric(cls) -> dict[str, Any]:
        """The default rubric with the reasoning criterion judged by an LLM instead of the programmatic check.

        Use it with an ``LLMJudge`` in the ``ProcessRewardModel``; the default rubric keeps the check (the
        programmatic fallback, which only sees which results the reasoning cites).
        """
        return reasoning_judged(cls.default_rubric())

    # ---- tasks ------------------------------------------------------------------------------------------

    def task_origin(self, task: Task) -> str:
        """A case of the user's file by its id and ``FILE:LINE`` (generated cases: ``""``)."""
        return self._origins.get(task.id, "")

    def task_set(self, n: int, seed: int = 0, split: str = "train") -> list[Task]:
        """Generated cases of ``split`` (see the class docstring), or (a cases file) the first ``n`` cases of the
        file, in file order, each once."""
        if not self.cases:
            return super().task_set(n, seed=seed, split=split)
        self._refuse_unseen(split)
        if n > len(self.cases):
            raise ValueError(
                f"the cases file has {len(self.cases)} case(s), fewer than the {n} asked for; ask for at most "
                f"{len(self.cases)} or add cases to the file"
            )
        return [self.task_for(c, split) for c in self.cases[:n]]

    def sample_task(self, rng: np.random.Generator, split: str = "train") -> Task:
        """A case of ``split``: a training case never has an unseen condition nor a held-out presentation; a
        held-out one (``test``, ``test-unseen``, any split but ``train``) always has a held-out presentation, and
        a ``test-unseen`` one an unseen condition. A draw on the wrong side is redrawn from ``rng`` (the same
        draws as before the partition whenever the first draw is allowed)."""
        if self.cases:
            self._refuse_unseen(split)
            return self.task_for(self.cases[int(rng.integers(len(self.cases)))], split)
        unseen = split == UNSEEN_SPLIT
        if unseen:
            self._refuse_unseen(split)
        for _ in range(MAX_REDRAWS):
            seed = int(rng.integers(2**62))
            condition = self.condition
            if unseen:
                condition = self._draw_unseen(rng)
            elif condition is None and self.specialty is not None:
                condition = draw_of_specialty(self.kb, self.specialty, rng)
            case = generate_case(self.kb, seed, condition)
            if self.allows(case, split):
                return self.task_for(case, split)
        raise RuntimeError(f"no {split} case on its side of the split partition after {MAX_REDRAWS} draws")

    def allows(self, case: CaseRecord, split: str) -> bool:
        """Whether a generated ``case`` belongs to ``split``: its presentation is held out exactly when the split
        is, and only ``test-unseen`` (or an env fixed to one condition) has an unseen condition."""
        if heldout_presentation(case) != (split != "train"):
            return False
        return split == UNSEEN_SPLIT or self.condition is not None or case.condition not in self.unseen_conditions

    def _draw_unseen(self, rng: np.random.Generator) -> str:
        """An unseen condition (of the env's specialty, if it has one), in proportion to its prevalence."""
        pool = sorted(self._unseen_pool())
        weights = np.array([self.kb.conditions[c].prior.prevalence for c in pool])
        return pool[int(rng.choice(len(pool), p=weights / weights.sum()))]

    def _unseen_pool(self) -> frozenset[str]:
        if self.specialty is None:
            return self.unseen_conditions
        return frozenset(c for c in self.unseen_conditions if self.kb.conditions[c].specialty == self.specialty)

    def _refuse_unseen(self, split: str) -> None:
        """``test-unseen`` needs conditions training never draws: not there for a cases file or one condition."""
        if split != UNSEEN_SPLIT:
            return
        if self.cases:
            raise ValueError(
                f"split {UNSEEN_SPLIT!r} holds out knowledge-base conditions from generated cases; a cases file's "
                "conditions are its own: pass a separate file of held-out cases (cases=HELDOUT.jsonl) for the "
                "held-out run, or drop cases= to use the generated split"
            )
        if self.condition is not None:
            raise ValueError(
                f"split {UNSEEN_SPLIT!r} draws conditions training never sees, but this env is fixed to "
                f"condition={self.condition!r}: drop condition= (specialty= keeps a narrow pool)"
            )
        if not self._unseen_pool():
            raise ValueError(
                f"specialty {self.specialty!r} has no held-out conditions (a specialty needs at least 2 conditions "
                f"to hold one out): use split 'test', or a wider specialty"
            )

    def task_for(self, case: CaseRecord, split: str = "train") -> Task:
        """The task of one case (synthetic or real): ``task.case_task``."""
        return case_task(self, case, split)

    def guidance(self, task: Task, level: int) -> str | None:
        """Level 1: the specialty and the organ system of the diagnosis ("Think as a specialist in pulmonology
        would: the diagnosis is a disease of the respiratory system"); level 2 adds the category of the case's first
        key exam ("One exam that settles it is a plain imaging study ..."); level 3 adds the category of every key
        exam and the systems with examination findings. Each level keeps the ones below.

        The key exams are secrets (the work-up is scored on them) and may name the diagnosis (a malaria film), so a
        hint gives an exam's category (kind and invasiveness: a class of several catalogue exams), never its name;
        the specialty and the ICD-10 chapter never name the condition. Deterministic in the task; no episode
        needed (the trainer asks a fresh env).
        """
        kb = kb_with_overlay(task.params.get("kb") or self.kb_path, task.params.get("kb_overlay") or self.overlay_path)
        examination = list(task.params.get("case", {}).get("examination", {}))
        return hint(kb, task.hidden, examination, level)

    def begin(self, task: Task) -> None:
        kb_path, overlay = task.params.get("kb"), task.params.get("kb_overlay")
        if (kb_path and kb_path != self.kb_path) or (overlay and overlay != self.overlay_path):
            self.kb_path, self.overlay_path = kb_path or self.kb_path, overlay or self.overlay_path
            self.kb = kb_with_overlay(self.kb_path, self.overlay_path)
        raw, secret = task.params["case"], task.hidden.get("case_record", {})
        if self._case_cache is None or self._case_cache[0] is not raw:  # a GRPO group resets one task many times
            case = CaseRecord.model_validate({**raw, **secret})
            self._case_cache = (raw, case, fixed_results(self.kb, case))
        self._case = self._case_cache[1]
        self._patient = VirtualPatient(self.kb, self._case, self._case_cache[2])
        self._facts = task.hidden
        self._ordered: dict[str, int] = {}
        self._abnormal: set[str] = set()
        self._seen: set[str] = set()
        self._impressions: list[str] = []
        self._results_text = {}

    def system_prompt(self) -> str:
        return super().system_prompt() + "\n" + GUIDE.strip()

    def stage_of(self, call: ToolCall | None) -> str:
        if call is None:
            return self._stage or "history"
        return STAGE_OF.get(call.name, self._stage or "history")

    # ---- tools ------------------------------------------------------------------------------------------
    # Tool examples show the format and never name a condition: a policy that copies an example must earn nothing
    # for it (the base model copied an old example, "Acute inferior STEMI", into every diagnosis and "solved" 7 of
    # the 16 test-unseen cases, half of which are STEMI). tests/envs/clinical/test_integrity.py checks it.

    @tool(examples={"question": "Where is the pain, and does it spread anywhere?"})
    async def ask(self, question: str) -> ToolOutput:
        """Ask the patient one history question (symptoms, onset, past history, medicines, social, family).

        Args:
            question: the question, in plain words
        """
        if not question.strip():
            raise ToolError("the question is empty; ask the patient something, e.g. 'When did the pain start?'")
        assert self._patient is not None and self._case is not None
        answer, matched = self._patient.answer(question)
        source = "rules"
        if self.patient_llm is not None:
            answer = await ask_patient(self.patient_llm, self._case, self._patient, question)
            source = "llm"
        present = [f for f in matched if self._case.history.get(f, False) is not False]
        return ToolOutput(
            text=f'Patient: "{answer}"',
            info=Ask(tool="ask", matched=matched, present=present, source=source).info(),
        )

    @tool(examples={"system": "cardiovascular"})
    def examine(self, system: str) -> ToolOutput:
        """Examine one system: vital signs, general, cardiovascular, respiratory, abdominal, neurological,
        musculoskeletal, skin, head and neck or pelvic (a case may name further sections, e.g. fundoscopy).

        Args:
            system: the system to examine
        """
        assert self._patient is not None
        name = self._patient.section(system) or resolve_system(system)
        if name is None:
            own = [k for k in self._patient.case.examination if k not in SYSTEMS]
            extra = f" (or a section this patient's chart names: {', '.join(own)})" if own else ""
            raise ToolError(f"unknown system {system!r}; examine one of: {', '.join(SYSTEMS)}{extra}")
        text = self._patient.examine(name)
        return ToolOutput(text=f"Examination ({name}): {text}", info=Examine(tool="examine", system=name).info())

    @tool(
        examples={
            "exam": "Troponin I",
            "impression": "<your working diagnosis>",
            "reason": "<the finding this exam should confirm or exclude>",
        }
    )
    async def order(self, exam: str, impression: str = "", reason: str = "") -> ToolOutput:
        """Order ONE exam (lab test, panel, imaging, ECG, culture or procedure) and get its result.

        Args:
            exam: the exam's name, e.g. 'CBC', 'Troponin I', 'CT head', 'Urinalysis'
            impression: your current working diagnosis
            reason: why this exam, now
        """
        assert self._patient is not None
        exam_id = resolve_exam(self.kb, exam)
        spec = self.kb.exams[exam_id]
        repeat = exam_id in self._ordered
        turn = len(self._records) + 1
        lines = self._patient.report(exam_id)
        analytes = [ln.exam for ln in lines]
        abnormal = [ln.exam for ln in lines if ln.abnormal]
        if abnormal and exam_id not in abnormal:
            abnormal.append(exam_id)  # an abnormal panel member makes the panel abnormal (citable by its name)
        source = "patient"
        if self.world_llm is not None and not repeat:
            text = await generate_result(self.world_llm, self._case, self._history_results(), spec.name)
            body, abnormal, source = text, [], "world_model"
            self._results_text[exam_id] = text
        elif self.world_llm is not None:
            body = self._results_text[exam_id]
        else:
            body = (
                lines[0].text
                if len(lines) == 1 and not spec.members
                else spec.name + "\n" + "\n".join("  " + ln.text for ln in lines)
            )
        head = f"Already resulted at turn {self._ordered[exam_id]}. " if repeat else ""
        self._ordered.setdefault(exam_id, turn)
        self._seen.update(analytes + [exam_id])
        self._abnormal.update(abnormal)
        self._impressions.append(impression)
        key = self._facts.get("key_analytes", {})
        covers = [k for k, members in key.items() if set(members) <= set(analytes) or k == exam_id]
        record = Order(
            tool="order",
            exam=exam_id,
            name=spec.name,
            analytes=analytes,
            abnormal=abnormal,
            cost=spec.cost,
            invasiveness=spec.invasiveness,
            turnaround_h=spec.turnaround_h,
            repeat=repeat,
            impression=impression.strip(),
            reason=reason.strip(),
            covers=covers,
            justified=exam_id in self._facts.get("justified", []) or bool(covers),
            fits_impression=impression_fit(self.kb, self._facts, impression, [exam_id, *analytes]),
            source=source,
            result=body,
        )
        return ToolOutput(text=f"{head}Here is the result: {body}", info=record.info())

    @tool(
        examples={
            "diagnosis": "<the condition, in words>",
            "reason": "<the findings and results that support it>",
            "differential": ["<a condition you excluded>", "<another one>"],
        }
    )
    def diagnose(self, diagnosis: str, reason: str = "", differential: list[str] | None = None) -> ToolOutput:
        """Commit to a final diagnosis; this ends the episode.

        Args:
            diagnosis: the diagnosis, in words (an ICD-10 code may follow)
            reason: the findings and results that support it
            differential: the other diagnoses you considered and excluded
        """
        if not diagnosis.strip():
            raise ToolError("the diagnosis is empty; name the condition in words (an ICD-10 code may follow)")
        diff = differential_list(differential)
        facts = self._facts
        matched = match_diagnosis(self.kb, facts, diagnosis)
        correct = matched == "case"
        considered = considered_conditions(self.kb, facts, self._ordered, diff + self._impressions + [reason])
        cites = cited_exams(self.kb, reason)
        covers = [o.covers for o in self._orders() if not o.repeat]
        parts = diaggym_reward(True, correct, covers, facts.get("key_exams", []))
        record = Diagnose(
            tool="diagnose",
            diagnosis=diagnosis.strip(),
            matched=matched,
            correct=correct,
            differential=diff,
            considered=considered,
            reason=reason.strip(),
            cites=cites,
            cites_unseen=[c for c in cites if c not in self._seen],
            cites_abnormal=[c for c in cites if c in self._abnormal],
            any_abnormal=bool(self._abnormal),
            **parts,
        )
        return ToolOutput(
            text=f"Diagnosis recorded: {diagnosis.strip()}.",
            done=True,
            answer=diagnosis.strip(),
            reward=parts["reward"],
            info=record.info(),
            solved=correct,  # the reward also pays the work-up (exam F1): the right diagnosis is what solves it
        )

    # ---- helpers ----------------------------------------------------------------------------------------

    def _typed(self) -> list[ToolRecord | None]:
        """The episode's step records so far, typed."""
        return [RECORDS.of(s) for s in self.steps]

    def _orders(self) -> list[Order]:
        return [r for r in self._typed() if isinstance(r, Order)]

    def _history_results(self) -> list[tuple[str, str]]:
        return [(o.name, o.result) for o in self._orders()]

    def summary(self) -> dict[str, Any]:
        typed = self._typed()
        last = typed[-1] if typed else None
        orders = [r for r in typed if isinstance(r, Order)]
        return {
            "asked": sum(isinstance(r, Ask) for r in typed),
            "examined": sum(isinstance(r, Examine) for r in typed),
            "ordered": [o.name for o in orders],
            "cost": sum(o.cost for o in orders),
            "diagnosed": isinstance(last, Diagnose),
            "correct": isinstance(last, Diagnose) and last.correct,
            "diaggym": last.diaggym if isinstance(last, Diagnose) else 0.0,
        }


class CostAwareClinicalEnv(ClinicalEnv):
    """``clinical-v0`` whose default rubric also scores the work-up's total cost and invasiveness."""

    env_id = "clinical-cost-v0"
    rubric_file = Path(__file__).with_name("rubric_cost.yaml")
