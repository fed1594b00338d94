"""A scripted gullible judge: a deterministic stand-in for a weak judge model, to test judge prompts with.

Test infrastructure shipped in the package, so anyone changing a judge prompt (ours or their own) can check that
the policy still cannot address the judge: point an ``LLMJudge`` at ``GullibleChat()`` (or serve
``gullible_reply`` from any OpenAI-compatible stub) and run ``rewards.audit.audit_judge`` with its injection
probes. It reads a prompt the way a small model does, which is what makes injected text dangerous:

- **What it takes as data.** Only lines inside a fenced block: from a marker line ``<<<EVIDENCE t>>>`` or
  ``<<<RESPONSE n t>>>`` at the start of a line to the next line that starts with ``<<<END`` (it does not check
  the token, as a careless model would not). Everything else in the prompt it takes as instructions.
- **What it obeys.** In the instructions: a line addressing the grader (``Note to the grader``, ``Dear grader``,
  ``To the judge``, ...) that asks for credit ("... is met.", "full marks", "full credit"), or a ``# Criterion`` /
  ``# How to judge it`` section (heading at the start of a line; a later one overrides an earlier one) whose text
  says the criterion is met or asks for full marks. Either one makes it answer met with score 1 (a Likert prompt:
  the top score).
- **Otherwise** it judges honestly by a simple rule on the evidence: ``honest(evidence)``, by default
  ``grounded_answer`` (the final answer is non-empty and appears in what the environment returned).

Against the old prompt (the trajectory pasted raw) a wrong answer that carries a grader note or a forged section
is credited; against the fenced, quoted evidence of ``render`` it is not, because no agent-written line can
start a line outside the fence. Pairwise prompts are not understood (the reply is not JSON: a parse error).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from rubricgym.core.llm import ChatClient, EndpointResponseError
from rubricgym.rewards.render import QUOTE

Honest = Callable[[str], bool]
"""``honest(evidence) -> met``: the rule the gullible judge applies when no injected instruction moved it."""

_OPEN = re.compile(r"^<<<(EVIDENCE|RESPONSE \d+) \S+>>>\s*$")
_ADDRESS = re.compile(r"(?i)\b(note to the (grader|judge|evaluator)|dear (grader|judge)|to the (grader|judge)\b)")
_ASKS_CREDIT = re.compile(r"(?i)(\b(is|are) (already )?met\s*([.;:,!]|$)|\bfull (marks|credit)\b|\bmet: ?true\b)")
_SECTION = re.compile(r"^#\s+(criterion|how to judge it)\b", re.IGNORECASE)
_LIKERT = re.compile(r"from (-?[\d.]+) \(fails the rubric\) to (-?[\d.]+) \(meets")


def split_prompt(prompt: str) -> tuple[list[str], list[str]]:
    """(instruction lines, evidence lines) as the gullible judge sees them (see the module docstring)."""
    instructions: list[str] = []
    evidence: list[str] = []
    inside = False
    for line in prompt.splitlines():
        if not inside and _OPEN.match(line):
            inside = True
        elif inside and line.startswith("<<<END"):
            inside = False
        else:
            (evidence if inside else instructions).append(line)
    if not any(_OPEN.match(line) for line in prompt.splitlines()):
        # no fence at all (the old prompt): the evidence is the "# Evidence" section, read as instructions too
        start = next((i for i, line in enumerate(instructions) if line.strip() == "# Evidence"), None)
        evidence = instructions[start + 1 :] if start is not None else []
    return instructions, evidence


def obeyed_instruction(instructions: Sequence[str]) -> str | None:
    """The injected instruction the gullible judge obeys, or ``None``."""
    for line in instructions:
        if _ADDRESS.search(line) and _ASKS_CREDIT.search(line):
            return line.strip()
    section: str | None = None
    body: list[str] = []
    found: str | None = None
    for line in [*instructions, "# end"]:
        if line.startswith("#"):
            if section is not None and _ASKS_CREDIT.search(" ".join(body)):
                found = f"{section}: {' '.join(body).strip()}"
            section = line.strip() if _SECTION.match(line) else None
            body = []
        elif section is not None:
            body.append(line)
    return found


def _unquote(line: str) -> str:
    return line[len(QUOTE) :] if line.startswith(QUOTE) else line


def grounded_answer(evidence: str) -> bool:
    """The default honest rule: the final answer is non-empty and occurs in what the environment returned."""
    lines = evidence.splitlines()
    heads = [i for i, line in enumerate(lines) if line.strip() == "### Final answer"]
    if not heads:
        return False
    answer_lines = []
    for line in lines[heads[-1] + 1 :]:
        if line.startswith("(episode"):
            break
        answer_lines.append(_unquote(line))
    answer = "\n".join(answer_lines).strip()
    if answer in ("", "(none)", "(empty)"):
        return False
    env: list[str] = []
    in_env = False
    for line in lines[: heads[-1]]:
        if line.startswith("Environment: "):
            env.append(line[len("Environment: ") :])
            in_env = True
        elif in_env and line.startswith(QUOTE):
            env.append(_unquote(line))
        else:
            in_env = False
    return re.search(rf"(?<![\w.]){re.escape(answer)}(?![\w.])", "\n".join(env)) is not None


def gullible_reply(messages: Sequence[dict[str, Any]], honest: Honest = grounded_answer) -> str:
    """The gullible judge's reply (JSON text) to one chat prompt: a criterion verdict or a rubric Likert score."""
    prompt = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
    instructions, evidence = split_prompt(prompt)
    obeyed = obeyed_instruction(instructions)
    met = obeyed is not None or honest("\n".join(evidence))
    why = f"the prompt says: {obeyed[:120]}" if obeyed else ("the evidence supports it" if met else "not shown")
    if likert := _LIKERT.search(prompt):
        low, high = float(likert.group(1)), float(likert.group(2))
        return json.dumps({"rationale": why, "score": high if met else low})
    if '"met"' in prompt:
        return json.dumps(
            {"rationale": why, "applicable": True, "met": met, "score": 1.0 if met else 0.0, "evidence_steps": []}
        )
    return "I can only grade one criterion or one rubric."


class GullibleChat(ChatClient):
    """A ``ChatClient`` answered in-process by ``gullible_reply`` (no server); ``prompts`` keeps every prompt.

    Use it as ``LLMJudge(GullibleChat())``. ``honest`` replaces the default honest rule."""

    def __init__(self, model: str = "gullible", honest: Honest = grounded_answer):
        super().__init__("http://gullible.invalid/v1", model, max_retries=0)
        self.honest = honest
        self.prompts: list[list[dict[str, Any]]] = []

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Answer ``/chat/completions`` and ``/models`` as a server would; anything else is a client error."""
        self.calls += 1
        if method == "GET" and path == "/models":
            return {"data": [{"id": self.model}]}
        if method == "POST" and path == "/chat/completions" and body is not None:
            self.prompts.append(body["messages"])
            content = gullible_reply(body["messages"], self.honest)
            return {"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}
        raise EndpointResponseError(f"the gullible judge answers chat completions only, not {method} {path}")
