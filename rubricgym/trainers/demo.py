"""The demo's training configs: SmolLM2-135M-Instruct with GRPO on the toy calculator, one real env family, or a suite.

``rubricgym.demo.run_demo`` (``rubricgym demo``, ``make demo``) trains with them: a GRPO run sized to finish inside
``budget_minutes`` on two CPU cores (the step loop stops when the time left would not cover the final
evaluation), then base and trained policy on the same held-out tasks, each as a mean rubric reward with a
bootstrap confidence interval over tasks, plus the paired gain.

``DEMO_CONFIG`` is the toy demo (``rubricgym demo``); ``FAMILY_DEMOS`` holds one per env family
(``rubricgym demo --env clinical-v0``) and ``SUITE_DEMO`` the mixed suite with the SEC curriculum
(``rubricgym demo --suite``). Every family scores with its env's default rubric; what is tuned per family is the
level (env kwargs) and the agent's harness (response prefix, new tokens). ``configs/demo-*.yaml`` are these dicts
written out for ``rubricgym train --config`` (``tests/test_demo_families.py`` keeps them equal).
"""

from __future__ import annotations

import copy
from typing import Any

from rubricgym.core.registry import spec
from rubricgym.trainers.config import TrainConfig

DEMO_CONFIG: dict[str, Any] = {
    "run_dir": "runs/demo-train",
    "steps": 40,
    "tasks_per_step": 4,
    "group_size": 6,
    "seed": 0,
    "save_every": 3,
    "model": {"name": "smollm2-135m-instruct", "threads": 2},
    "generation": {
        "temperature": 0.7,
        "max_new_tokens": 40,
        "max_batch": 24,
        "response_prefix": '<tool_call>{"name": "',
    },
    "env": {
        "id": "toy-calculator-v0",
        "kwargs": {"min_ops": 1, "max_ops": 1, "max_steps": 3, "style": "expression"},
        "train_tasks": 200,
        "eval_tasks": 24,
    },
    "advantage": {"estimator": "grpo", "scale": "group", "topology": "round_robin"},
    "loss": {"beta": 0.0},
    "optim": {"lr": 1e-5, "micro_batch": 8, "max_grad_norm": 1.0},
}
"""One-operation expression problems (``Compute 22 / 2.``): the untrained model solves some of them, so every
group has a signal to learn from; the response prefix makes each turn start as a tool call."""

TOY_ENV = "toy-calculator-v0"


def _family(run_dir: str, env: dict[str, Any], generation: dict[str, Any], **top: Any) -> dict[str, Any]:
    data = copy.deepcopy(DEMO_CONFIG)
    data.update(run_dir=run_dir, **top)
    data["generation"] = {**data["generation"], **generation}
    data["env"] = env
    return data


KV_REUSE_TOKENS = 65_536
"""The real families' episodes run 4-12 turns: the sampler keeps ~3 GB of keys and values (SmolLM2-135M, fp32) so
each turn prefills only what the env added (a 12-turn clinical evaluation: 28 s instead of 50 s for 4 cases)."""

ANSWER_TOKENS = 192
"""The sampler's cap where deep search plays (its family demo and the suite's): a cited one-hop answer is a name
and three facts, each with its page's URL; the teacher's answers run to 177 tokens (100 training and 99 held-out
tasks at the demo's knobs), and a warm start refuses to clone a turn the sampler would cut off. Clinical's turns
stay within 64."""

WARM_START: dict[str, Any] = {
    "agent": "teacher",
    "tasks": 48,
    "keep": "succeeded",
    "steps": 30,
    "batch_size": 8,
    "lr": 2e-4,
    "train_layers": 8,
    "decision_weight": 10.0,
    "eval_every": 10,
    "save_every": 10,
}
"""The family demos' warm start: the env's ``teacher`` (it acts only on what the policy has seen) plays 48 training
tasks, the episodes that solved theirs are cloned for 30 steps of 8 sequences (~1,900 assistant tokens a step on
clinical) into the top 8 of SmolLM2's 30 decoder layers at lr 2e-4, the tool's name weighted 10x
(``decision_weight``). At the default lr 5e-5 the same cloning under-fits: on clinical the clone still repeated the
teacher's previous turn at 29 of 116 teacher-forced turns and solved no held-out case; at 2e-4 it solves 81%
greedy, and 60 steps at 2e-4 repeat 3 turns of 116 (docs/guides/warm-start.md, "The learning rate"). Cached in
``RUN/warm_start`` and reused by a rerun."""

SEQ_LEN = {"clinical-v0": 1536, "deepsearch-v0": 3072}
"""``optim.max_seq_len`` where each family plays: the teacher's whole episode, answer included, fits (the longest
of 40 cardiology episodes is 1,241 tokens; of 80 one-hop deep-search episodes, 2,330). At the default 1024 the last
turns fell out of the loss: no deep-search answer and about half of the clinical diagnoses were ever cloned, and
GRPO gave them no gradient (``metrics.jsonl``'s ``cut_tokens``). The warm start now refuses such a cut."""

GRPO_OPTIM: dict[str, Any] = {**DEMO_CONFIG["optim"], "lr": 2e-6}
"""GRPO after a warm start steps at lr 2e-6, a fifth of the toy's 1e-5. From the clinical clone (81.2% of held-out
cases solved greedy), 4 GRPO steps at 1e-5 left 18.8% solved; 8 steps at 2e-6 left 81.2% (docs/guides/warm-start.md,
"Measured")."""

FAMILY_DEMOS: dict[str, dict[str, Any]] = {
    "clinical-v0": _family(
        "runs/demo-clinical",
        {
            "id": "clinical-v0",
            "kwargs": {"specialty": "cardiology"},
            "train_tasks": 200,
            "eval_tasks": 16,
        },
        {"max_new_tokens": 64, "max_batch": 16, "kv_reuse_tokens": KV_REUSE_TOKENS},
        tasks_per_step=2,
        save_every=2,
        optim={**GRPO_OPTIM, "max_seq_len": SEQ_LEN["clinical-v0"]},
        warm_start=copy.deepcopy(WARM_START),
    ),
    "deepsearch-v0": _family(
        "runs/demo-deepsearch",
        {
            "id": "deepsearch-v0",
            "kwargs": {"hops": 1, "n_docs": 100, "distractors": 0, "max_steps": 4, "window_chars": 600},
            "train_tasks": 200,
            "eval_tasks": 16,
        },
        {"max_new_tokens": ANSWER_TOKENS, "max_batch": 16, "kv_reuse_tokens": KV_REUSE_TOKENS},
        tasks_per_step=2,
        save_every=2,
        optim={**GRPO_OPTIM, "max_seq_len": SEQ_LEN["deepsearch-v0"]},
        warm_start=copy.deepcopy(WARM_START),
    ),
}
"""clinical: cardiology cases only (6-12 candidate conditions), the env's 12 turns (the untrained model solved 2 of
8 held-out cases greedily; with 6 turns 1 of 16, with 4 turns 0 of 12); deep search: one-hop questions in a
100-page world without list pages, four turns, 600-character page windows (short prompts are what a 135M model on
two cores can afford). Both keep the env's default rubric."""

SUITE_DEMO: dict[str, Any] = _family(
    "runs/demo-suite",
    {"suite": "demo-mix", "curriculum": {"method": "sec"}, "train_tasks": 100},
    {"max_new_tokens": ANSWER_TOKENS, "kv_reuse_tokens": KV_REUSE_TOKENS},
    tasks_per_step=4,
    save_every=2,
    optim={**GRPO_OPTIM, "max_seq_len": max(SEQ_LEN.values())},
    warm_start={**WARM_START, "tasks": 24},
)
"""The built-in ``demo-mix`` suite (toy 1 and 2 operations, one-hop deep search, cardiology cases, each at its family
demo's knobs; the ``levels`` suite's 40 held-out tasks, deep search at 40 turns and 2,000-character windows, took
over 18 minutes to evaluate once) with SEC's learning-progress curriculum choosing which entry each task slot draws
from. Its warm start clones each entry's teacher on 24 of that entry's training tasks."""

RESERVE_S = {TOY_ENV: 150.0, "clinical-v0": 330.0, "deepsearch-v0": 330.0, "suite": 450.0}
"""Seconds of the budget kept for loading, the last step's overrun and the final evaluation (the step loop's
``time_budget_s`` is the rest); the real families' episodes are longer than the toy's. The family and suite demos
(``rubricgym demo --env/--suite``) set the step loop's budget again once the warm start and the first two rows are
done, from the time really left (``demo.run_three_rows``); this reserve is what ``rubricgym train --config
configs/demo-*.yaml`` stops by."""

BUDGET_MINUTES = {TOY_ENV: 12.0, "family": 20.0, "suite": 20.0}
"""The demos' default wall-clock budgets. A family or suite demo's budget covers everything up to its three-row
table: loading the model, the teacher's episodes and the cloning (both skipped when ``RUN/warm_start`` holds a
finished warm start), the held-out evaluations of the base, warm-start and GRPO policies (greedy and sampled) and
the GRPO steps in between; the arena after it judges the evaluations' greedy episodes (seconds)."""


def extra_eval_splits(env_id: str) -> list[str]:
    """Held-out splits a family demo reports beside ``test``: the env's other ``held_out_splits``. Deep search's
    ``test`` is a world training never saw (another world seed), ``test-train-world`` unseen questions about the
    training world; a gain on the second alone may be memorised pages; clinical's ``test-unseen`` cases of the
    conditions training never draws. Greedy only: their sampled rows would cost a family demo about 5 of its 20
    minutes."""
    return list(spec(env_id).load().held_out_splits[1:])


SAMPLED_EVAL = 1
"""Rollouts per held-out task at the training temperature in the demos' sampled rows (greedy: one)."""

DEMO_ENVS = (TOY_ENV, *FAMILY_DEMOS)


def demo_data(env: str | None = None, suite: bool = False) -> dict[str, Any]:
    """The demo's config dict (no time budget): the toy's, a family's (``env``) or the suite's."""
    if suite:
        if env is not None:
            raise ValueError(f"--suite trains the mixed suite: drop --env {env}")
        return copy.deepcopy(SUITE_DEMO)
    if env is None or env == TOY_ENV:
        return copy.deepcopy(DEMO_CONFIG)
    if env not in FAMILY_DEMOS:
        raise ValueError(f"no demo for env {env!r}; demos: {', '.join(DEMO_ENVS)} (or --suite for the mixed suite)")
    return copy.deepcopy(FAMILY_DEMOS[env])


def demo_config(
    budget_minutes: float = 12, *, env: str | None = None, suite: bool = False, **overrides: Any
) -> TrainConfig:
    """The demo's config; the step loop gets the budget minus a reserve for the final evaluation and loading."""
    data = {**demo_data(env, suite), **overrides}
    reserve_s = RESERVE_S["suite" if suite else env or TOY_ENV]
    data["time_budget_s"] = max(30.0, budget_minutes * 60 - reserve_s)
    return TrainConfig.model_validate(data)
