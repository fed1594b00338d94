"""Optional LLM roles over an OpenAI-compatible endpoint: the patient (AgentClinic-style) and the world model.

- ``patient={"base_url", "model"}``: the model role-plays the patient from the case's findings, in the first
  person, in free text; the diagnosis is never in its prompt, and a reply that names it is redacted anyway.
- ``world_model={"base_url", "model"}``: exam results are generated from DiagGym's prompt format (the patient's
  profile, the exams already resulted, the exam requested); the text goes into the step's ``info["result"]``.

Both use ``rubricgym.core.llm.ChatClient`` (retries, back-off, a clear error when the endpoint is down).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rubricgym.core.llm import ChatClient
from rubricgym.core.types import Message
from rubricgym.envs.clinical.case import CaseRecord
from rubricgym.envs.clinical.matching import fold
from rubricgym.envs.clinical.patient import VirtualPatient


@dataclass
class LLMConfig:
    """An endpoint and model for one LLM role."""

    client: ChatClient
    temperature: float = 0.0
    max_tokens: int = 200

    @classmethod
    def of(cls, spec: dict[str, Any] | None, role: str) -> LLMConfig | None:
        if spec is None:
            return None
        if not isinstance(spec, dict) or "base_url" not in spec or "model" not in spec:
            raise ValueError(
                f"{role} must be a dict with 'base_url' and 'model' (and optional 'api_key', "
                f"'temperature', 'max_tokens'), got {spec!r}"
            )
        client = ChatClient(
            spec["base_url"], spec["model"], api_key=spec.get("api_key"), timeout_s=float(spec.get("timeout_s", 60.0))
        )
        return cls(client, float(spec.get("temperature", 0.0)), int(spec.get("max_tokens", 200)))


def patient_prompt(case: CaseRecord, patient: VirtualPatient) -> str:
    """The patient's brief: who they are and what they have and have not noticed (never the diagnosis)."""
    p = case.profile
    have = [f if v is True else f"{f} ({v})" for f, v in case.history.items() if v is not False]
    lacking = [f for f, v in case.history.items() if v is False]
    lines = [
        f"You are a {p.describe()} seeing a doctor about {case.complaint}.",
        "Answer the doctor's question in the first person, in one to three plain sentences, as a patient would.",
        "Only use the facts below; if asked about something not listed, say you have not noticed it.",
        "You do not know your diagnosis and never guess one or use medical jargon.",
        "What you have noticed: " + ("; ".join(have) or "nothing beyond the main complaint") + ".",
    ]
    if lacking:
        lines.append("What you have NOT had: " + "; ".join(lacking) + ".")
    lines.append(
        "Past medical history: "
        + (", ".join(p.history) or "none")
        + ". Medicines: "
        + ("; ".join(p.medications) or "none")
        + f". {p.allergies} {p.social}".rstrip()
    )
    return "\n".join(lines)


def redact(text: str, case: CaseRecord) -> str:
    """The reply with any name of the diagnosis removed (a patient does not know it)."""
    for name in sorted([case.diagnosis.name, *case.diagnosis.aliases], key=len, reverse=True):
        if len(fold(name)) >= 3:
            text = re.sub(re.escape(name), "[something I don't know the name of]", text, flags=re.IGNORECASE)
    return text


async def ask_patient(cfg: LLMConfig, case: CaseRecord, patient: VirtualPatient, question: str) -> str:
    messages = [Message(role="system", content=patient_prompt(case, patient)), Message(role="user", content=question)]
    result = await cfg.client.chat(messages, temperature=cfg.temperature, max_tokens=cfg.max_tokens)
    return redact((result.message.content or "").strip() or "I'm not sure, doctor.", case)


def world_model_prompt(case: CaseRecord, past: list[tuple[str, str]], exam: str) -> str:
    """DiagGym's world-model prompt: profile, the exams already resulted, then the requested exam."""
    p = case.profile
    lines = ["Patient profile:", f"Age: {p.age} {p.age_unit}; sex: {p.sex}; chief complaint: {case.complaint}."]
    if p.history:
        lines.append("Past medical history: " + ", ".join(p.history) + ".")
    lines.append("Past examinations:" if past else "Past examinations: none.")
    lines += [f"- {name}: {result}" for name, result in past]
    lines.append(f"Requested examination: {exam}")
    lines.append(
        "Write the result of the requested examination as it would appear in the medical record "
        "(values with units and reference ranges, or the report text), and nothing else."
    )
    return "\n".join(lines)


async def generate_result(cfg: LLMConfig, case: CaseRecord | None, past: list[tuple[str, str]], exam: str) -> str:
    assert case is not None
    messages = [Message(role="user", content=world_model_prompt(case, past, exam))]
    result = await cfg.client.chat(messages, temperature=cfg.temperature, max_tokens=cfg.max_tokens)
    return (result.message.content or "").strip() or f"{exam}: no result returned."
