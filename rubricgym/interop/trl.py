"""TRL (1.16) bridge: rubric reward functions and an ``environment_factory`` for ``GRPOTrainer``.

``environment_factory(env_id)`` is a class TRL builds once per rollout slot and resets per example
(``reset(**row)``): its public methods are the env's tools, generated from their ``ToolSpec`` with type hints and a
Google-style docstring (what transformers turns into the tool schema), and each call is one env step with a
structured tool call. ``get_reward`` (optional) is the env's own outcome reward. ``reward_funcs(env_id, rubric)``
scores each rollout's episode with the rubric through the process reward model: the recorded trajectory when TRL
passes ``environments``, else an episode replayed from the completion text on the row's ``seed`` / ``task``. A
sample whose verdicts errored gets ``None`` (TRL ignores it), never 0. ``task_dataset`` builds the matching
dataset (a ``seed`` column, so a GRPO group shares its task).

TRL trains with tools only through a chat template that renders tool calls and tool replies, keeps earlier turns
unchanged as turns are added, and has a response parser; SmolLM2's own template (the embedded model) does none of
that. ``with_tool_template(tokenizer)`` gives a ChatML tokenizer such a template (``SMOLLM2_TOOL_TEMPLATE``: SmolLM2's
system prompt, Hermes-style ``<tool_call>`` JSON as rubricgym's envs parse it) and the matching parser.
"""

from __future__ import annotations

import asyncio
import inspect
import keyword
from collections.abc import Callable, Sequence
from typing import Any, Literal

from rubricgym.core.env import RubricEnv
from rubricgym.core.registry import make
from rubricgym.core.types import Action, Task, ToolCall, ToolSpec, Trajectory
from rubricgym.rewards.judges import Judge
from rubricgym.rewards.prm import ProcessRewardModel
from rubricgym.rewards.rubric import Rubric, load_rubric

EPISODE_OVER = "The episode is over; do not call more tools."

SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
"""SmolLM2-Instruct's default system prompt (its own chat template adds it when a chat has none)."""

SMOLLM2_TOOL_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}{%- set system = messages[0]['content'] %}"
    "{%- else %}{%- set system = '" + SMOLLM2_SYSTEM + "' %}{%- endif %}"
    "{{- '<|im_start|>system\\n' + system }}"
    "{%- if tools %}"
    "{{- '\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\\n<tool_call>\\n{"name": <function-name>, "arguments": '
    "<args-json-object>}\\n</tool_call>' }}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' and loop.first %}"
    "{%- elif message.role == 'assistant' and message.tool_calls %}"
    "{{- '<|im_start|>assistant' }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    '{{- \'\\n<tool_call>\\n{"name": "\' + tool_call.name + \'", "arguments": \' }}'
    "{%- if tool_call.arguments is string %}{{- tool_call.arguments }}{%- else %}{{- tool_call.arguments | tojson }}"
    "{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""A tool-aware ChatML template for SmolLM2-Instruct (the embedded model): its own system prompt, the tools listed
in the system turn, each call as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` and each reply as a
``<tool_response>`` in a user turn. Earlier turns render the same whatever follows (TRL requires it)."""
_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


def _hint(schema: dict[str, Any]) -> Any:
    """The Python type hint transformers maps back to ``schema`` (enums as ``Literal``, type lists as unions)."""
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return Literal[tuple(schema["enum"])]
    kinds = schema.get("type", "string")
    hints = [_TYPES.get(k, str) for k in (kinds if isinstance(kinds, list) else [kinds]) if k != "null"]
    out = hints[0] if hints else str
    for h in hints[1:]:
        out = out | h
    return out


def _docstring(spec: ToolSpec) -> str:
    props = spec.parameters.get("properties", {})
    lines = [spec.description.strip() or spec.name, ""]
    if props:
        lines.append("Args:")
        for name, prop in props.items():
            lines.append(f"    {name}: {(prop.get('description') or name).strip()}")
    return "\n".join(lines)


def _tool_method(spec: ToolSpec) -> Callable[..., str]:
    """A method ``name(self, **arguments) -> str`` that plays the call as one env step and returns the reply."""
    props = spec.parameters.get("properties", {})
    required = set(spec.parameters.get("required", list(props)))
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"return": str}
    for name, prop in props.items():
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"tool {spec.name!r}: argument {name!r} is not a Python identifier; TRL needs one")
        hint = _hint(prop)
        default = inspect.Parameter.empty if name in required else prop.get("default")
        if name not in required and default is None:
            hint = hint | None
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint))
        annotations[name] = hint

    def method(self: RubricGymEnvironment, **arguments: Any) -> str:
        given = {k: v for k, v in arguments.items() if k in required or v is not None}
        return self._call(ToolCall(name=spec.name, arguments=given))

    method.__name__ = method.__qualname__ = spec.name
    method.__doc__ = _docstring(spec)
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    return method


class RubricGymEnvironment:
    """Base of the classes ``environment_factory`` returns; only the env's tools are public methods."""

    env_id: str = ""
    env_kwargs: dict[str, Any] = {}

    def __init__(self) -> None:
        self._env: RubricEnv = make(self.env_id, **self.env_kwargs)
        self._over = False

    def reset(self, seed: int | None = None, task: Task | dict[str, Any] | str | None = None, **row: Any) -> str:
        """Start the row's episode (its ``task``, else one drawn with its ``seed``); returns the task prompt."""
        if isinstance(task, str):
            task = Task.model_validate_json(task)
        obs = self._env.reset_typed(seed=seed, task=task)
        self._over = False
        return obs.messages[-1].content or ""

    def _call(self, call: ToolCall) -> str:
        if self._over:
            return EPISODE_OVER
        obs = self._env.step_typed(Action(text="", tool_call=call, structured=True))
        self._over = obs.done or obs.truncated
        return obs.text + ("\n\n" + EPISODE_OVER if self._over else "")

    @property
    def trajectory(self) -> Trajectory:
        """The episode so far (a property, so TRL does not take it for a tool)."""
        return self._env.trajectory(agent="trl")


def with_tool_template(tokenizer: Any) -> Any:
    """``tokenizer`` (a ChatML one: SmolLM2's, the embedded model's) with ``SMOLLM2_TOOL_TEMPLATE`` and TRL's parser
    of ``<tool_call>`` JSON, so ``GRPOTrainer(..., environment_factory=...)`` accepts it; returns it."""
    from trl.chat_template_utils import qwen3_template  # the parser of this exact <tool_call> JSON format

    if tokenizer.convert_tokens_to_ids("<|im_start|>") in (None, tokenizer.unk_token_id):
        raise ValueError(
            f"{type(tokenizer).__name__} has no <|im_start|> token: SMOLLM2_TOOL_TEMPLATE is ChatML (SmolLM2, Qwen); "
            "give this model a tool-aware template of its own (its chat_template and response_template)"
        )
    tokenizer.chat_template = SMOLLM2_TOOL_TEMPLATE
    tokenizer.response_template = qwen3_template
    return tokenizer


def _env_reward(self: RubricGymEnvironment) -> float:
    """The env's own outcome reward of the episode (0 until it ends)."""
    return float(self._env.outcome.reward)


def environment_factory(env_id: str, *, env_reward: bool = True, **env_kwargs: Any) -> type[RubricGymEnvironment]:
    """A class for ``GRPOTrainer(environment_factory=...)`` over env ``env_id`` (an id or a served env's URL).

    With ``env_reward`` the class has ``get_reward`` (the env's outcome reward, its own reward column in TRL).
    """
    probe = make(env_id, **env_kwargs)
    try:
        probe.reset(seed=0)
        tools = probe.tools()
        real_id = probe.env_id or env_id
    finally:
        probe.close()
    attrs: dict[str, Any] = {
        "env_id": env_id,
        "env_kwargs": dict(env_kwargs),
        "__doc__": f"{real_id} for TRL.",
        "__module__": __name__,
    }
    for spec in tools:
        if spec.name in ("reset", "get_reward", "trajectory") or spec.name.startswith("_"):
            raise ValueError(f"env {real_id}: tool name {spec.name!r} collides with TRL's environment protocol")
        attrs[spec.name] = _tool_method(spec)
    if env_reward:
        attrs["get_reward"] = _env_reward
    name = "".join(p.capitalize() for p in real_id.replace(".", "-").replace("_", "-").split("-")) + "Environment"
    return type(name, (RubricGymEnvironment,), attrs)


def _completion_texts(completion: Any) -> list[str]:
    if isinstance(completion, str):
        return [completion]
    return [m.get("content") or "" for m in completion if m.get("role") == "assistant"]


def reward_funcs(
    env_id: str,
    rubric: Rubric | dict[str, Any] | str | None = None,
    judges: Judge | Sequence[Judge] | None = None,
    **env_kwargs: Any,
) -> list[Callable[..., Any]]:
    """``[fn]`` for ``GRPOTrainer(reward_funcs=...)``: each rollout's rubric total (the env's default rubric when
    ``rubric`` is None), ``None`` for a rollout whose verdicts errored."""
    env_class = type(make(env_id, **env_kwargs))
    loaded = load_rubric(rubric if rubric is not None else env_class.default_rubric())
    prm = ProcessRewardModel(loaded, judges)

    def replay(i: int, completion: Any, kw: dict[str, Any]) -> Trajectory:
        env = make(env_id, **env_kwargs)
        seeds, tasks = kw.get("seed"), kw.get("task")
        task = tasks[i] if tasks is not None else None
        if seeds is None and task is None:
            raise ValueError("reward_funcs without environments needs a `seed` or `task` column to replay episodes")
        env.reset_typed(
            seed=seeds[i] if seeds is not None else None,
            task=Task.model_validate_json(task) if isinstance(task, str) else task,
        )
        for text in _completion_texts(completion):
            obs = env.step_typed(text)
            if obs.done or obs.truncated:
                break
        return env.trajectory(agent="trl")

    async def rubric_reward(
        prompts: list[Any], completions: list[Any], completion_ids: Any = None, environments: Any = None, **kw: Any
    ) -> list[float | None]:
        trajectories = (
            [e.trajectory for e in environments]
            if environments is not None
            else await asyncio.to_thread(lambda: [replay(i, c, kw) for i, c in enumerate(completions)])
        )
        breakdowns = await prm.score_many(trajectories, concurrency=8)
        return [b.total if b.valid else None for b in breakdowns]

    rubric_reward.__name__ = rubric_reward.__qualname__ = f"rubric_{loaded.id}".replace("-", "_")
    return [rubric_reward]


def task_dataset(env_id: str, n: int, *, seed: int = 0, instructions: str | None = None) -> Any:
    """A ``datasets.Dataset`` of ``n`` rows (``prompt`` + ``seed``) for ``environment_factory(env_id)``.

    TRL appends ``reset``'s task prompt to the (empty) user message; the system message says to use the tools.
    """
    from datasets import Dataset  # lazy: only this export/import path needs it (keeps CLI start-up light)

    system = instructions or "Solve the task by calling the tools; finish with the tool that gives the answer."
    return Dataset.from_list(
        [
            {"prompt": [{"role": "system", "content": system}, {"role": "user", "content": ""}], "seed": seed + i}
            for i in range(n)
        ]
    )
