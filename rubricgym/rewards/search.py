"""PRM-guided test-time scaling (SWE-TRACE): sample k candidate actions per turn, score each with the step-level
process reward model, prune the low scorers and sample one ∝ π(a|h)·exp(β·u(a)).

``PRMGuidedAgent`` wraps any policy. Each turn it draws ``k`` candidates from the policy; π enters through the
draws themselves (a likely action is drawn more often, so weighting the k draws by exp(β·u) samples ∝ π·exp(β·u)).
u(a) comes from a look-ahead: a replica of the env replays the episode's committed actions, takes ``a``, and the
process reward model scores the result with the rubric (programmatic checks, optionally an LLM judge):
u(a) = ½·(score of the new step + total of the trajectory so far) (a step no step criterion covers counts the
trajectory total twice), or the final total when ``a`` ends the episode. The candidates below the top ``keep``
fraction by u are pruned before sampling.

Stateful scripted policies are forked per candidate by replaying the episode's history into a fresh episode view;
model policies (``model`` set) are sampled ``k`` times on the same history.

``NoisyAgent`` makes a scripted policy noisy (with probability ``p`` an action of the env's random agent replaces
its own) for benchmarks. In ``rubricgym run --agent`` and ``rubricgym eval --agent``:
``tts(k=4,beta=10):noisy(p=0.5):oracle``; in an agents file, a ``tts:`` field around any entry (``arena.agents``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rubricgym.core.agent import Agent, BaseAgent
from rubricgym.core.registry import make, spec
from rubricgym.core.rubric import Rubric, load_rubric
from rubricgym.core.types import Message, Task, ToolSpec
from rubricgym.rewards.judges import CheckJudge, Judge
from rubricgym.rewards.prm import ProcessRewardModel


def _text(output: str | Message) -> str:
    return output if isinstance(output, str) else (output.content or "")


class NoisyAgent(BaseAgent):
    """``base``'s actions, each replaced with probability ``p`` by an action of ``noise`` (the base still takes
    its turn, so its own state advances exactly as without noise)."""

    def __init__(self, base: Agent, noise: Agent, p: float = 0.5, seed: int | None = None):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"noise probability p must be in [0, 1], got {p}")
        self.base, self.noise, self.p, self.seed = base, noise, p, seed
        self.rng = np.random.default_rng(seed)
        self.name = f"noisy({p:g}):{getattr(base, 'name', 'agent')}"

    def episode(self, task: Task, seed: int | None) -> Agent:
        s = self.seed if seed is None else seed
        return NoisyAgent(
            self.base.episode(task, seed), self.noise.episode(task, None if s is None else s + 7919), self.p, s
        )

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str | Message:
        own = await self.base.act(messages, tools)
        return await self.noise.act(messages, tools) if self.rng.random() < self.p else own


class PRMGuidedAgent(BaseAgent):
    """Test-time scaling around ``policy`` on env ``env_id`` (see the module docstring)."""

    def __init__(
        self,
        policy: Agent,
        env_id: str,
        *,
        k: int = 4,
        beta: float = 10.0,
        keep: float = 0.5,
        rubric: Rubric | dict[str, Any] | str | None = None,
        judges: Sequence[Judge] | None = None,
        env_kwargs: dict[str, Any] | None = None,
        seed: int | None = 0,
        replay_policy: bool | None = None,
    ):
        if k < 1 or not 0.0 < keep <= 1.0:
            raise ValueError(f"need k >= 1 and keep in (0, 1], got k={k}, keep={keep}")
        self.policy, self.env_id, self.k, self.beta, self.keep = policy, env_id, k, beta, keep
        self.rubric = load_rubric(rubric) if rubric is not None else spec(env_id).load().default_rubric()
        self.judges = list(judges) if judges else [CheckJudge()]
        self.env_kwargs = dict(env_kwargs or {})
        self.seed = seed
        self.replay_policy = getattr(policy, "model", None) is None if replay_policy is None else replay_policy
        self.name = f"tts(k={k}):{getattr(policy, 'name', 'agent')}"
        self.model = getattr(policy, "model", None)
        self.task: Task | None = None
        self.episode_seed: int | None = None
        self.committed: list[str | Message] = []
        self.view: Agent | None = None
        self.rng = np.random.default_rng(seed)
        self.log: list[dict[str, Any]] = []
        """Per turn: the candidates, their u, which were kept and which was chosen."""

    def episode(self, task: Task, seed: int | None) -> Agent:
        ep = PRMGuidedAgent(
            self.policy,
            self.env_id,
            k=self.k,
            beta=self.beta,
            keep=self.keep,
            rubric=self.rubric,
            judges=self.judges,
            env_kwargs=self.env_kwargs,
            replay_policy=self.replay_policy,
            seed=None if seed is None else seed * 1_000_003 + (self.seed or 0),
        )
        ep.task, ep.episode_seed = task, seed
        ep.view = None if self.replay_policy else self.policy.episode(task, seed)
        return ep

    async def _candidate(self, messages: list[Message], tools: list[ToolSpec]) -> str | Message:
        if not self.replay_policy:
            assert self.view is not None
            return await self.view.act(messages, tools)
        assert self.task is not None
        seed = int(self.rng.integers(2**31))
        view = self.policy.episode(self.task, seed)
        for j, m in enumerate(messages):  # replay the history: the fork sees every earlier turn's prompt
            if m.role == "assistant":
                await view.act(messages[:j], tools)
        return await view.act(messages, tools)

    async def utility(self, candidate: str | Message) -> float:
        """u(a): look ahead in a replica of the env and score the new step and the trajectory so far."""
        env = make(self.env_id, **self.env_kwargs)
        try:
            env.reset_typed(seed=self.episode_seed, task=self.task)
            for a in self.committed:
                await env.astep_typed(a)
            obs = await env.astep_typed(candidate)
            traj = env.trajectory()
        finally:
            env.close()
        b = await ProcessRewardModel(self.rubric, self.judges).score(traj)
        total = b.total if b.total is not None else 0.0
        if obs.done:  # a terminal action's value is the episode's reward itself
            return total
        step = b.per_step[-1] if b.per_step and b.per_step[-1] is not None else total
        return 0.5 * (step + total)

    def choose(self, utilities: Sequence[float]) -> tuple[int, list[int]]:
        """(index chosen, indices kept): prune to the top ``keep`` fraction, sample ∝ exp(β·u) among them."""
        n_keep = max(1, math.ceil(self.keep * len(utilities)))
        kept = sorted(range(len(utilities)), key=lambda i: -utilities[i])[:n_keep]
        top = max(utilities[i] for i in kept)
        w = np.array([math.exp(self.beta * (utilities[i] - top)) for i in kept])
        return kept[int(self.rng.choice(len(kept), p=w / w.sum()))], kept

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str | Message:
        if self.task is None:
            raise RuntimeError("PRMGuidedAgent needs the task: use agent.episode(task, seed) (rollout does)")
        candidates = [await self._candidate(messages, tools) for _ in range(self.k)]
        cache: dict[str, float] = {}
        for c in candidates:
            if _text(c) not in cache:
                cache[_text(c)] = await self.utility(c) if self.k > 1 else 0.0
        utilities = [cache[_text(c)] for c in candidates]
        chosen, kept = self.choose(utilities)
        self.log.append(
            {"candidates": [_text(c)[:200] for c in candidates], "u": utilities, "kept": kept, "chosen": chosen}
        )
        self.committed.append(candidates[chosen])
        return candidates[chosen]


class TTSConfig(BaseModel):
    """PRM-guided search settings: ``tts: {k: 4, beta: 10, keep: 0.5}`` in an agents file, ``tts(k=4,...)``
    in an ``--agent`` name."""

    model_config = ConfigDict(extra="forbid")
    k: int = Field(4, ge=1, le=64)
    """Candidate actions sampled per turn (1: the policy alone)."""
    beta: float = Field(10.0, ge=0.0)
    """Inverse temperature of exp(β·u) over the kept candidates (0: uniform among them)."""
    keep: float = Field(0.5, gt=0.0, le=1.0)
    """Fraction of the candidates, best u first, kept before sampling."""


_SPEC = re.compile(r"^(tts|noisy)(?:\(([^)]*)\))?:(.+)$")


def parse_wrapper(name: str) -> tuple[str, dict[str, Any], str] | None:
    """``(kind, settings, inner)`` for ``tts(k=4,beta=10,keep=0.5):INNER`` or ``noisy(p=0.5):INNER``; ``None``
    when ``name`` is neither. The settings are validated (``TTSConfig``; ``p`` in [0, 1]); ``ValueError`` names
    the spec and the bad setting."""
    m = _SPEC.match(name)
    if not m:
        return None
    kind, args, inner = m.group(1), m.group(2) or "", m.group(3)
    kw: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in args.split(","))):
        key, _, value = part.partition("=")
        try:
            kw[key.strip()] = float(value)
        except ValueError:
            raise ValueError(f"agent spec {name!r}: {part!r} is not key=number") from None
    if kind == "noisy":
        if set(kw) - {"p"} or not 0.0 <= kw.get("p", 0.5) <= 1.0:
            raise ValueError(f"agent spec {name!r}: noisy takes p in [0, 1], got {args!r}")
        return kind, {"p": kw.get("p", 0.5)}, inner
    try:
        return kind, TTSConfig.model_validate(kw).model_dump(), inner
    except ValidationError as e:
        bad = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise ValueError(f"agent spec {name!r}: tts takes k, beta, keep ({bad})") from None


def unwrap(name: str) -> tuple[list[str], str]:
    """(wrapper kinds outermost first, the agent they wrap): ``tts(k=4):noisy(p=0.5):oracle`` ->
    ``(["tts", "noisy"], "oracle")``; ``ValueError`` on a bad setting."""
    kinds = []
    while (parsed := parse_wrapper(name)) is not None:
        kinds.append(parsed[0])
        name = parsed[2]
    return kinds, name


def wrap_agent(env_id: str, name: str, resolve: Callable[[str], Agent], seed: int = 0, **tts_kw: Any) -> Agent | None:
    """``tts(k=4,beta=10,keep=0.5):INNER`` or ``noisy(p=0.5):INNER`` (nestable) around the agent ``resolve(INNER)``
    names; ``None`` when ``name`` is neither (``rubricgym run --agent`` then resolves it as usual). ``tts_kw``
    (``rubric``, ``env_kwargs``) go to every ``PRMGuidedAgent``."""
    parsed = parse_wrapper(name)
    if parsed is None:
        return None
    kind, kw, inner = parsed
    base = wrap_agent(env_id, inner, resolve, seed, **tts_kw) or resolve(inner)
    if kind == "noisy":
        return NoisyAgent(base, resolve("random"), p=kw["p"], seed=seed)
    return PRMGuidedAgent(base, env_id, **kw, seed=seed, **tts_kw)
