"""Render a trajectory (or a window of its steps) as the evidence text a judge reads.

Step-scope criteria see the judged step plus ``context_steps`` preceding steps; trajectory-scope criteria see
the whole trajectory. Long actions and observations are cut (with a marker that says so) so one runaway step
cannot crowd the rest out of a judge's context.
"""

from __future__ import annotations

from rubricgym.core.types import Step, Trajectory

MAX_FIELD_CHARS = 1200


def _cut(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[:limit] + f" [... {len(text) - limit} more characters]"


def render_step(step: Step, limit: int = MAX_FIELD_CHARS) -> str:
    """One step as ``Step i [stage]`` with the agent's action and what the env answered."""
    lines = [
        f"### Step {step.index} [stage: {step.stage}]",
        "Agent: " + (_cut(step.action.text, limit) or "(empty)"),
    ]
    call = step.action.tool_call
    if call is not None and step.action.parse_error is None:
        lines.append(f"Tool call: {call.name}({', '.join(f'{k}={v!r}' for k, v in call.arguments.items())})")
    if step.action.parse_error:
        lines.append("Malformed action: " + _cut(step.action.parse_error, 300))
    if step.tool_error:
        lines.append("Tool error: " + _cut(step.tool_error, 300))
    lines.append("Environment: " + (_cut(step.observation.text, limit) or "(empty)"))
    return "\n".join(lines)


def render_outcome(traj: Trajectory) -> str:
    o = traj.outcome
    if o.terminated:
        ended = "the agent finished"
    elif o.truncated:
        ended = "cut off at the step limit"
    else:
        ended = "unfinished"
    answer = "(none)" if o.answer is None else (_cut(o.answer, MAX_FIELD_CHARS) or "(empty)")
    return f"### Final answer\n{answer}\n(episode {ended}, {len(traj.steps)} steps)"


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
        lines.append(
            f"{s.index}. [{s.stage}] {_cut(s.action.text, limit)} -> {what}"
            + (
                f" (error: {_cut(s.tool_error or s.action.parse_error or '', 160)})"
                if s.tool_error or s.action.parse_error
                else ""
            )
        )
    return "\n".join(lines) or "(no steps)"
