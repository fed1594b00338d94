"""The checks behind ``TrainConfig`` that a field's own type cannot express.

Two kinds, both run before any model loads or any run directory exists:

- combinations of fields the trainer cannot run (``lora`` with ``ray``, ``async`` with ``vllm``, ``env.suite`` with a
  pipelined producer, ...): each ``check_*`` raises ``ValueError`` with a message that says what to change, and the
  pydantic models in ``trainers/config.py`` call them from their validators;
- values the schema accepts but this installation cannot run (an unregistered env, a constructor argument it does
  not take, an unknown model, a missing tracker package): each ``*_problems`` returns ``(field, problem)`` pairs
  that ``validate_config`` turns into one ``ConfigError``.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from rubricgym.agents.models import KNOWN_MODELS, is_model_dir
from rubricgym.core.registry import spec
from rubricgym.rewards.path import llm_criteria
from rubricgym.rewards.rubric import RubricError, load_rubric
from rubricgym.rewards.validate import unknown_checks
from rubricgym.suites.suite import SuiteError, load_suite

if TYPE_CHECKING:
    from rubricgym.trainers.config import EnvConfig, LoraConfig, ModelConfig, ParallelConfig, TrainConfig

TRACKER_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}
"""The package each ``report_to`` tracker imports (all three are in the ``trackers`` extra)."""


def check_lora(lora: LoraConfig) -> None:
    """PEFT is installed and there is something to adapt."""
    if importlib.util.find_spec("peft") is None:
        raise ValueError("LoRA needs the peft package: pip install 'rubricgym[train]' (or pip install peft)")
    if isinstance(lora.target_modules, list) and not lora.target_modules:
        raise ValueError("target_modules is empty: name the modules to adapt, or 'all-linear'")


def check_parallel(parallel: ParallelConfig) -> None:
    """The fsdp2-only settings keep their defaults under ``ddp``."""
    default = type(parallel).model_construct()
    extra = [
        k
        for k in ("mixed_precision", "cpu_offload", "reshard_after_forward")
        if getattr(parallel, k) != getattr(default, k)
    ]
    if parallel.strategy == "ddp" and extra:
        raise ValueError(f"{', '.join(extra)}: set for strategy 'fsdp2' only (the strategy is 'ddp')")


def check_model(model: ModelConfig) -> None:
    """The sharding settings fit the model's device and precision; one setting chooses what trains."""
    if model.train_layers is not None and model.lora is not None:
        raise ValueError("model.train_layers and model.lora both choose what trains: keep one")
    p = model.parallel
    if p.cpu_offload and model.device == "cpu":
        raise ValueError(
            "model.parallel.cpu_offload keeps GPU shards in CPU memory: the model is on the CPU already "
            "(set model.device to cuda, or drop cpu_offload)"
        )
    if p.strategy == "fsdp2" and p.mixed_precision == "bf16" and model.bf16_autocast:
        raise ValueError("model.bf16_autocast and parallel.mixed_precision 'bf16' both cast to bf16: keep one")


def check_suite(env: EnvConfig) -> None:
    """``env.suite`` loads and leaves the fields its entries set (``id``, ``kwargs``, ``rubric``) alone."""
    if env.suite is None:
        return
    defaults: dict[str, Any] = {"id": "toy-calculator-v0", "kwargs": {}, "rubric": None}
    clash = [k for k, v in defaults.items() if getattr(env, k) != v]
    if clash:
        raise ValueError(f"env.suite replaces {', '.join(sorted(clash))}: set those in the suite's entries")
    try:
        load_suite(env.suite)
    except SuiteError as e:
        raise ValueError(str(e)) from None


def check_trackers(names: list[str]) -> None:
    """Each ``report_to`` tracker is named once and its package is installed."""
    if len(set(names)) != len(names):
        raise ValueError(f"a tracker is named twice in {names}")
    missing = [
        f"report_to {name!r} needs the {TRACKER_PACKAGES[name]} package: pip install 'rubricgym[trackers]' "
        f"(or pip install {TRACKER_PACKAGES[name]})"
        for name in names
        if importlib.util.find_spec(TRACKER_PACKAGES[name]) is None
    ]
    if missing:
        raise ValueError("; ".join(missing))


def check_train(cfg: TrainConfig) -> None:
    """The run's sections fit together: estimator and group size, backend (ray, vllm) against LoRA and fsdp2,
    suite and async sampling, the vLLM push against LoRA, the judge against the rubric buffer's writer."""
    if cfg.advantage.estimator == "tournament" and cfg.group_size < 2:
        raise ValueError("advantage.estimator 'tournament' needs group_size >= 2")
    if cfg.generation.backend == "vllm" and cfg.ray:
        raise ValueError("generation.backend 'vllm' already batches generation: do not combine it with ray")
    if cfg.model.lora is not None and cfg.ray:
        # the Ray workers load plain state dicts: an adapted network's keys (base_layer, lora_) would not fit
        raise ValueError("model.lora does not run with ray yet: use the transformers or vllm backend")
    if cfg.model.parallel.strategy == "fsdp2" and (cfg.ray or cfg.generation.backend == "vllm"):
        # both load whole state dicts from the learner; gathering them from the shards is not wired yet
        raise ValueError("model.parallel.strategy 'fsdp2' runs with the transformers backend only (not ray or vllm)")
    if cfg.generation.vllm_push == "adapter" and cfg.model.lora is None:
        raise ValueError(
            "generation.vllm_push 'adapter' pushes LoRA adapters: set model.lora, or keep vllm_push 'merged' "
            "(the default) for full fine-tuning"
        )
    if cfg.generation.vllm_push == "adapter" and cfg.model.lora is not None and cfg.model.lora.r > 512:
        raise ValueError("generation.vllm_push 'adapter' needs model.lora.r <= 512 (vLLM's largest --max-lora-rank)")
    check_agent_program(cfg)
    check_async(cfg)
    check_ray_weight_sync(cfg)
    check_ray_learners(cfg)
    if cfg.judge is not None:
        cfg.judge.validate_pair()
    llm_writer = cfg.rubric_buffer is not None and cfg.rubric_buffer.writer == "llm"
    if llm_writer and (cfg.judge is None or not cfg.judge.endpoints()):
        raise ValueError(
            "rubric_buffer.writer 'llm' writes criteria only an LLM can judge: add a judge: section "
            "(base_url and model), or use writer 'checks'"
        )


def check_agent_program(cfg: TrainConfig) -> None:
    """``generation.agent_program`` names a function that imports, and the run plays it the way the proxy can:
    in this process (not ray or vllm), one env (not a suite), with no guidance hint to show it."""
    ref = cfg.generation.agent_program
    if ref is None:
        return
    from rubricgym.proxy.episodes import load_agent_program

    load_agent_program(ref)
    if cfg.ray or cfg.generation.backend == "vllm" or cfg.env.suite is not None:
        raise ValueError(
            "generation.agent_program runs with the transformers backend on one env (not ray, vllm or env.suite)"
        )
    if cfg.guidance is not None:
        raise ValueError("generation.agent_program: guidance hints cannot be shown to your agent: remove guidance")


def check_ray_learners(cfg: TrainConfig) -> None:
    """``ray_learners > 1`` places learner ranks beside rank 0's pool: what a torchrun rank with ray can run."""
    if cfg.ray_learners == 1:
        return
    if not cfg.ray:
        raise ValueError("ray_learners > 1 places the learner ranks on Ray: set ray: true (or torchrun without ray)")
    if cfg.guidance is not None or cfg.async_.enabled:
        raise ValueError(
            "ray_learners > 1 collects as a collective of every rank: guidance (re-rolls only on the ranks whose "
            "groups failed) and async (a collection beside the gradient all_reduce) cannot run with it"
        )


def check_ray_weight_sync(cfg: TrainConfig) -> None:
    """``generation.ray_weight_sync 'collective'`` is a Ray pool's transport: the local and vLLM backends push
    their own way."""
    if cfg.generation.ray_weight_sync == "collective" and not cfg.ray:
        raise ValueError(
            "generation.ray_weight_sync 'collective' sends weights to Ray rollout actors: set ray: true (or "
            "--ray), or drop ray_weight_sync (the transformers and vllm backends push their own way)"
        )


def check_async(cfg: TrainConfig) -> None:
    """``async.enabled`` runs where the sampler copy can be published, and ``max_staleness > 0`` only where step
    k's tasks and rubric do not depend on step k-1's update."""
    if not cfg.async_.enabled:
        return
    if cfg.generation.backend == "vllm" or cfg.model.parallel.strategy == "fsdp2":
        # publishing to a vLLM server or from shards is not wired into the pipeline yet
        raise ValueError("async.enabled runs with the transformers backend or ray, and ddp (not vllm or fsdp2)")
    if cfg.ray and cfg.eval_every:
        raise ValueError(
            "async.enabled with ray evaluates at the start and the end only (eval_every: 0): while the pipeline "
            "runs, the actors hold the sampler's weights, not the learner's"
        )
    if cfg.async_.max_staleness == 0:
        return  # exactly the synchronous order: everything the loop supports
    if cfg.env.suite is not None:
        raise ValueError(
            "async.max_staleness > 0 does not run on env.suite: the curriculum that draws step k's tasks is "
            "updated by step k-1's rewards, which a pipelined producer has not seen yet (use max_staleness 0)"
        )
    if cfg.rubric_buffer is not None:
        raise ValueError(
            "async.max_staleness > 0 does not run with rubric_buffer: the rubric step k is scored with may "
            "change after step k-1's update, which a pipelined producer has not seen yet (use max_staleness 0)"
        )


def non_finite(data: Any, where: str = "") -> list[str]:
    """Dotted fields of ``data`` holding a float that is not finite (``.inf``, ``.nan``), nested lists included."""
    out: list[str] = []
    stack: list[tuple[str, Any]] = [(where, data)]
    while stack:
        at, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            out.append(at or "(config)")
        elif isinstance(value, dict):
            stack += [(f"{at}.{k}" if at else str(k), v) for k, v in value.items()]
        elif isinstance(value, list | tuple):
            stack += [(f"{at}[{i}]", v) for i, v in enumerate(value)]
    return sorted(out)


def world_problems(cfg: TrainConfig) -> list[tuple[str, str]]:
    """``(field, problem)`` for values the schema accepts but this installation cannot run: an unregistered
    env, keyword arguments its constructor does not take, a rubric file that is missing or names unknown
    checks, an unknown model. Checked before anything loads or any run directory is created."""
    out: list[tuple[str, str]] = []
    try:
        env_cls = spec(cfg.env.id).load()
    except KeyError as e:
        out.append(("env.id", str(e.args[0])))
        env_cls = None
    if env_cls is not None:
        params = inspect.signature(env_cls.__init__).parameters
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            allowed = [n for n in params if n != "self"]
            for key in cfg.env.kwargs:
                if key not in allowed:
                    out.append(
                        (f"env.kwargs.{key}", f"{cfg.env.id} takes no argument {key!r}; it takes: {', '.join(allowed)}")
                    )
        if not any(field.startswith("env.kwargs") for field, _ in out):
            out += kwarg_type_problems(env_cls.__init__, cfg.env.kwargs)
    if cfg.env.rubric is not None:
        try:
            rubric = load_rubric(cfg.env.rubric)
        except (RubricError, OSError) as e:
            out.append(("env.rubric", str(e)))
        else:
            if env_cls is not None:
                out += [("env.rubric", m) for m in unknown_checks(rubric, env_cls.checks(), cfg.env.id)]
            llm = llm_criteria(rubric)
            if llm and (cfg.judge is None or not cfg.judge.endpoints()):
                out.append(
                    (
                        "judge",
                        f"the rubric's criteria {', '.join(llm)} need an LLM judge: add a judge: section with the "
                        "base_url and model of an OpenAI-compatible server (e.g. `rubricgym model serve`)",
                    )
                )
    name = cfg.model.name
    if name.lower() not in KNOWN_MODELS and not is_model_dir(Path(name).expanduser()):
        out.append(
            (
                "model.name",
                f"{name!r} is neither a known model ({', '.join(KNOWN_MODELS)}) nor a model "
                "directory with a config.json",
            )
        )
    return out


def kwarg_type_problems(init: Any, kwargs: dict[str, Any]) -> list[tuple[str, str]]:
    """``(env.kwargs.NAME, problem)`` for each keyword argument whose value does not fit the type ``init`` (the
    env's constructor) declares for it."""
    try:
        hints = typing.get_type_hints(init)
    except Exception:  # an annotation this interpreter cannot resolve: leave the values to env_problems
        return []
    out = []
    for key, value in kwargs.items():
        if key in hints:
            try:
                TypeAdapter(hints[key]).validate_python(value)
            except ValidationError as e:
                out.append(
                    (f"env.kwargs.{key}", f"{value!r} is not a {_type_name(hints[key])}: {e.errors()[0]['msg']}")
                )
    return out


def _type_name(t: Any) -> str:
    return getattr(t, "__name__", None) or str(t).replace("typing.", "")


def env_problems(cfg: TrainConfig) -> list[tuple[str, str]]:
    """``(field, problem)`` when the env cannot be built from ``env.id`` and ``env.kwargs`` (a value out of its
    range): ``rubricgym train`` checks it before creating the run directory. Builds (and closes) one env."""
    if cfg.env.suite is not None:
        return []
    try:
        env = spec(cfg.env.id).make(**cfg.env.kwargs)
    except Exception as e:
        return [("env.kwargs", f"{cfg.env.id} cannot be built with {cfg.env.kwargs}: {type(e).__name__}: {e}")]
    env.close()
    return []
