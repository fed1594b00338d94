"""Agents files: the contestants of an arena (and the ``--agent`` of ``rubricgym eval``).

```yaml
agents:
  - {name: oracle, kind: scripted, agent: oracle}                 # each env's scripted agent of that name
  - {name: base, kind: local, model: smollm2-135m-instruct}       # a known model name or a HF model directory
  - {name: step40, kind: checkpoint, path: runs/train}            # a run dir (newest checkpoint) or a checkpoint dir
  - {name: vllm, kind: openai, base_url: "http://127.0.0.1:8000/v1", model: smollm2-135m-instruct}
  - {name: noisy, kind: scripted, agent: "noisy(p=0.5):oracle"}   # wrapper specs as in `rubricgym run --agent`
  - {name: noisy-tts, kind: scripted, agent: "noisy(p=0.5):oracle", tts: {k: 4, beta: 10, keep: 0.5}}
```

``tts`` wraps any entry in PRM-guided test-time scaling (``rewards.search.PRMGuidedAgent``): k candidate actions
per turn, scored by look-ahead with the suite entry's rubric, the best ``keep`` fraction kept, one sampled
∝ exp(β·u). A model entry with ``tts`` must sample (``temperature`` > 0) or its k candidates are all the same.

``preflight`` checks every entry before any episode or match runs (the scripted agent exists for every env of
the suite, the model directory or checkpoint exists, the endpoint answers ``/models``) and raises one
``AgentsFileError`` naming each bad entry and what to do.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rubricgym.core.agent import Agent
from rubricgym.core.jsonl import read_text
from rubricgym.rewards.search import TTSConfig, parse_wrapper, unwrap, wrap_agent

KINDS = ("scripted", "local", "checkpoint", "openai")


class AgentsFileError(ValueError):
    """An agents file or entry that cannot be used; the message names the file and entry."""


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
    seed: int = 0
    tts: TTSConfig | None = None
    """PRM-guided test-time scaling around this agent: ``{k: 4, beta: 10, keep: 0.5}``."""

    @model_validator(mode="after")
    def _tts_samples(self) -> _Spec:
        if self.tts is not None and self.tts.k > 1 and getattr(self, "temperature", None) == 0.0:
            raise ValueError(
                f"tts draws k={self.tts.k} candidates per turn but temperature is 0, so they are all the same: "
                "set temperature > 0 (1.0 samples the policy itself)"
            )
        return self


class ScriptedSpec(_Spec):
    kind: Literal["scripted"] = "scripted"
    agent: str = ""
    """The env's scripted agent (``rubricgym envs`` lists them), optionally wrapped as in ``rubricgym run
    --agent`` (``noisy(p=0.5):oracle``, ``tts(k=4):oracle``); default: ``name``."""

    @field_validator("agent")
    @classmethod
    def _wrappers(cls, v: str) -> str:
        unwrap(v)  # a bad wrapper setting fails here, naming it
        return v

    def needs(self) -> list[str]:
        """The env's scripted agents this entry plays with (the noisy wrapper draws on ``random``)."""
        kinds, inner = unwrap(self.agent or self.name)
        return [inner, *(["random"] if "noisy" in kinds else [])]


class _ModelSpec(_Spec):
    temperature: float = Field(0.0, ge=0.0)
    """Arena default: greedy, so an agent's play is reproducible."""
    max_new_tokens: int = Field(96, ge=1)
    response_prefix: str = ""
    """Prefill every assistant turn (e.g. ``<tool_call>{"name": "``), as in the training config."""


class LocalSpec(_ModelSpec):
    kind: Literal["local"] = "local"
    model: str = "smollm2-135m-instruct"


class CheckpointSpec(_ModelSpec):
    kind: Literal["checkpoint"] = "checkpoint"
    path: str
    """A training run directory (its newest checkpoint) or one ``checkpoints/step-N`` directory."""


class OpenAISpec(_Spec):
    kind: Literal["openai"] = "openai"
    base_url: str
    model: str
    temperature: float = Field(0.0, ge=0.0)
    max_tokens: int = Field(512, ge=1)
    native_tools: bool = False
    api_key_env: str | None = None
    """Name of an environment variable holding the API key (never the key itself in the file)."""


AgentSpec = Annotated[ScriptedSpec | LocalSpec | CheckpointSpec | OpenAISpec, Field(discriminator="kind")]


class AgentsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agents: list[AgentSpec] = Field(min_length=2)


def parse_agents(data: Any, source: str) -> list[ScriptedSpec | LocalSpec | CheckpointSpec | OpenAISpec]:
    """Validate an agents mapping; an unknown kind or bad field names the entry."""
    if not isinstance(data, dict) or not isinstance(data.get("agents"), list):
        raise AgentsFileError(f"{source}: expected a mapping with an 'agents' list")
    names: set[str] = set()
    for k, entry in enumerate(data["agents"]):
        label = f"{source}: agents[{k}]" + (f" ({entry.get('name')})" if isinstance(entry, dict) else "")
        if not isinstance(entry, dict):
            raise AgentsFileError(f"{label}: expected a mapping with 'name' and 'kind'")
        kind = entry.get("kind")
        if kind not in KINDS:
            raise AgentsFileError(f"{label}: unknown agent kind {kind!r}; use one of {', '.join(KINDS)}")
        if str(entry.get("name")) in names:
            raise AgentsFileError(f"{label}: the name is used twice; agent names must be unique")
        names.add(str(entry.get("name")))
    try:
        return AgentsFile.model_validate(data).agents
    except ValidationError as e:
        lines = []
        for err in e.errors():
            loc = err["loc"]
            at = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else None
            where = f"agents[{at}] ({data['agents'][at].get('name')})" if at is not None else "agents"
            field = ".".join(str(p) for p in loc[3:] if not isinstance(p, int)) or ".".join(map(str, loc))
            lines.append(f"{source}: {where}: field '{field}': {err['msg']}")
        raise AgentsFileError("\n".join(lines)) from None


def load_agents(path: str | Path) -> list[ScriptedSpec | LocalSpec | CheckpointSpec | OpenAISpec]:
    p = Path(path)
    if not p.exists():
        raise AgentsFileError(f"{p}: no such agents file")
    try:
        data = yaml.safe_load(read_text(p, AgentsFileError))
    except yaml.YAMLError as e:
        raise AgentsFileError(f"{p}: not valid YAML: {e}") from None
    return parse_agents(data, str(p))


def checkpoint_dir(path: str) -> Path | None:
    """The model directory a checkpoint entry names: the path itself, or a run dir's newest checkpoint."""
    p = Path(path).expanduser()
    if (p / "config.json").exists():
        return p
    root = p / "checkpoints"
    done = sorted(c for c in root.glob("step-*") if (c / "config.json").exists()) if root.is_dir() else []
    return done[-1] if done else None


async def _endpoint_problem(spec: OpenAISpec) -> str | None:
    import httpx

    try:
        async with httpx.AsyncClient(timeout=5.0) as client:
            resp = await client.get(f"{spec.base_url.rstrip('/')}/models")
    except httpx.HTTPError as e:
        return f"endpoint {spec.base_url} is unreachable ({type(e).__name__}); start the server or fix base_url"
    if resp.status_code >= 400:
        return f"endpoint {spec.base_url}/models answered HTTP {resp.status_code}"
    return None


async def preflight(specs: list[Any], env_ids: list[str], source: str = "agents") -> None:
    """Fail (``AgentsFileError``) before any match if an entry cannot play every env of the suite."""
    from rubricgym.agents.models import KNOWN_MODELS, is_model_dir
    from rubricgym.core.registry import env_agents

    problems = []
    for k, s in enumerate(specs):
        label = f"{source}: agents[{k}] ({s.name})"
        if isinstance(s, ScriptedSpec):
            for env_id in dict.fromkeys(env_ids):
                have = env_agents(env_id)
                problems += [
                    f"{label}: env {env_id} has no scripted agent {want!r} (it has: {', '.join(sorted(have))})"
                    for want in s.needs()
                    if want not in have
                ]
        elif isinstance(s, LocalSpec):
            if s.model.lower() not in KNOWN_MODELS and not is_model_dir(Path(s.model).expanduser()):
                problems.append(
                    f"{label}: model {s.model!r} is neither a known model "
                    f"({', '.join(KNOWN_MODELS)}) nor a directory with config.json"
                )
        elif isinstance(s, CheckpointSpec):
            if checkpoint_dir(s.path) is None:
                problems.append(
                    f"{label}: no checkpoint at {s.path!r} (want a run dir with checkpoints/step-N "
                    "or a checkpoint dir with config.json); train first or fix the path"
                )
        elif isinstance(s, OpenAISpec) and (why := await _endpoint_problem(s)):
            problems.append(f"{label}: {why}")
    if problems:
        raise AgentsFileError("\n".join(problems))


class AgentFactory:
    """Builds each spec's agent for an env, sharing one loaded model per local/checkpoint entry."""

    def __init__(self, specs: list[Any]):
        self.specs = {s.name: s for s in specs}
        self._models: dict[str, Agent] = {}

    def agent(self, name: str, env_id: str, env_kwargs: dict[str, Any] | None = None, rubric: Any = None) -> Agent:
        """``name``'s agent for ``env_id``; with ``tts`` wrapped in PRM-guided search that looks ahead in the env
        built with ``env_kwargs`` and scores with ``rubric`` (default: the env's)."""
        s = self.specs[name]
        base = self._scripted(s, env_id, env_kwargs, rubric) if isinstance(s, ScriptedSpec) else self._model(s)
        if s.tts is None:
            return base
        from rubricgym.rewards.search import PRMGuidedAgent

        return PRMGuidedAgent(base, env_id, **s.tts.model_dump(), rubric=rubric, env_kwargs=env_kwargs, seed=s.seed)

    @staticmethod
    def _scripted(s: ScriptedSpec, env_id: str, env_kwargs: dict[str, Any] | None, rubric: Any) -> Agent:
        from rubricgym.core.registry import env_agents

        agents = env_agents(env_id)
        want = s.agent or s.name
        wrapped = wrap_agent(
            env_id, want, lambda inner: agents[inner](seed=s.seed), s.seed, rubric=rubric, env_kwargs=env_kwargs
        )
        return wrapped or agents[want](seed=s.seed)

    def _model(self, s: Any) -> Agent:
        import os

        name = s.name
        if name in self._models:
            return self._models[name]
        if isinstance(s, OpenAISpec):
            from rubricgym.agents.openai import OpenAIAgent

            key = os.environ.get(s.api_key_env) if s.api_key_env else None
            built: Agent = OpenAIAgent(
                s.base_url,
                s.model,
                api_key=key,
                temperature=s.temperature,
                max_tokens=s.max_tokens,
                native_tools=s.native_tools,
                seed=s.seed,
            )
        else:
            model = s.model if isinstance(s, LocalSpec) else str(checkpoint_dir(s.path))
            from rubricgym.agents.local import LocalAgent

            built = LocalAgent(
                model,
                temperature=s.temperature,
                max_new_tokens=s.max_new_tokens,
                seed=s.seed,
                response_prefix=s.response_prefix,
            )
        self._models[name] = built
        return built

    async def aclose(self) -> None:
        for a in self._models.values():
            close = getattr(a, "aclose", None)
            if close is not None:
                await close()


def _cli_name(agent: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "-", agent).strip("-_.+") or "agent"


def _tts_from_cli(agent: str, settings: dict[str, Any], inner: str, base_url: str | None, model: str | None) -> Any:
    spec = spec_from_cli(inner, base_url, model)
    if spec.tts is not None:
        raise AgentsFileError(f"--agent {agent!r}: one tts(...) wrapper per agent")
    update: dict[str, Any] = {"name": _cli_name(agent), "tts": settings}
    if getattr(spec, "temperature", None) == 0.0:
        update["temperature"] = 1.0  # PRM-guided search samples the policy itself (pi at temperature 1)
    return type(spec).model_validate({**spec.model_dump(), **update})


def spec_from_cli(agent: str, base_url: str | None = None, model: str | None = None) -> Any:
    """``--agent`` of ``rubricgym eval``: ``local``, ``openai`` (with ``--base-url``/``--model``),
    ``checkpoint:PATH`` or a scripted agent name, each optionally wrapped as ``rubricgym run --agent`` takes it:
    ``tts(k=4,beta=10,keep=0.5):NAME`` (any kind; a greedy model then samples at temperature 1) and
    ``noisy(p=0.5):NAME`` (scripted agents)."""
    try:
        parsed = parse_wrapper(agent)
        if parsed is not None and parsed[0] == "tts":
            return _tts_from_cli(agent, parsed[1], parsed[2], base_url, model)
        inner = unwrap(agent)[1]
    except (ValueError, ValidationError) as e:
        raise AgentsFileError(f"--agent: {e}") from None
    if (inner in ("openai", "local") or inner.startswith("checkpoint:")) and inner != agent:
        raise AgentsFileError(f"--agent {agent!r}: noisy(...) wraps scripted agents only")
    if agent == "openai":
        if not base_url or not model:
            raise AgentsFileError("--agent openai needs --base-url and --model")
        return OpenAISpec(name="openai", base_url=base_url, model=model)
    if agent == "local":
        return LocalSpec(name="local", model=model or "smollm2-135m-instruct")
    if agent.startswith("checkpoint:"):
        return CheckpointSpec(name="checkpoint", path=agent.split(":", 1)[1])
    return ScriptedSpec(name=_cli_name(agent), agent=agent)
