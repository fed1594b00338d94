"""A verifiers (0.4, ``verifiers.v1``) environment as a rubricgym env: ``rubricgym.make("verifiers:<taskset-id>")``.

The taskset id is what ``vf-eval`` takes (an importable module whose ``__all__`` exports one ``vf.Taskset``, and
optionally one ``vf.Env``); env arguments (``make(id, **kw)``, ``--env-arg KEY=VALUE``) are the taskset's config
fields, ``vf_env=ID`` picks a named verifiers env (``--env.id``) and ``rubric=FILE`` scores with the user's rubric.
The mapping onto rubricgym's text contract:

- tasks: the taskset's rows (``Taskset.load()``, in order; ``seed > 0`` shuffles them with verifiers' own
  ``shuffle(seed)``). The prompt is the task's prompt; every field the taskset's ``TaskData`` adds to verifiers'
  base fields (``answer``, ``info``, ...) goes to ``Task.hidden`` and never reaches the agent;
- the episode: the verifiers env's own ``run(task, agents)`` plays it, with its one agent seat bridged to the
  rubricgym agent. Each ``turn`` the env takes (``Interaction.turn(text)``; for a plain taskset, the one
  segment ``agent.run(task)`` runs on the prompt) is an observation; the agent's reply to it is a call of the
  ``answer`` tool. A single-turn env's episode is that one answer; a multi-turn env answers with its next user
  message (its env response) until its ``run`` returns;
- tools: the task's and taskset's ``vf.Toolset`` tools (``@vf.tool`` methods), named as verifiers' harnesses
  name them (``<server>_<tool>``), their schemas from the MCP SDK's own ``MCPServer`` listing; each call runs the
  toolset's method in-process through that server (verifiers launches it as an MCP server process instead);
- rewards: when the env's ``run`` ends, the task's own scoring (``Task.score``: its ``@vf.reward`` functions and
  any rewards the env recorded) runs on a ``vf.Trace`` of the conversation, tool calls and results included. Its
  weighted reward (``trace.reward``) is the env reward; each reward is kept in the last step's private ``info``.
  The default rubric has one criterion per ``@vf.reward`` function (check ``reward_<name>``, the verifiers
  weight as its weight), or the ``verifiers_reward`` check (the weighted reward) when there are none.

Not bridged: envs with more than one agent seat (e.g. ``user-sim``, whose user is a second model), tasks that need
a sandbox runtime (``NEEDS_CONTAINER``, a ``setup`` hook), toolsets with a typed ``State`` (their state lives in
verifiers' interception server), and reward functions that need a runtime (verifiers skips those offline too).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from rubricgym.core.agent import SeededAgent, TaskAgent, tool_call
from rubricgym.core.aio import run_sync
from rubricgym.core.checks import NamedCheck, check, check_set
from rubricgym.core.env import RubricEnv, ToolOutput
from rubricgym.core.registry import EnvSpec
from rubricgym.core.rubric import Rubric
from rubricgym.core.tools import ToolError
from rubricgym.core.types import CheckResult, Message, Task, ToolCall, ToolSpec, Trajectory
from rubricgym.interop.openenv import placeholder

PREFIX = "verifiers:"
ANSWER_TOOL = "answer"
ENV_ARG = "vf_env"
"""The env argument naming a verifiers env (``--env.id``) for the taskset; every other argument is a taskset field."""
_INFO = "verifiers"
"""The key of the last step's private ``info`` holding the episode's verifiers rewards."""
_BASE_FIELDS = ("idx", "id", "name", "description", "prompt", "system_prompt")
"""verifiers' own ``TaskData`` fields a task keeps public (in ``params``); the taskset's own fields are hidden."""


# ---- loading --------------------------------------------------------------------------------------------------


def _vf() -> Any:
    try:
        import verifiers.v1 as vf
    except ImportError as e:
        raise ImportError(f"verifiers envs need the verifiers package: pip install 'rubricgym[interop]' ({e})") from e
    return vf


def load_vf_env(taskset_id: str, args: Mapping[str, Any]) -> Any:
    """The verifiers env of ``taskset_id`` configured with ``args`` (taskset fields, plus ``vf_env``)."""
    vf = _vf()
    from verifiers.v1.configs.agent import agent_config_fields

    args = dict(args)
    data: dict[str, Any] = {"taskset": {"id": taskset_id, **args}}
    if ENV_ARG in args:
        data["id"] = data["taskset"].pop(ENV_ARG)
    try:
        config = vf.resolve_env_config(data)
    except Exception as e:  # pydantic's ValidationError names the field; say where it came from
        raise ValueError(
            f"verifiers taskset {taskset_id!r}: bad env arguments {args}: {e}. Env arguments are the taskset's "
            f"config fields (--env-arg FIELD=VALUE)"
        ) from e
    with _quiet_harness_warning():
        env = vf.load_environment(config)
    seats = list(agent_config_fields(config))
    if len(seats) != 1:
        raise ValueError(
            f"verifiers env {type(env).__name__} has agent seats {seats}; rubricgym bridges envs with one seat (the "
            f"agent under test): run multi-agent envs with vf-eval"
        )
    task_cls = type(env.taskset).task_type()
    if task_cls.NEEDS_CONTAINER or task_cls.setup is not vf.Task.setup:
        raise ValueError(
            f"verifiers task {task_cls.__name__} needs a runtime (a container, or a setup hook that prepares one); "
            f"rubricgym runs verifiers tools in-process: run it with vf-eval"
        )
    return env


class _HarnessWarning(logging.Filter):
    """Drops verifiers' warning that its default harness would run code locally: the bridge never runs a harness
    (the rubricgym agent plays the seat), so the warning would mislead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "is running in the subprocess runtime" not in record.getMessage()


@contextlib.contextmanager
def _quiet_harness_warning() -> Iterator[None]:
    logger, only = logging.getLogger("verifiers.v1.env"), _HarnessWarning()
    logger.addFilter(only)
    try:
        yield
    finally:
        logger.removeFilter(only)


@functools.cache
def _taskset_class(taskset_id: str) -> type:
    _vf()
    from verifiers.v1.utils.loaders import taskset_class

    try:
        return taskset_class(taskset_id)
    except ModuleNotFoundError as e:
        raise KeyError(
            f"no verifiers taskset {taskset_id!r}: {str(e).rstrip('.')}. The id is an importable module exporting one "
            f"vf.Taskset (what vf-eval takes); install its package or put it on PYTHONPATH"
        ) from None


@dataclass(frozen=True)
class RewardFn:
    """A ``@vf.reward`` method of a task class: its name and verifiers weight."""

    name: str
    weight: float


def reward_fns(task_cls: type) -> list[RewardFn]:
    """The ``@vf.reward`` methods ``task_cls`` declares (config-plugged rewards are known only per run)."""
    names = {n for klass in task_cls.__mro__ for n, fn in vars(klass).items() if callable(fn) and hasattr(fn, "reward")}
    out = []
    for name in sorted(names):
        fn = getattr(task_cls, name)
        if hasattr(fn, "reward"):  # an undecorated override hides a decorated base method, as in verifiers
            out.append(RewardFn(name, float(getattr(fn, "_vf_weight", 1.0))))
    return out


# ---- checks ---------------------------------------------------------------------------------------------------


def episode_rewards(traj: Trajectory) -> dict[str, Any]:
    """The verifiers scoring recorded on the episode's last step (raises when the episode never got one)."""
    for step in reversed(traj.steps):
        if _INFO in step.info:
            return dict(step.info[_INFO])
    raise ValueError(
        "the verifiers env never scored this episode: it ended on a malformed action before the env's run finished"
    )


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


@check(description="The verifiers weighted reward (trace.reward), clipped to [0, 1] (met when above 0).")
def verifiers_reward(traj: Trajectory, step: int | None = None) -> CheckResult:
    scored = episode_rewards(traj)
    if scored["errors"]:
        raise ValueError(f"verifiers scoring failed: {'; '.join(scored['errors'])}")
    total = float(scored["reward"])
    return CheckResult(score=_clip(total), met=total > 0, rationale=f"verifiers reward {total:g}", details=scored)


def reward_check(name: str) -> NamedCheck:
    """The check ``reward_<name>``: the score of the verifiers reward ``name``, clipped to [0, 1]."""

    def fn(traj: Trajectory, step: int | None = None) -> CheckResult:
        scored = episode_rewards(traj)
        reward = scored["rewards"].get(name)
        if reward is None:
            why = "; ".join(scored["errors"]) or "it did not run (it needs a runtime, or the trace failed)"
            raise ValueError(f"verifiers reward {name!r} has no score: {why}")
        score = float(reward["score"])
        return CheckResult(score=_clip(score), met=score > 0, rationale=f"verifiers reward {name} = {score:g}")

    return NamedCheck(name=f"reward_{name}", fn=fn, description=f"The verifiers reward function {name!r}.")


# ---- the bridge: the verifiers env's agent seat played by the rubricgym agent --------------------------------


@dataclass
class _Turn:
    """A turn the verifiers env is waiting on: the text the agent observes, and the reply it gets back."""

    text: str
    reply: asyncio.Future[tuple[list[Any], bool]]
    """The agent's segment (its tool calls and results, then its answer) and whether its run is over instead."""


@dataclass
class _Episode:
    """One verifiers episode in progress on the bridge's loop: ``Env.run`` waits on ``_Turn``s the rubricgym agent
    answers; ``events`` carries each turn (or ``None``: the run is over) to the rubricgym side."""

    env: Any
    task: Any
    events: asyncio.Queue[_Turn | None] = field(default_factory=asyncio.Queue)
    traces: list[Any] = field(default_factory=list)
    error: BaseException | None = None
    segment: list[Any] = field(default_factory=list)
    """The assistant tool calls and tool results of the segment the agent is playing (before its answer)."""
    pending: _Turn | None = None

    async def drive(self) -> None:
        vf = _vf()
        try:
            agents = vf.Agents(self.env.config, make=lambda name, cfg: _SeatAgent(self, name, cfg))
            await self.env.setup(agents)
            await self.env.run(self.task, agents)
            if not self.traces:
                raise ValueError(f"{type(self.env).__name__}.run() ran no agent: every episode needs one")
            episode = vf.Episode(
                env=vf.EnvInfo(id=self.env.config.env_id),
                task=vf.TraceTask(type=type(self.task).__name__, data=self.task.data, key=self.task.key),
                traces=self.traces,
            )
            await self.env.finalize(self.task, episode)
        except Exception as e:  # the env's own failure: reported to the rubricgym side, never swallowed
            self.error = e
        finally:
            await self.events.put(None)

    async def ask(self, text: str) -> tuple[list[Any], bool]:
        """Show ``text`` to the agent and wait for its segment, and whether the agent's episode ended instead."""
        turn = _Turn(text, asyncio.get_running_loop().create_future())
        await self.events.put(turn)
        return await turn.reply

    def result(self) -> dict[str, Any]:
        """The finished episode's scoring, as the last step's ``info`` keeps it."""
        errors = [f"{type(self.error).__name__}: {self.error}"] if self.error else []
        rewards: dict[str, Any] = {}
        metrics: dict[str, Any] = {}
        total = 0.0
        for trace in self.traces:
            errors += [f"{e.type}: {e.message}" for e in trace.errors]
            for name, reward in trace.rewards.items():
                rewards[name] = None if reward is None else {"score": reward.score, "weight": reward.weight}
            metrics.update(trace.metrics)
            total += trace.reward
        return {"reward": total, "rewards": rewards, "metrics": metrics, "errors": errors}


class _SeatAgent:
    """The verifiers env's agent seat (``agents.<seat>``): ``run`` and ``interaction`` as ``vf.Agent`` has them,
    each segment played by the rubricgym agent."""

    def __init__(self, episode: _Episode, name: str, config: Any):
        self.episode, self.name, self.config = episode, name, config
        self.trainable = True

    async def run(self, task: Any, **_: Any) -> Any:
        async with self.interaction(task) as exchange:
            await exchange.turn(None if task.data.prompt is not None else "")
        return exchange.trace

    @contextlib.asynccontextmanager
    async def interaction(self, task: Any, **_: Any) -> AsyncIterator[_Exchange]:
        exchange = _Exchange(self, task)
        try:
            yield exchange
        finally:
            await exchange.close()


class _Exchange:
    """``vf.Interaction`` over the bridge: each ``turn`` is one observation and the agent's segment answering it;
    closing it scores the trace with the task's own ``Task.score``."""

    def __init__(self, seat: _SeatAgent, task: Any):
        vf = _vf()
        self.seat, self.task = seat, task
        self.trace = vf.Trace(
            task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
            agent=vf.AgentInfo(config=seat.config, name=seat.name, trainable=seat.trainable),
        )
        self._started = self._over = self._closed = False
        if task.data.system_prompt:
            self._add(vf.SystemMessage(content=task.data.system_prompt))

    def _add(self, message: Any, sampled: bool = False) -> None:
        parent = len(self.trace.nodes) - 1 if self.trace.nodes else None
        self.trace.nodes.append(_vf().MessageNode(parent=parent, message=message, sampled=sampled))

    async def turn(self, message: Any = None) -> Any:
        vf = _vf()
        from verifiers.v1.dialects import parse_message
        from verifiers.v1.types import content_text

        if self._closed or self._over:
            raise RuntimeError("the exchange is over (the run ended); read interaction.trace")
        prompted = not self._started and self.task.data.prompt is not None
        if message is None and not prompted:
            raise ValueError("nothing to run a turn on: a bare turn() takes a prompted task's opening reply")
        if message is not None and prompted:
            raise ValueError("the task's prompt opens this exchange: take its first reply with a bare turn()")
        given = self.task.data.prompt if prompted else message
        incoming = [vf.UserMessage(content=given)] if isinstance(given, str) else list(given)
        for m in incoming:
            self._add(parse_message(m) if isinstance(m, dict) else m)
        self._started = True
        text = "\n\n".join(content_text(m.content) for m in incoming if getattr(m, "content", None))
        segment, over = await self.seat.episode.ask(text)
        for m in segment:
            self._add(m, sampled=isinstance(m, vf.AssistantMessage))
        if over:  # the rubricgym episode ran out of steps: the run is over, as at verifiers' max_turns
            self._over = True
            self.trace.stop("max_turns")
            return vf.Segment(messages=[], terminated=True)
        return vf.Segment(messages=segment)

    async def close(self) -> Any:
        if self._closed:
            return self.trace
        self._closed = True
        self.trace.stop("user_closed")
        try:
            await self.task.score(self.trace)
        except Exception as e:  # a reward that raised: an error on the trace, never a 0 (its reward stays None)
            self.trace.record_error(e)
        self.trace.ok = not self.trace.errors
        self.seat.episode.traces.append(self.trace)
        return self.trace


class _Loop:
    """An event loop in a thread of its own: the verifiers env's ``run`` waits there between the agent's steps."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="verifiers-env", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


# ---- tools ----------------------------------------------------------------------------------------------------


@dataclass
class _Server:
    """One toolset served in-process by the MCP SDK's ``MCPServer``."""

    name: str
    toolset: Any
    mcp: Any


def _servers(toolsets: list[Any]) -> list[_Server]:
    from mcp.server.mcpserver import MCPServer

    vf = _vf()
    out = []
    for toolset in toolsets:
        if toolset._state_cls is not vf.State:
            raise ValueError(
                f"verifiers toolset {type(toolset).__name__} keeps a typed State, which lives in verifiers' "
                f"interception server; rubricgym runs toolsets in-process: run this env with vf-eval"
            )
        mcp = MCPServer(toolset.server_name or type(toolset).__name__)
        toolset.register(mcp)
        out.append(_Server(toolset.server_name, toolset, mcp))
    return out


async def _list_tools(servers: list[_Server]) -> dict[str, tuple[_Server, str, ToolSpec]]:
    tools: dict[str, tuple[_Server, str, ToolSpec]] = {}
    for server in servers:
        for t in await server.mcp.list_tools():
            full = f"{server.name}_{t.name}" if server.name else t.name  # verifiers' harnesses name them so
            if full in tools or full == ANSWER_TOOL:
                raise ValueError(f"two verifiers tools are named {full!r}: give a toolset a distinct TOOL_PREFIX")
            params = t.input_schema if isinstance(t.input_schema, dict) and t.input_schema else {}
            params = {"type": "object", "properties": {}, **params}
            tools[full] = (server, t.name, ToolSpec(name=full, description=t.description or full, parameters=params))
    return tools


def _tool_text(result: Any) -> str:
    parts = [getattr(block, "text", None) or str(block) for block in result.content]
    return "\n".join(parts) if parts else str(result.structured_content or "")


ANSWER_SPEC = ToolSpec(
    name=ANSWER_TOOL,
    description="Reply to the environment: your answer to the task, or your next message when it asks again.",
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string", "description": "your reply, exactly as it should be read"}},
        "required": ["text"],
    },
)


# ---- the env --------------------------------------------------------------------------------------------------


class VerifiersEnv(RubricEnv):
    """A verifiers environment; build one with ``rubricgym.make("verifiers:<taskset-id>", **args)`` (module doc)."""

    taskset_id: ClassVar[str] = ""
    rewards: ClassVar[tuple[RewardFn, ...]] = ()
    stages = ("act", "answer")
    default_max_steps = 10
    scripted_agents = {
        "oracle": "rubricgym.interop.verifiers_env:AnswerOracle",
        "probe": "rubricgym.interop.verifiers_env:ProbeAgent",
    }

    def __init__(
        self, max_steps: int | None = None, render_mode: str | None = None, rubric: str | None = None, **args: Any
    ):
        if not self.taskset_id:
            raise TypeError("use rubricgym.make('verifiers:<taskset-id>'): a VerifiersEnv class is bound to a taskset")
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        self.args = args
        self.rubric = Rubric.load(rubric).model_dump(mode="json") if rubric else None
        self.vf_env = load_vf_env(self.taskset_id, args)
        self._tasks: dict[str, list[Any]] = {}
        self._loop: _Loop | None = None
        self._episode: _Episode | None = None
        taskset = self.vf_env.taskset
        task_cls = type(taskset).task_type()
        self._shared = _servers(type(taskset).toolsets(taskset.config))  # one per env, as verifiers shares them
        self._shared_ready = False
        servers = [*_servers(task_cls.toolsets(taskset.config.task)), *self._shared]
        self._tools = run_sync(_list_tools(servers)) if servers else {}
        self._specs = [*(spec for _, _, spec in self._tools.values()), ANSWER_SPEC]

    @classmethod
    def default_rubric(cls) -> Rubric:
        """One criterion per ``@vf.reward`` function (its verifiers weight), else the weighted verifiers reward."""
        criteria: list[dict[str, Any]] = [
            {"id": f"reward_{r.name}", "text": f"The verifiers reward {r.name!r} is earned.", "weight": r.weight}
            | {"scope": "trajectory", "check": f"reward_{r.name}"}
            for r in cls.rewards
            if r.weight != 0
        ]
        if not criteria:
            criteria = [
                {"id": "verifiers_reward", "text": "The verifiers env rewards the episode.", "level": "essential"}
                | {"scope": "trajectory", "check": "verifiers_reward"}
            ]
        return Rubric.model_validate({"id": f"verifiers-{cls.taskset_id}", "version": "1", "criteria": criteria})

    # ---- tasks -------------------------------------------------------------------------------------------------

    def _all_tasks(self, split: str) -> list[Any]:
        """The tasks ``sample_task`` draws from: the whole taskset (of an infinite one, its first 100)."""
        if split not in self._tasks:
            taskset = self._taskset(split)
            self._tasks[split] = list(taskset if taskset.bounded else taskset.take(100))
            if not self._tasks[split]:
                raise ValueError(f"verifiers taskset {self.taskset_id!r} loaded no {split!r} tasks (args {self.args})")
        return self._tasks[split]

    def _taskset(self, split: str) -> Any:
        """The taskset for ``split``: a taskset whose config has a ``split`` field loads that split; any other holds
        what its config fields chose, whatever the split is called (as a user's question file does)."""
        taskset = self.vf_env.taskset
        fields = type(taskset.config).model_fields
        if "split" in fields and getattr(taskset.config, "split", None) != split:
            try:
                config = type(taskset.config).model_validate({**taskset.config.model_dump(), "split": split})
            except Exception as e:  # the config's own check of the name (a Literal): say which split is unknown
                raise ValueError(f"verifiers taskset {self.taskset_id!r} has no split {split!r}: {e}") from e
            taskset = type(taskset)(config)
        return taskset

    def sample_task(self, rng: np.random.Generator, split: str = "train") -> Task:
        tasks = self._all_tasks(split)
        return self._task_of(tasks[int(rng.integers(len(tasks)))], split)

    def task_set(self, n: int, seed: int = 0, split: str = "train") -> list[Task]:
        """The first ``n`` tasks of the taskset (``seed > 0``: of the taskset shuffled with that seed)."""
        taskset = self._taskset(split)
        view = taskset.shuffle(seed) if seed and taskset.bounded else taskset
        tasks = [self._task_of(t, split) for t in view.take(n)]
        if len(tasks) < n:
            raise ValueError(
                f"verifiers taskset {self.taskset_id!r} has {len(tasks)} task(s), fewer than the {n} asked for; ask "
                f"for at most {len(tasks)} (--tasks) or give it more data with its config fields (--env-arg)"
            )
        return tasks

    def _task_of(self, vf_task: Any, split: str) -> Task:
        data = vf_task.data.model_dump(mode="json", exclude_none=True)
        own = set(type(vf_task.data).model_fields) - set(_vf().TaskData.model_fields)
        public = {k: data[k] for k in _BASE_FIELDS if k in data}
        hidden = {k: data[k] for k in sorted(own) if k in data}
        prompt = vf_task.data.prompt_text
        if vf_task.data.system_prompt:
            prompt = f"{vf_task.data.system_prompt}\n\n{prompt}"
        return Task(
            id=f"vf-{vf_task.key[:16]}",
            env_id=self.env_id,
            split=split,
            prompt=prompt,
            params={"data": public, "args": self.args},
            hidden=hidden,
            rubric=self.rubric,
        )

    def _vf_task(self, task: Task) -> Any:
        taskset = self.vf_env.taskset
        task_cls = type(taskset).task_type()
        data = task_cls.data_type().model_validate({**task.params.get("data", {}), **task.hidden})
        return task_cls(data, taskset.config.task)

    # ---- episodes ----------------------------------------------------------------------------------------------

    @property
    def tool_loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop.loop if self._loop is not None else None

    def tools(self) -> list[ToolSpec]:
        return self._specs

    def begin(self, task: Task) -> None:
        self._end_episode()
        if self._loop is None:
            self._loop = _Loop()
        vf_task = self._vf_task(task)
        self.run_async(self._setup_tools(vf_task))
        episode = self._episode = _Episode(self.vf_env, vf_task)
        asyncio.run_coroutine_threadsafe(episode.drive(), self._loop.loop)
        first = self.run_async(episode.events.get())
        if first is None:
            raise RuntimeError(
                f"verifiers env {type(self.vf_env).__name__}.run() ended before the agent's first turn"
                + (f": {type(episode.error).__name__}: {episode.error}" if episode.error else "")
            )
        episode.pending = first
        self._task = task.model_copy(update={"prompt": first.text})

    async def _setup_tools(self, vf_task: Any) -> None:
        """Fresh task-scoped toolsets for the episode (verifiers launches a server per rollout), set up for its
        task; the taskset-scoped ones set up once, never per task (as ``serve_shared`` does)."""
        fresh = _servers(type(vf_task).toolsets(vf_task.config))
        for server in fresh:
            await server.toolset.setup()
            await server.toolset.setup_task(vf_task.data)
        if not self._shared_ready:
            for server in self._shared:
                await server.toolset.setup()
            self._shared_ready = True
        self._tools = await _list_tools([*fresh, *self._shared])

    def call_tool(self, call: ToolCall) -> ToolOutput:
        return self.run_async(self._call(call))

    async def _call(self, call: ToolCall) -> ToolOutput:
        vf = _vf()
        episode = self._episode
        if episode is None or episode.pending is None:
            raise RuntimeError("no verifiers turn is waiting: call reset() first")
        last_step = len(self._records) + 1 >= self.max_steps
        if call.name == ANSWER_TOOL:
            reply = str(call.arguments.get("text", ""))
            segment = [*episode.segment, vf.AssistantMessage(content=reply)]
            return await self._reply(episode, segment, False, ToolOutput(text="", answer=reply))
        found = self._tools.get(call.name)
        if found is None:
            raise ToolError(f"unknown tool {call.name!r}")
        server, raw, _ = found
        result = await server.mcp.call_tool(raw, dict(call.arguments))
        text = _tool_text(result)
        error = text if result.is_error else None
        call_id = f"call_{uuid.uuid4().hex[:12]}"
        episode.segment += [
            vf.AssistantMessage(
                tool_calls=[vf.ToolCall(id=call_id, name=call.name, arguments=json.dumps(call.arguments))]
            ),
            vf.ToolMessage(tool_call_id=call_id, content=text, name=call.name),
        ]
        out = ToolOutput(text=text, error=error)
        if last_step:  # the step limit ends the agent's run, as verifiers' max_turns does: the env still scores it
            return await self._reply(episode, episode.segment, True, out)
        return out

    async def _reply(self, episode: _Episode, segment: list[Any], over: bool, out: ToolOutput) -> ToolOutput:
        """Hand the agent's segment to the waiting turn (``over``: the agent's run ends with it); the env's next
        turn is the observation, or the run ends and is scored."""
        assert episode.pending is not None
        turn, episode.pending, episode.segment = episode.pending, None, []
        turn.reply.set_result((segment, over))
        nxt = await episode.events.get()
        while nxt is not None and over:  # the run asked again after its agent's run ended
            nxt.reply.set_result(([], True))
            nxt = await episode.events.get()
        if nxt is not None:
            episode.pending = nxt
            out.text = nxt.text if not out.text else f"{out.text}\n\n{nxt.text}"
            out.answer = None
            return out
        scored = episode.result()
        self._episode = None
        out.done = not over
        out.reward = float(scored["reward"])
        out.info = {**out.info, _INFO: scored}
        if out.done:
            out.text = (
                "The environment's episode is over."
                if not scored["errors"]
                else ("The environment failed: " + "; ".join(scored["errors"]))
            )
        return out

    def stage_of(self, call: ToolCall | None) -> str:
        """``answer`` for a reply to the env, ``act`` for a tool call (a malformed action: the first stage)."""
        if call is None:
            return self.stages[0]
        return "answer" if call.name == ANSWER_TOOL else "act"

    def _end_episode(self) -> None:
        """Stop a verifiers run the agent left unfinished (a reset mid-episode, a step limit on a bad action)."""
        episode, self._episode = self._episode, None
        if episode is None or self._loop is None:
            return

        async def finish() -> None:
            while True:
                turn = episode.pending or await episode.events.get()
                episode.pending = None
                if turn is None:
                    return
                turn.reply.set_result(([], True))

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(finish(), self._loop.loop).result(30)

    def close(self) -> None:
        self._end_episode()
        if self._loop is not None:
            loop, self._loop = self._loop, None
            loop.close()
        super().close()


# ---- scripted agents ------------------------------------------------------------------------------------------


class AnswerOracle(TaskAgent):
    """Answers with the task's hidden ``answer`` field (a verifiers dataset's usual ground truth): it calibrates the
    env's reward (an oracle may read ``hidden``; never a teacher)."""

    name = "oracle"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str | Message:
        hidden = self.episode_task().hidden
        if "answer" not in hidden:
            raise ValueError(
                f"the oracle answers with the task's 'answer' field; this taskset's fields are {sorted(hidden)}"
            )
        answer = hidden["answer"]
        return tool_call(ANSWER_TOOL, text=answer if isinstance(answer, str) else json.dumps(answer))


class ProbeAgent(SeededAgent):
    """A baseline: calls each of the env's tools once with schema-shaped placeholder arguments, then answers a
    placeholder. It shows a verifiers env runs and scores end to end, never that it can be solved."""

    name = "probe"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str | Message:
        called = sum(1 for m in messages if m.role == "assistant")
        others = [t for t in tools if t.name != ANSWER_TOOL]
        if called < len(others):
            spec = others[called]
            props = spec.parameters.get("properties", {})
            return tool_call(spec.name, **{k: placeholder(v, self.rng) for k, v in props.items()})
        return tool_call(ANSWER_TOOL, text=f"probe {int(self.rng.integers(1000))}")


# ---- the registry's hook --------------------------------------------------------------------------------------


@functools.cache
def verifiers_class(taskset_id: str) -> type[VerifiersEnv]:
    """A ``VerifiersEnv`` subclass bound to ``taskset_id``: its checks and default rubric from the task class's
    ``@vf.reward`` functions (no data is loaded)."""
    vf = _vf()
    taskset_cls = _taskset_class(taskset_id)
    task_cls = taskset_cls.task_type()  # type: ignore[attr-defined]
    rewards = tuple(reward_fns(task_cls))
    has_tools = (
        task_cls.toolsets.__func__ is not vf.Task.toolsets.__func__
        or taskset_cls.toolsets.__func__ is not vf.Taskset.toolsets.__func__  # type: ignore[attr-defined]
    )
    checks = check_set(verifiers_reward, *(reward_check(r.name) for r in rewards))
    title = "".join(p.capitalize() for p in "".join(c if c.isalnum() else " " for c in taskset_id).split())
    attrs: dict[str, Any] = {
        "taskset_id": taskset_id,
        "env_id": f"{PREFIX}{taskset_id}",
        "rewards": rewards,
        "check_set": checks,
        "stages": ("act", "answer") if has_tools else ("answer",),
        "__doc__": f"The verifiers taskset {taskset_id!r} as a rubricgym env.",
        "__module__": __name__,
    }
    return type(f"Verifiers{title}", (VerifiersEnv,), attrs)


def verifiers_spec(env_id: str) -> EnvSpec:
    """The registry's spec of ``verifiers:<taskset-id>``: what ``rubricgym.make`` builds for it."""
    taskset_id = env_id.removeprefix(PREFIX).strip()
    if not taskset_id:
        raise KeyError(f"{env_id!r} names no taskset: use verifiers:<taskset-id>, the id vf-eval takes")
    cls = verifiers_class(taskset_id)
    return EnvSpec(id=env_id, entry_point=cls, description=f"verifiers taskset {taskset_id!r}")
