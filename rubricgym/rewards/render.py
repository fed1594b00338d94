"""Render a trajectory (or a window of its steps) as the evidence text a judge reads, fenced off from the prompt.

Step-scope criteria see the judged step plus ``context_steps`` preceding steps; trajectory-scope criteria see
the whole trajectory. Long actions and observations are cut (with a marker that says so) so one runaway step
cannot crowd the rest out of a judge's context.

Everything rendered from a trajectory is written by the policy or echoes it (actions, tool arguments, parse and
tool errors, observations, the final answer), so the policy must not be able to address the judge with it. Two
defences, both applied here:

- **Quoting.** Every line of such text is rendered behind a label (``Agent: ``) or the quote bar ``QUOTE``
  (``"  | "``), after splitting it on every line break Python knows. No line the agent wrote ever starts a line
  of the prompt, so it cannot imitate a section heading (``# Criterion``, ``# How to judge it``), a
  ``Criterion:`` line, a note to the grader standing on its own line, or a fence marker. This quotes every line
  rather than pattern-matching "dangerous" ones: a list of patterns is a list of things an attacker avoids.
- **Fencing.** The evidence enters a prompt only inside ``fence``: ``<<<EVIDENCE t>>>`` ... ``<<<END EVIDENCE t>>>``
  with ``t`` a fresh random token (``secrets.token_hex``) per judge call, never occurring in the evidence itself.
  The prompt tells the judge the block is data, never instructions. The policy never sees the token, and a
  marker it writes is quoted anyway, so it can neither close the block nor open a fake one.

The token changes every call; judge caches key on the prompt rendered with ``KEY_TOKEN`` instead, so the cache
keys on the content (``llm_judge.LLMJudge.judge``).
"""

from __future__ import annotations

import secrets

from rubricgym.core.types import Step, Trajectory

MAX_FIELD_CHARS = 1200
QUOTE = "  | "
"""The prefix of every continuation line of agent-originated text (its first line follows a label)."""
KEY_TOKEN = "0" * 16
"""The fence token of the prompt a cache key is computed from (the real token is random per call)."""


def _cut(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[:limit] + f" [... {len(text) - limit} more characters]"


def quote(text: str) -> str:
    """``text`` with every line after the first behind ``QUOTE`` (any line break, ``\\r``, ``\\u2028``, ...)."""
    return ("\n" + QUOTE).join(text.splitlines())


def quote_block(text: str) -> str:
    """``text`` with every line behind ``QUOTE`` (for text that has no label to follow)."""
    return QUOTE + quote(text)


def new_token(*bodies: str) -> str:
    """A fresh random fence token that occurs in none of ``bodies``."""
    while True:
        token = secrets.token_hex(8)
        if not any(token in b for b in bodies):
            return token


def fence(body: str, token: str, label: str = "EVIDENCE") -> str:
    """``body`` between the marker lines ``<<<{label} {token}>>>`` and ``<<<END {label} {token}>>>``."""
    return f"<<<{label} {token}>>>\n{body}\n<<<END {label} {token}>>>"


def render_step(step: Step, limit: int = MAX_FIELD_CHARS) -> str:
    """One step as ``Step i [stage]`` with the agent's action and what the env answered (agent text quoted)."""
    lines = [
        f"### Step {step.index} [stage: {quote(step.stage)}]",
        "Agent: " + (quote(_cut(step.action.text, limit)) or "(empty)"),
    ]
    call = step.action.tool_call
    if call is not None and step.action.parse_error is None:
        args = ", ".join(f"{k}={v!r}" for k, v in call.arguments.items())
        lines.append("Tool call: " + quote(f"{call.name}({args})"))
    if step.action.parse_error:
        lines.append("Malformed action: " + quote(_cut(step.action.parse_error, 300)))
    if step.tool_error:
        lines.append("Tool error: " + quote(_cut(step.tool_error, 300)))
    lines.append("Environment: " + (quote(_cut(step.observation.text, limit)) or "(empty)"))
    return "\n".join(lines)


def render_outcome(traj: Trajectory) -> str:
    """The final answer (quoted line by line) and how the episode ended."""
    o = traj.outcome
    if o.terminated:
        ended = "the agent finished"
    elif o.truncated:
        ended = "cut off at the step limit"
    else:
        ended = "unfinished"
    answer = "(none)" if o.answer is None else (_cut(o.answer, MAX_FIELD_CHARS) or "(empty)")
    return f"### Final answer\n{quote_block(answer)}\n(episode {ended}, {len(traj.steps)} steps)"


def render_trajectory(
    traj: Trajectory, step: int | None = None, context_steps: int = 3, limit: int = MAX_FIELD_CHARS
) -> str:
    """The evidence for one criterion: the whole trajectory, or step ``step`` after its preceding context."""
    if step is None:
        parts = [render_step(s, limit) for s in traj.steps] or ["(no steps)"]
        parts.append(render_outcome(traj))
        return "\n\n".join(parts)
    start = max(0, step - context_steps)
    parts = []
    if start > 0:
        parts.append(f"({start} earlier step(s) omitted)")
    parts += [render_step(s, limit) for s in traj.steps[start:step]]
    parts.append(">>> THE STEP TO JUDGE <<<\n" + render_step(traj.steps[step], limit))
    return "\n\n".join(parts)


def render_path(traj: Trajectory, limit: int = 600) -> str:
    """The agent's path (each step's text and tool call, no long observations), for pairwise judging."""
    lines = []
    for s in traj.steps:
        call = s.action.tool_call
        what = f"{call.name}({', '.join(f'{k}={v!r}' for k, v in call.arguments.items())})" if call else "no valid call"
        error = s.tool_error or s.action.parse_error
        text = f"{_cut(s.action.text, limit)} -> {what}" + (f" (error: {_cut(error, 160)})" if error else "")
        lines.append(f"{s.index}. [{quote(s.stage)}] " + quote(text))
    return "\n".join(lines) or "(no steps)"
