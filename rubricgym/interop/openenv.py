"""A stock OpenEnv (``openenv`` 0.10) server's env as a rubricgym env: ``rubricgym.make("ws://host:port")``.

``rubricgym.make`` and ``rubricgym run URL`` use this for any server that is not ``rubricgym serve`` (whose
``/metadata`` names an ``env_id``). The env's action/observation schemas become rubricgym's text contract:

- tools: the server's MCP tools (``POST /mcp`` ``tools/list``) where it lists some, each call sent as OpenEnv's
  ``call_tool`` action; otherwise one tool, ``act``, whose arguments are the action schema's fields (the echo
  env's ``act(message)``), sent as the action;
- observations: each non-empty observation field as a ``name: value`` line; the reset observation is the task
  prompt the agent reads first;
- tasks: the server's Task API (``/{env}/tasks``) where it has one, played with ``reset(split, index)``;
  otherwise seeded tasks, played with ``reset(seed)``;
- rewards: OpenEnv's per-step rewards are the steps' rewards; the default rubric has one criterion, the
  ``env_reward`` check (the episode's summed OpenEnv reward, clipped to [0, 1]). ``rubric=FILE`` (``--env-arg
  rubric=FILE``) scores every task with the user's rubric instead (criteria may use ``env_reward`` and
  ``episode_done``, or LLM judges).

The session is OpenEnv's own ``GenericEnvClient`` over ``WS /ws`` (one connection = one server-side env).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, ClassVar

import httpx
import numpy as np

from rubricgym.core.agent import SeededAgent
from rubricgym.core.checks import check, check_set
from rubricgym.core.env import RubricEnv, ToolOutput
from rubricgym.core.registry import EnvSpec
from rubricgym.core.rubric import Rubric
from rubricgym.core.types import CheckResult, Message, Task, ToolCall, ToolSpec, Trajectory
from rubricgym.server.remote import remote_spec

ACT_TOOL = "act"
_REWARD_KEY = "openenv_reward"
_DONE_KEY = "openenv_done"


@check(description="The episode's summed OpenEnv reward, clipped to [0, 1] (met when above 0).")
def env_reward(traj: Trajectory, step: int | None = None) -> CheckResult:
    total = sum(float(s.info.get(_REWARD_KEY) or 0.0) for s in traj.steps)
    score = min(1.0, max(0.0, total))
    return CheckResult(score=score, met=total > 0, rationale=f"OpenEnv reward summed over the episode: {total:g}")


@check(description="The OpenEnv server ended the episode (done) before the step limit.")
def episode_done(traj: Trajectory, step: int | None = None) -> CheckResult:
    done = any(s.info.get(_DONE_KEY) for s in traj.steps)
    return CheckResult.of(done, "the server said done" if done else "the episode ran out of steps")


CHECKS = check_set(env_reward, episode_done)


def http_base(url: str) -> str:
    return url.replace("ws://", "http://", 1).replace("wss://", "https://", 1).rstrip("/")


def _action_tool(schema: dict[str, Any]) -> ToolSpec:
    props = {k: v for k, v in schema.get("properties", {}).items() if k != "metadata"}
    params: dict[str, Any] = {"type": "object", "properties": props}
    required = [r for r in schema.get("required", []) if r in props]
    if required:
        params["required"] = required
    if "$defs" in schema:
        params["$defs"] = schema["$defs"]
    doc = schema.get("description") or schema.get("title") or "the environment's action"
    return ToolSpec(name=ACT_TOOL, description=f"Take one action in the environment: {doc}", parameters=params)


def render(observation: Any) -> str:
    """An OpenEnv observation as text: ``name: value`` lines of its non-empty fields (a string field alone)."""
    if not isinstance(observation, dict):
        return str(observation)
    fields = {k: v for k, v in observation.items() if k not in ("metadata", "done", "reward") and v not in ("", None)}
    if len(fields) == 1 and isinstance(next(iter(fields.values())), str):
        return str(next(iter(fields.values())))
    return "\n".join(
        f"{k}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}" for k, v in fields.items()
    )


def placeholder(schema: Any, rng: np.random.Generator) -> Any:
    """A value of the JSON-schema type ``schema`` names, for probe agents that only show an env runs."""
    if not isinstance(schema, dict):
        return f"probe {int(rng.integers(1000))}"
    if "enum" in schema and schema["enum"]:
        return schema["enum"][int(rng.integers(len(schema["enum"])))]
    kind = schema.get("type")
    if kind == "integer":
        return int(rng.integers(0, 10))
    if kind == "number":
        return float(rng.integers(0, 10))
    if kind == "boolean":
        return bool(rng.integers(2))
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return f"probe {int(rng.integers(1000))}"


class ProbeAgent(SeededAgent):
    """A baseline that calls a random tool with schema-shaped placeholder arguments each turn: it shows a stock
    env runs and scores end to end (``rubricgym run URL --agent probe``), never that it can be solved."""

    name = "probe"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str | Message:
        spec = tools[int(self.rng.integers(len(tools)))]
        props = spec.parameters.get("properties", {})
        args = {k: placeholder(v, self.rng) for k, v in props.items() if isinstance(v, dict)}
        return f"<tool_call>{json.dumps({'name': spec.name, 'arguments': args})}</tool_call>"


class OpenEnvEnv(RubricEnv):
    """An env on a stock OpenEnv server; build one with ``rubricgym.make(url)`` (see the module doc)."""

    url: ClassVar[str] = ""
    env_name: ClassVar[str] = ""
    action_schema: ClassVar[dict[str, Any]] = {}
    remote_tools: ClassVar[list[ToolSpec]] = []
    mcp: ClassVar[bool] = False
    task_api: ClassVar[bool] = False
    stages = ("act",)
    default_max_steps = 20
    check_set = CHECKS
    scripted_agents = {"probe": "rubricgym.interop.openenv:ProbeAgent"}

    def __init__(self, max_steps: int | None = None, render_mode: str | None = None, rubric: str | None = None):
        if not self.url:
            raise TypeError("use rubricgym.make(url): an OpenEnvEnv class is bound to a server URL")
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        self.rubric = Rubric.load(rubric).model_dump(mode="json") if rubric else None
        self._client: Any = None

    @classmethod
    def default_rubric(cls) -> Rubric:
        return Rubric.model_validate(
            {
                "id": f"openenv-{cls.env_name}",
                "version": "1",
                "criteria": [
                    {
                        "id": "env_reward",
                        "text": "The environment rewarded the episode.",
                        "level": "essential",
                        "scope": "trajectory",
                        "check": "env_reward",
                    }
                ],
            }
        )

    # ---- tasks -------------------------------------------------------------------------------------------

    def sample_task(self, rng: np.random.Generator, split: str = "train") -> Task:
        return self._task_of(split, seed=int(rng.integers(2**31)), index=None, payload=None)

    def task_set(self, n: int, seed: int = 0, split: str = "train") -> list[Task]:
        """The server's Task API tasks of ``split`` (the first ``n``), else ``n`` seeded tasks from ``seed``."""
        if self.task_api:
            r = httpx.post(f"{http_base(self.url)}/{self.env_name}/tasks", json={"split": split}, trust_env=False)
            if r.status_code == 200:
                listed = r.json().get("tasks", [])[:n]
                return [self._task_of(split, None, i, t) for i, t in enumerate(listed)]
        return [self._task_of(split, seed + i, None, None) for i in range(n)]

    def _task_of(self, split: str, seed: int | None, index: int | None, payload: Any) -> Task:
        reset = {"split": split, "index": index} if index is not None else {"seed": seed}
        key = json.dumps([self.url, reset], sort_keys=True)
        return Task(
            id=f"{self.env_name}-{hashlib.sha1(key.encode()).hexdigest()[:10]}",
            env_id=self.env_id,
            split=split,
            prompt="",
            params={"reset": reset, **({"task": payload} if payload is not None else {})},
            rubric=self.rubric,
        )

    # ---- episodes ----------------------------------------------------------------------------------------

    def begin(self, task: Task) -> None:
        from openenv.core.generic_client import GenericEnvClient

        if self._client is None:
            self._client = GenericEnvClient(base_url=http_base(self.url)).sync()
            self._client.connect()
        result = self._client.reset(**task.params.get("reset", {}))
        self._task = task.model_copy(update={"prompt": render(result.observation)})

    def tools(self) -> list[ToolSpec]:
        return self.remote_tools

    def call_tool(self, call: ToolCall) -> ToolOutput:
        if self.mcp:
            action = {"type": "call_tool", "tool_name": call.name, "arguments": call.arguments}
        else:
            action = dict(call.arguments)
        result = self._client.step(action)
        reward = float(result.reward or 0.0)
        return ToolOutput(
            text=render(result.observation),
            done=bool(result.done),
            reward=reward,
            info={_REWARD_KEY: reward, _DONE_KEY: bool(result.done)},
        )

    def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            client.close()
        super().close()


def openenv_class(url: str) -> type[OpenEnvEnv]:
    """An ``OpenEnvEnv`` subclass bound to the stock OpenEnv server at ``url`` (its name, schema and tools)."""
    base = http_base(url)
    with httpx.Client(timeout=10.0, trust_env=False) as http:
        try:
            meta = http.get(f"{base}/metadata").json()
            schema = http.get(f"{base}/schema").json()
        except (httpx.HTTPError, ValueError) as e:
            raise ConnectionError(f"no OpenEnv server at {url}: {e}") from e
        name = str(meta.get("name") or "openenv")
        tools: list[ToolSpec] = []
        mcp = False
        action = schema.get("action") or {}
        if action.get("title") in ("CallToolAction", "ListToolsAction", "Action"):
            listed = http.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
            found = listed.json().get("result", {}).get("tools", []) if listed.status_code == 200 else []
            tools = [
                ToolSpec(name=t["name"], description=t.get("description") or "", parameters=_params(t)) for t in found
            ]
            mcp = bool(tools)
        if not mcp:
            tools = [_action_tool(action)]
        listed_envs = http.get(f"{base}/list_environments")
        task_api = listed_envs.status_code == 200 and bool(listed_envs.json())
        if task_api:
            name = str(listed_envs.json()[0])  # the Task API's routes are named after it, not /metadata's name
    env_id = url.rstrip("/")  # the id a run records resolves to this class again (score, show, eval)
    title = "".join(p.capitalize() for p in "".join(c if c.isalnum() else " " for c in name).split())
    attrs: dict[str, Any] = {
        "url": url.rstrip("/"),
        "env_name": name,
        "env_id": env_id,
        "action_schema": action,
        "remote_tools": tools,
        "mcp": mcp,
        "task_api": task_api,
        "__doc__": f"The OpenEnv env {name!r} served at {url}.",
        "__module__": __name__,
    }
    return type(f"OpenEnv{title}", (OpenEnvEnv,), attrs)


def _params(tool: dict[str, Any]) -> dict[str, Any]:
    schema = tool.get("inputSchema") or tool.get("input_schema") or {}
    return schema if isinstance(schema, dict) and schema else {"type": "object", "properties": {}}


def is_rubricgym_server(url: str) -> bool:
    """Whether ``url`` is ``rubricgym serve`` (its ``/metadata`` names an ``env_id``) rather than stock OpenEnv."""
    try:
        r = httpx.get(f"{http_base(url)}/metadata", timeout=10.0, trust_env=False)
    except httpx.HTTPError:
        return True  # unreachable: let the rubricgym client say so
    if r.status_code == 401:
        return True  # only rubricgym serve asks for our bearer token
    try:
        return "env_id" in r.json()
    except ValueError:
        return True


def openenv_spec(url: str) -> EnvSpec:
    """The registry's spec of the env at ``url``: what ``rubricgym.make(url)`` builds."""
    try:
        cls = openenv_class(url)
    except ConnectionError as e:
        raise KeyError(str(e)) from e
    return EnvSpec(id=url, entry_point=cls, description=f"OpenEnv env {cls.env_name!r} served at {url}")


def url_spec(url: str) -> EnvSpec:
    """The spec of the env at ``url`` (the URL handler ``import rubricgym`` registers): a ``rubricgym serve``
    server is driven as it serves its env (``server.remote``), a stock OpenEnv server through ``openenv_spec``."""
    return remote_spec(url) if is_rubricgym_server(url) else openenv_spec(url)
