"""``TrainConfig``: everything a training run needs, as a pydantic model loaded from YAML.

Unknown keys and bad values fail at load time, before any model is loaded, with a message naming the field
(``ConfigError``). Command-line flags override single fields (``with_overrides``). Defaults are the
embedded-defaults run: SmolLM2-135M-Instruct on the toy calculator env on a CPU. The checks of field combinations
and of what this installation can run live in ``config_checks.py``; the models' validators call them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from rubricgym.core.jsonl import read_text
from rubricgym.core.safeio import atomic_write
from rubricgym.rewards.evolve import BufferConfig
from rubricgym.rewards.monitor import MonitorConfig
from rubricgym.rewards.path import JudgeSettings
from rubricgym.suites.curriculum import CurriculumConfig
from rubricgym.suites.topology import Topology
from rubricgym.trainers import config_checks as checks
from rubricgym.trainers.config_checks import TRACKER_PACKAGES as TRACKER_PACKAGES
from rubricgym.trainers.config_checks import env_problems as env_problems
from rubricgym.trainers.config_checks import kwarg_type_problems as kwarg_type_problems
from rubricgym.trainers.config_checks import non_finite, world_problems

Estimator = Literal["grpo", "rloo", "stage", "tournament", "step"]
MAX_SEED = 2**32 - 1
"""Seeds go to numpy, ``random`` and torch alike: 0 .. 2**32 - 1 is what all of them take."""
MAX_NEW_TOKENS = 131_072
MAX_SEQ_LEN = 1_048_576
# Every number a config holds is bounded (issue 40, item 8): a typo such as ``lr: 1e308`` or ``steps: 10**15``
# fails at load time with the bound in the message, instead of a run that diverges or never ends.
MAX_STEPS = 10_000_000
MAX_COUNT = 1_000_000
"""Most tasks a config may ask an env to generate."""
MAX_BATCH = 4096
"""Most sequences, rollouts or tasks in one batch, group or step."""
MAX_LR = 1e30
"""Far above any rate that learns (an Adam step moves each weight by about lr), refusing what overflows
(``1e308``): the non-finite-update guard is tested by driving a run to divergence with ``lr: 1e30``."""
MAX_TEMPERATURE = 10.0
MAX_REWARD = 1000.0
"""Reward thresholds are compared with rubric totals and outcome rewards, which are small numbers."""
MAX_SECONDS = 366 * 24 * 3600.0
MAX_ACTORS = 10_000


def _at_most_lr(value: float) -> float:
    if value > MAX_LR:
        raise ValueError(f"a learning rate must be at most {MAX_LR:g}, got {value:g}")
    return value


LearningRate = Annotated[float, Field(gt=0.0), AfterValidator(_at_most_lr)]
"""A learning rate: positive, at most ``MAX_LR`` (said as ``1e+30``, not as pydantic's 31 digits)."""
Beta = Annotated[float, Field(ge=0.0, lt=1.0)]
"""An Adam beta: a decay rate in [0, 1)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


LORA_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


class LoraConfig(_Strict):
    """LoRA adapters (Hu et al. 2021, arXiv:2106.09685) through PEFT: the base weights stay frozen and only
    ``W + (alpha / r) B A`` is trained (``engine/lora.py``); the KL reference is the base with the adapters off."""

    r: int = Field(16, ge=1, le=4096)
    """The adapters' rank."""
    alpha: int = Field(32, ge=1, le=65536)
    """The scale numerator: the update is ``(alpha / r) B A``."""
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    """Dropout on the adapters' input during the update's forward. 0 keeps pi_old (the update's first forward)
    equal to the policy that sampled, as the PPO ratio assumes."""
    target_modules: list[str] | Literal["all-linear"] = Field(default_factory=lambda: list(LORA_PROJECTIONS))
    """Module names to adapt (the attention and MLP projections of Llama-style models), or ``all-linear``
    (every linear layer but the output head)."""

    @model_validator(mode="after")
    def _peft_installed(self) -> LoraConfig:
        checks.check_lora(self)
        return self


class ParallelConfig(_Strict):
    """How data-parallel ranks (``torchrun --nproc-per-node N``) hold the policy (``trainers/engine/sharding.py``)."""

    strategy: Literal["ddp", "fsdp2"] = "ddp"
    """``ddp``: every rank holds the whole model and ranks sum gradients; ``fsdp2``: PyTorch's ``fully_shard`` on
    each decoder layer and the root, every rank holding 1/world of the parameters, gradients and AdamW state."""
    mixed_precision: Literal["none", "bf16"] = "none"
    """fsdp2 only: ``bf16`` gathers parameters and computes in bf16, reduces gradients in fp32 (fp32 master
    weights and optimizer)."""
    cpu_offload: bool = False
    """fsdp2 only: keep the shards, their gradients and the optimizer step in CPU memory (for GPUs short of it)."""
    reshard_after_forward: bool = True
    """fsdp2 only: free each gathered layer after its forward (gather again in backward): less memory, more
    communication."""

    @model_validator(mode="after")
    def _fsdp_only(self) -> ParallelConfig:
        checks.check_parallel(self)
        return self


class ModelConfig(_Strict):
    name: str = "smollm2-135m-instruct"
    """A known model name (``rubricgym model path``) or a Hugging Face model directory."""
    dtype: Literal["float32", "bfloat16"] = "float32"
    bf16_autocast: bool = False
    """Generate and run forward/backward under ``torch.autocast(bfloat16)`` with fp32 master weights: faster on
    CPUs with bf16 instructions (AVX512-BF16, AMX), slower without (``bench/trainer_vs_trl.py`` measures it).
    Held-out evaluation stays fp32. A 135M model samples a noticeably different policy in bf16."""
    gradient_checkpointing: bool = False
    threads: int | None = Field(None, ge=1, le=1024)
    """``torch.set_num_threads``; None keeps torch's default."""
    device: str = "cpu"
    """Where the policy lives: ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (a GPU when torch sees one)."""
    packed_weights: bool = True
    """On CPU, sample on oneDNN-prepacked copies of the linear weights: the same precision, ~2x faster decoding
    (``rubricgym/agents/packed.py``), one more copy of the weights during generation. No effect on GPU."""
    lora: LoraConfig | None = None
    """Train LoRA adapters instead of every weight (``LoraConfig``); None: full fine-tuning."""
    train_layers: int | None = Field(None, ge=1, le=10_000)
    """GRPO trains only the top ``k`` decoder layers and the final norm, the rest (embeddings and the tied head
    included) frozen, as ``warm_start.train_layers`` does for the clone; None: every weight (or the LoRA adapters).
    Measured on the clinical demo's clone (81.2% of 16 held-out cases solved greedy): 4 GRPO steps at lr 1e-5 on
    every weight left 18.8%, 8 steps at lr 1e-5 on the top 8 layers left 81.2% (``docs/guides/warm-start.md``)."""
    parallel: ParallelConfig = Field(default_factory=ParallelConfig)
    """Data parallelism across ``torchrun`` ranks: replicated (``ddp``, the default) or sharded (``fsdp2``)."""

    @model_validator(mode="after")
    def _sharding(self) -> ModelConfig:
        checks.check_model(self)
        return self


class GenerationConfig(_Strict):
    backend: Literal["transformers", "vllm"] = "transformers"
    temperature: float = Field(0.8, ge=0.0, le=MAX_TEMPERATURE)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_new_tokens: int = Field(96, ge=1, le=MAX_NEW_TOKENS)
    max_batch: int = Field(16, ge=1, le=MAX_BATCH)
    response_prefix: str = ""
    """Prefill every assistant turn with this text (e.g. ``<tool_call>{"name": "``) so a small model's output
    parses; it is part of the prompt, never trained on."""
    kv_reuse_tokens: int = Field(0, ge=0, le=MAX_SEQ_LEN * MAX_BATCH)
    """The local sampler keeps up to this many positions of finished rows' keys and values, so an episode's next
    turn prefills only what the env added (``agents/kvreuse.py``; ~46 KB a position for SmolLM2-135M in fp32).
    0: off, every turn prefills its whole history."""
    eval_temperature: float = Field(0.0, ge=0.0, le=MAX_TEMPERATURE)
    """Held-out evaluation decodes greedily by default."""
    vllm_base_url: str | None = None
    """vLLM server mode: an OpenAI-compatible vLLM server; None with backend vllm starts one (``VLLMServer``)."""
    vllm_sync_weights: bool = True
    """Push the policy's new weights to the vLLM server after each update."""
    vllm_push: Literal["merged", "adapter"] = "merged"
    """What a push sends under ``model.lora``: ``merged`` weights ``W + (alpha / r) B A`` reloaded in place, or
    the ``adapter`` alone, loaded through vLLM's runtime LoRA API (``trainers/engine/vllm_backend.py``)."""
    agent_program: str | None = None
    """``module:function``: the user's own agent (LangGraph, the OpenAI Agents SDK, a script with an OpenAI client)
    plays every episode through the recording proxy, calling the policy as an OpenAI-compatible model
    (``trainers/engine/proxy_backend.py``); ``None``: the built-in agent loop."""
    ray_weight_sync: Literal["object_store", "collective"] = "object_store"
    """How ``ray: true`` sends the new weights to the rollout actors after each update: ``object_store`` (one
    ``ray.put`` every actor loads) or ``collective`` (a gloo broadcast in buckets over a ``WeightSync`` group of the
    learner and the actors, rebuilt when an actor is replaced: ``trainers/engine/ray_sync.py``)."""


class EnvConfig(_Strict):
    id: str = "toy-calculator-v0"
    kwargs: dict[str, Any] = Field(default_factory=dict)
    train_tasks: int = Field(256, ge=1, le=MAX_COUNT)
    eval_tasks: int = Field(32, ge=1, le=MAX_COUNT)
    task_seed: int = Field(0, ge=0, le=MAX_SEED)
    tool_timeout_s: float | None = Field(None, gt=0, le=MAX_SECONDS)
    """Seconds an ``async def`` tool call (a sandbox command, a browser action) may run before it is cancelled;
    the agent sees a timeout error and the episode goes on. ``None``: no limit."""
    max_concurrent_tools: int | None = Field(None, ge=1, le=MAX_BATCH)
    """At most this many ``async def`` tool calls run at once across the step's episodes, however many generate
    together (sandboxes, browsers). ``None``: no cap."""
    rubric: str | dict[str, Any] | None = None
    """A rubric file or dict; None uses the env's ``default_rubric()``."""
    suite: str | None = None
    """Train on a suite (a built-in name or a suite YAML) instead of ``id``: each step draws tasks across its
    entries (``curriculum``), training tasks come from each entry's env and kwargs (split ``train``,
    ``train_tasks`` per entry) and the held-out evaluation is the suite's own tasks, per entry and overall."""
    curriculum: CurriculumConfig = Field(default_factory=CurriculumConfig)

    @model_validator(mode="after")
    def _suite(self) -> EnvConfig:
        checks.check_suite(self)
        return self


class AdvantageConfig(_Strict):
    estimator: Estimator = "grpo"
    scale: Literal["group", "batch", "none"] = "group"
    """GRPO std scaling: ``group`` (GRPO), ``batch``, or ``none`` (Dr. GRPO)."""
    reward_key: str = "rubric"
    """Which ``trajectory.rewards`` entry is the scalar reward (the process reward model's total)."""
    stage_lambda: list[list[float]] | None = None
    """SS-GRPO's Λ (K x K, upper triangular) over the env's stages; None: RubricEM's generalised default."""
    topology: Topology = "single_elimination"
    anchor_greedy: bool = True
    """ArenaRL: rollout 0 of each group is decoded greedily (the anchor)."""
    path_weight: float = Field(0.5, ge=0.0, le=1.0)


class LossConfig(_Strict):
    clip_low: float = Field(0.2, ge=0.0, lt=1.0)
    clip_high: float = Field(0.28, ge=0.0, le=10.0)
    beta: float = Field(0.0, ge=0.0, le=100.0)
    """k3 KL coefficient to the frozen initial policy; 0 loads no reference model."""
    entropy_coef: float = Field(0.0, ge=-10.0, le=10.0)
    aggregation: Literal["token-mean", "seq-mean"] = "token-mean"
    ppo_epochs: int = Field(1, ge=1, le=100)
    off_policy: Literal["tis", "sampler", "none"] = "tis"
    """Sampler/learner mismatch: ``tis`` weights tokens by min(pi_old / mu, tis_cap); ``sampler`` takes the PPO
    ratio against the sampler's log-probs mu; ``none`` ignores them (see ``trainers/engine/update.py``)."""
    tis_cap: float | None = Field(2.0, gt=0.0, le=1e6)
    entropy_modulation: EntropyModulationConfig | None = None
    """AEM (``trainers/algo/entropy.py``): scale each agent turn's advantage by a weight that falls with the turn's
    mean token entropy relative to its group; None trains without it."""
    skip_zero_advantage: bool = True
    """Leave out of the forward and backward every sample whose loss is identically zero: no generated token with a
    non-zero advantage, while ``beta`` and ``entropy_coef`` are 0 (a group whose rollouts all scored alike). The
    gradient is the same (the batch's token or sequence count still normalises the loss) and the optimizer still
    steps; the step's ``entropy``, ``kl`` and ``clip_fraction`` then cover the trained tokens only (none: NaN),
    ``tokens`` still counts every generated token and ``skipped_samples`` the samples left out. False runs every
    sample."""


class EntropyModulationConfig(_Strict):
    """AEM's per-turn advantage weights: ``alpha = exp(-lam * H~) / mean_group(exp(-lam * H~))`` with ``H~`` the
    turn's mean token entropy min-max normalised within its group; a group whose turn entropies span less than
    ``min_range`` nats is left alone (alpha 1)."""

    lam: float = Field(1.0, ge=0.0, le=1e3)
    min_range: float = Field(0.1, ge=0.0, le=1e3)


class GuidanceConfig(_Strict):
    """Guidance for groups that all fail (``trainers/algo/guidance.py``): a group whose best rollout scores below
    ``threshold`` has ``share`` of its rollouts re-rolled with a hint in the task prompt, escalating level by level
    in the same step while the guided ones still fail; each task remembers its level (more help while it keeps
    failing, none once an unguided rollout solves it)."""

    metric: Literal["outcome", "reward"] = "outcome"
    """What a failure is measured on: the env's outcome reward, or the rubric reward (``advantage.reward_key``)."""
    threshold: float = Field(0.5, ge=-MAX_REWARD, le=MAX_REWARD)
    """A group is guided when its best rollout's value is below this."""
    share: float = Field(0.5, gt=0.0, le=1.0)
    """The share of the group re-rolled with guidance (at least one rollout)."""
    max_level: int = Field(3, ge=1, le=100)
    rubric_hints: bool = True
    """Where the env has no hint at a level, hint with the rubric criteria the group's best rollout missed
    (RGR-GRPO); any hint that contains one of the task's secrets is dropped."""
    correction: Literal["tis", "hinted"] = "tis"
    """``tis``: train a guided rollout's tokens under the plain prompt the policy will face, each weighted by the
    truncated importance weight ``min(pi_old(o | plain) / mu(o | hinted), cap)``; ``hinted``: train them under the
    hinted prompt they were sampled from, on-policy (GHPO: the policy learns to act with hints)."""
    cap: float = Field(1.0, gt=0.0, le=1e6)
    """Truncation of the guided tokens' importance weights (1: a guided token never outweighs an on-policy one)."""


class AsyncConfig(_Strict):
    """Rollouts for the next steps while the current update trains (``trainers/pipeline.py``, issue #27)."""

    enabled: bool = False
    max_staleness: int = Field(1, ge=0, le=1000)
    """How many updates behind the learner a batch's sampling policy may be when it is trained on. Generation is
    paced, never discarded: step ``k`` is produced only once the learner has applied update ``k - max_staleness``.
    0 is exactly the synchronous trainer (same samples, same update)."""


class RayResources(_Strict):
    """``ray_worker_resources``: Ray's actor options of the same names."""

    num_cpus: float = Field(1.0, ge=0, le=1e5)
    num_gpus: float | None = Field(None, ge=0, le=1e5)
    memory: int | None = Field(None, ge=0, le=1 << 50)
    resources: dict[str, float] = Field(default_factory=dict)

    def given(self) -> dict[str, Any]:
        """The options that are set, as ``RayBackend``'s ``worker_resources`` takes them."""
        return {k: v for k, v in self.model_dump().items() if v not in (None, {})}


class OptimConfig(_Strict):
    lr: LearningRate = 2e-5
    weight_decay: float = Field(0.0, ge=0.0, le=10.0)
    betas: tuple[Beta, Beta] = (0.9, 0.99)
    max_grad_norm: float | None = Field(1.0, gt=0.0)
    micro_batch: int = Field(8, ge=1, le=MAX_BATCH)
    """At most this many samples per forward and backward; unsharded, the update cuts fewer where padding costs
    more than another micro-batch (``trainers/engine/batching.py``)."""
    max_seq_len: int = Field(1024, ge=16, le=MAX_SEQ_LEN)
    """Tokens of one training sequence (an episode's turns, prompt included); what lies past it gets no gradient.
    Set it to the longest episode: GRPO counts the generated tokens it cuts in ``metrics.jsonl``'s ``cut_tokens``
    and warns once, and a warm start refuses a conversation that does not fit (``warm_start.allow_cut_turns``)."""


class WarmStartConfig(_Strict):
    """Behaviour cloning before GRPO (``trainers/sft.py``; ``rubricgym sft`` runs it alone): the policy learns to
    imitate kept trajectories, loss on the assistant's tokens only, every prompt rendered by the sampler's own code.
    Warm-start data comes from teachers (agents that act only on what the episode showed) or from any run, never
    from oracles, which read the task's hidden values: a clone of them learns to invent facts."""

    data: list[str] = Field(default_factory=list)
    """Run directories of ``rubricgym run`` (their ``trajectories.jsonl``) and ``rubricgym export --format sft``
    JSONL files to clone."""
    agent: str | None = None
    """A scripted agent of ``env.id`` (``teacher``) that plays the first ``tasks`` training tasks now; its
    trajectories are kept in the warm start's directory and reused."""
    tasks: int = Field(64, ge=1, le=MAX_COUNT)
    """How many training tasks ``agent`` plays (the same training split GRPO draws from)."""
    episodes_per_task: int = Field(1, ge=1, le=1000)
    keep: Literal["succeeded", "rubric", "all"] = "succeeded"
    """Rejection sampling: ``succeeded`` keeps trajectories whose outcome solved the task (``Outcome.succeeded``),
    ``rubric`` those whose rubric total reaches ``min_rubric`` (unscored ones are scored with the run's rubric),
    ``all`` every one."""
    min_rubric: float = Field(0.5, ge=-MAX_REWARD, le=MAX_REWARD)
    allow_oracle: bool = False
    """Clone an ``oracle``'s trajectories anyway (tests of the cloning mechanics only)."""
    allow_cut_turns: bool = False
    """Clone turns longer than ``generation.max_new_tokens`` and conversations longer than ``optim.max_seq_len``
    anyway (tests of the cloning mechanics with a tiny cap only). The sampler cuts such a turn off, so the policy
    learns a call it can never finish; the sequence limit cuts a conversation's last turns (the answer) out of the
    loss. By default the warm start refuses both before cloning, naming the length needed."""
    steps: int = Field(100, ge=0, le=MAX_STEPS)
    """Optimizer steps of cloning."""
    batch_size: int = Field(8, ge=1, le=MAX_BATCH)
    """Training sequences per optimizer step (cut into ``optim.micro_batch`` micro-batches)."""
    lr: LearningRate = 5e-5
    """Constant learning rate of the cloning. The family demos' 30 steps over the top 8 layers under-fit at this
    default (the clinical clone repeated turns and solved nothing) and use 2e-4 (docs/guides/warm-start.md, "The
    learning rate")."""
    max_grad_norm: float | None = Field(1.0, gt=0.0)
    train_layers: int | None = Field(None, ge=1, le=10_000)
    """Train only the top ``k`` decoder layers and the final norm (None: what GRPO trains: every weight, the top
    ``model.train_layers``, or the LoRA adapters when ``model.lora`` is set)."""
    held_out: float = Field(0.1, ge=0.0, lt=1.0)
    """The share of tasks whose trajectories are held out to measure token accuracy and loss (none below 2 tasks)."""
    eval_every: int = Field(25, ge=0, le=MAX_STEPS)
    save_every: int = Field(25, ge=0, le=MAX_STEPS)
    """A checkpoint every N steps (0: only at the end); an interrupted warm start resumes from the newest."""
    seed: int = Field(0, ge=0, le=MAX_SEED)
    dagger_rounds: int = Field(0, ge=0, le=100)
    """Rounds of DAgger after cloning (Ross et al., 2011; needs ``agent``): the clone plays ``dagger_tasks``
    training tasks at ``generation.temperature``, the teacher labels every state those episodes reached (the chat
    before each of the clone's turns) with the turn it would take there, and cloning goes on ``dagger_steps`` more
    steps over the teacher's episodes and every label so far. A clone that drifts off the teacher's path (asks the
    same question again, re-opens a page) learns what to do from where it drifted to. Resumes like cloning."""
    dagger_tasks: int = Field(16, ge=1, le=MAX_COUNT)
    dagger_steps: int = Field(20, ge=1, le=MAX_STEPS)
    decision_tokens: int = Field(2, ge=1, le=64)
    """The first tokens of each cloned turn, after ``generation.response_prefix`` (with the demos' prefix: the
    tool's name), that the held-out *decision accuracy* measures and ``decision_weight`` weights."""
    decision_weight: float = Field(1.0, ge=1.0, le=100.0)
    """The loss weight of those tokens (1: the plain mean NLL). A clone's token accuracy can read 0.9 while it picks
    the wrong tool at most of the turns that matter (clinical: it orders one more test where the teacher
    diagnoses); a weight above 1 makes those choices count as much as the arguments' many tokens."""

    @property
    def total_steps(self) -> int:
        """Cloning's optimizer steps, DAgger's rounds included."""
        return self.steps + self.dagger_rounds * self.dagger_steps

    @model_validator(mode="after")
    def _has_data(self) -> WarmStartConfig:
        if not self.data and self.agent is None:
            raise ValueError(
                "warm_start needs trajectories: data (run directories or `export --format sft` files) or agent (a "
                "scripted teacher of the env)"
            )
        if self.dagger_rounds and self.agent is None:
            raise ValueError(
                "warm_start.dagger_rounds needs agent: the teacher that labels the states the clone reaches"
            )
        return self


class TrainConfig(_Strict):
    model_config = ConfigDict(extra="forbid", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    run_dir: Path = Path("runs/train")
    steps: int = Field(20, ge=0, le=MAX_STEPS)
    tasks_per_step: int = Field(4, ge=1, le=MAX_BATCH)
    group_size: int = Field(8, ge=2, le=MAX_BATCH)
    seed: int = Field(0, ge=0, le=MAX_SEED)
    eval_every: int = Field(0, ge=0, le=MAX_STEPS)
    """Evaluate on the held-out split every N steps (0: only before and after training)."""
    save_every: int = Field(5, ge=0, le=MAX_STEPS)
    time_budget_s: float | None = Field(None, gt=0, le=MAX_SECONDS)
    """Stop starting new steps once this much wall time has passed (the final eval still runs)."""
    live: bool = True
    plots: bool = True
    keep_rollouts: bool = True
    """Append each step's scored training rollouts to ``trajectories.jsonl`` in the run directory (tagged
    ``metrics.train_step``), so ``rubricgym score RUN_DIR`` re-scores them and shows it reproduces the totals the
    trainer optimised; ``run.json`` records the rubric each env was scored with."""
    ray: bool = False
    ray_address: str | None = None
    ray_workers: int = Field(2, ge=1, le=MAX_ACTORS)
    ray_worker_resources: RayResources = Field(default_factory=lambda: RayResources())
    """What each rollout actor asks Ray for: ``num_cpus`` (default 1), ``num_gpus``, ``memory`` (bytes) and custom
    ``resources`` (``{"rollout": 1}``: only nodes started with ``ray start --resources '{"rollout": 1}'``)."""
    ray_placement: Literal["pack", "spread", "strict_pack", "strict_spread"] | None = None
    """Reserve one bundle per rollout actor in a Ray placement group of this strategy (``strict_spread``: one
    actor per node); ``None``: Ray schedules each actor where its resources fit."""
    ray_max_restarts: int = Field(3, ge=0, le=1000)
    """A rollout actor that dies is replaced and its groups replayed, at most this many times per collection."""
    ray_learners: int = Field(1, ge=1, le=MAX_ACTORS)
    """Learner ranks Ray places (``trainers/ray_learners.py``): above 1, ``rubricgym train`` starts them as Ray
    actors that train data-parallel, rank 0 holding the rollout pool for all, as under ``torchrun``."""
    ray_learner_resources: RayResources = Field(default_factory=lambda: RayResources())
    """What each learner rank asks Ray for (``num_gpus: 1`` for one GPU per rank)."""
    ray_learner_placement: Literal["pack", "spread", "strict_pack", "strict_spread"] = "pack"
    """The placement group strategy of the learner ranks' bundles (``strict_spread``: one rank per node)."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    generation: GenerationConfig = Field(default_factory=GenerationConfig)
    env: EnvConfig = Field(default_factory=EnvConfig)
    advantage: AdvantageConfig = Field(default_factory=AdvantageConfig)
    loss: LossConfig = Field(default_factory=LossConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    monitor: MonitorConfig | None = None
    """Hacking monitors every k steps (exploitation vs a reference panel, internalisation gap, drift, alarms)."""
    rubric_buffer: BufferConfig | None = None
    """RubricEM's evolving per-stage rubric buffer (``rewards.evolve``); None trains on a fixed rubric."""
    guidance: GuidanceConfig | None = None
    """Hints for groups that all fail (``GuidanceConfig``); None never guides."""
    async_: AsyncConfig = Field(default_factory=AsyncConfig, alias="async")
    """``async: {enabled, max_staleness}``: the sampler (its own copy of the weights) produces the next steps'
    scored rollouts while the learner updates; the new weights reach it between two steps' collections."""
    report_to: list[Literal["tensorboard", "wandb", "trackio"]] = Field(default_factory=list)
    """Experiment trackers that also receive every ``metrics.jsonl`` record (same numbers, same steps) and the
    config (``trainers/trackers.py``); each needs its package (``pip install 'rubricgym[trackers]'``)."""
    warm_start: WarmStartConfig | None = None
    """Behaviour cloning before GRPO (``WarmStartConfig``), kept in ``RUN/warm_start`` and reused when present;
    None starts GRPO from ``model.name`` as it is."""
    judge: JudgeSettings | None = None
    """LLM judges beside the env's checks (``rewards.path``): ``base_url`` + ``model`` or a ``panel``, a persistent
    verdict cache in the run directory; the rubric's LLM-judged criteria (and the buffer's ``writer: llm``
    criteria) are scored by them. Without it, a rubric with such criteria fails before anything loads."""

    @field_validator("report_to")
    @classmethod
    def _trackers_installed(cls, value: list[str]) -> list[str]:
        checks.check_trackers(value)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        checks.check_train(self)
        return self

    def with_overrides(self, **dotted: Any) -> TrainConfig:
        """A copy with fields replaced by dotted name (``{"advantage.estimator": "stage"}``), re-validated."""
        data = self.model_dump()
        for key, value in dotted.items():
            if value is None:
                continue
            node = data
            *parents, leaf = key.split(".")
            for p in parents:
                node = node[p]
            node[leaf] = value
        return validate_config(data, "overrides")


class ConfigError(ValueError):
    """A training config that does not validate; the message names the file and each bad field."""


def validate_config(data: Any, source: str = "<dict>") -> TrainConfig:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a training config must be a mapping, got {type(data).__name__}")
    bad = non_finite(data)
    if bad:
        raise ConfigError("\n".join(f"{source}: field '{f}': must be a finite number (not .inf or .nan)" for f in bad))
    try:
        cfg = TrainConfig.model_validate(data)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            field = ".".join(str(p) for p in err["loc"]) or "(config)"
            lines.append(f"{source}: field '{field}': {err['msg']}")
        raise ConfigError("\n".join(lines)) from None
    problems = world_problems(cfg)
    if problems:
        raise ConfigError("\n".join(f"{source}: field '{field}': {msg}" for field, msg in problems))
    return cfg


def load_config(path: str | Path) -> TrainConfig:
    """Read and validate a YAML training config."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{p}: is a directory; --config takes a YAML file (e.g. configs/toy.yaml)")
    if not p.is_file():
        raise ConfigError(f"{p}: no such config file")
    text = read_text(p, ConfigError)
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML: {e}") from None
    if data is None:
        raise ConfigError(
            f"{p}: the config is empty; write the fields to change (an empty file would silently train every "
            "default), or leave --config out to train the defaults on purpose"
        )
    return validate_config(data, str(p))


class UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (YAML keeps the last one silently)."""


def _unique_mapping(loader: UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (lines {seen[key]} and {line}): keep one", key_node.start_mark
            )
        seen[key] = line
    return loader.construct_mapping(node, deep=deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def dump_config(cfg: TrainConfig, path: str | Path) -> None:
    atomic_write(path, yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
