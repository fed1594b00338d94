"""Behaviour cloning (``rubricgym sft``, the ``warm_start:`` stage): the sampler's own prompts, assistant-only loss,
rejection sampling, a tiny run that learns and loads as a local agent, the warm start under ``train``, and resume
after a kill.

Runs clone the toy env's ``teacher``; the token-level mechanics tests lay out its ``oracle``'s conversations (no
training on them), and the refusal of oracles is tested too."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from rubricgym.agents.local import LocalAgent
from rubricgym.core.registry import env_agents, make
from rubricgym.core.rollout import rollout
from rubricgym.core.store import TrajectoryStore
from rubricgym.core.types import Message, Outcome, Task, Trajectory
from rubricgym.trainers.algo.rollouts import flatten
from rubricgym.trainers.config import ConfigError, TrainConfig, WarmStartConfig
from rubricgym.trainers.engine.backends import LocalBackend
from rubricgym.trainers.engine.policy import TrainingPolicy
from rubricgym.trainers.sft import (
    MODEL_DIR,
    Demo,
    clone_turns,
    demo_samples,
    demos_from_trajectories,
    heldout_metrics,
    nll_gradients,
    prepare,
    read_demos,
    relabel,
    run_sft,
    score_missing,
    select,
    split_held_out,
    turn_starts,
    weigh_decisions,
)

ENV = "toy-calculator-v0"
ENV_KWARGS = {"min_ops": 1, "max_ops": 2, "max_steps": 3}
PREFIX = '<tool_call>{"name": "'
REPO = Path(__file__).parents[2]


def oracle_trajectories(n: int, kwargs: dict | None = None) -> list[Trajectory]:
    kwargs = kwargs or ENV_KWARGS
    env = make(ENV, **kwargs)
    agent = env_agents(ENV)["oracle"](seed=0)
    tasks = list(env.task_set(n, seed=0, split="train"))
    return [asyncio.run(rollout(make(ENV, **kwargs), agent, t, seed=i)) for i, t in enumerate(tasks)]


def sft_config(tiny_model_dir: Path, run_dir: Path, **warm: object) -> TrainConfig:
    ws = {"agent": "teacher", "tasks": 8, "steps": 24, "batch_size": 4, "lr": 3e-3}
    ws |= {"held_out": 0.25, "eval_every": 8, "save_every": 8} | warm
    return TrainConfig.model_validate(
        {
            "run_dir": str(run_dir),
            "live": False,
            "model": {"name": str(tiny_model_dir)},
            "env": {"kwargs": ENV_KWARGS, "train_tasks": 16, "eval_tasks": 2},
            "warm_start": ws,
        }
    )


# ---- the same renderer -------------------------------------------------------------------------------------------


def test_sft_prompts_are_the_token_ids_the_sampler_fed_the_model(tiny_model_dir):
    """The trainer's own rollouts record the prompt ids the sampler fed the model at every turn; cloning the same
    conversation must produce exactly those prompts, turn by turn (a prefixed, multi-turn episode)."""
    policy = TrainingPolicy(str(tiny_model_dir), response_prefix=PREFIX, max_new_tokens=6, temperature=1.0, seed=0)
    tasks = list(make(ENV, **ENV_KWARGS).task_set(2, seed=0, split="train"))
    groups = asyncio.run(LocalBackend(policy, lambda t: (ENV, ENV_KWARGS)).collect(tasks, [1, 2], 1))
    compared = 0
    for r in flatten(groups):
        fed = [t.prompt_ids for t in r.turns]
        turns = clone_turns(
            r.trajectory.messages, policy.render, policy.tokenizer, response_prefix=PREFIX, stop=policy.stop
        )
        assert [t.prompt_ids for t in turns] == fed
        compared += len(fed)

        # deliberately broken renderers: the chat template without the response prefix, or without the opened
        # assistant turn, feed the model other tokens, and the comparison says so
        def no_prefix(m: list[Message]) -> list[int]:
            return policy.prompt_ids(m)

        def no_generation_prompt(m: list[Message]) -> list[int]:
            from rubricgym.agents.local import chat_dicts

            out = policy.tokenizer.apply_chat_template(chat_dicts(m), add_generation_prompt=False, tokenize=True)
            return list(out["input_ids"] if hasattr(out, "keys") else out) + policy.tokenizer.encode(
                PREFIX, add_special_tokens=False
            )

        for broken in (no_prefix, no_generation_prompt):
            wrong = clone_turns(
                r.trajectory.messages, broken, policy.tokenizer, response_prefix=PREFIX, stop=policy.stop
            )
            assert [t.prompt_ids for t in wrong] != fed
    assert compared >= 4  # two episodes of several turns each


def test_a_turn_without_the_response_prefix_is_refused(tiny_model_dir):
    policy = TrainingPolicy(str(tiny_model_dir), response_prefix=PREFIX)
    messages = [Message(role="user", content="hi"), Message(role="assistant", content="Step 1: no prefix")]
    with pytest.raises(ValueError, match="response_prefix"):
        clone_turns(messages, policy.render, policy.tokenizer, response_prefix=PREFIX, stop=policy.stop)


def test_a_turn_longer_than_the_sampler_may_generate_is_refused(tiny_model_dir):
    """Deep search's teacher once wrote answers of up to 263 tokens while the demo's sampler stopped at 64: the
    clone learned calls it could only ever emit cut off, and every answer failed to parse (held-out reward 0)."""
    policy = TrainingPolicy(str(tiny_model_dir), response_prefix=PREFIX)
    call = PREFIX + 'answer", "arguments": {"text": "' + "word " * 40 + '"}}</tool_call>'
    messages = [Message(role="user", content="hi"), Message(role="assistant", content=call)]
    n = len(
        clone_turns(messages, policy.render, policy.tokenizer, response_prefix=PREFIX, stop=policy.stop)[
            0
        ].completion_ids
    )
    kw = {"response_prefix": PREFIX, "stop": policy.stop}
    assert clone_turns(messages, policy.render, policy.tokenizer, max_new_tokens=n, **kw)  # exactly the cap fits
    with pytest.raises(ValueError, match=f"{n} tokens, over generation.max_new_tokens {n - 1}"):
        clone_turns(messages, policy.render, policy.tokenizer, max_new_tokens=n - 1, **kw)


# ---- the loss --------------------------------------------------------------------------------------------------


def test_only_assistant_tokens_carry_the_loss_mask(tiny_model_dir):
    policy = TrainingPolicy(str(tiny_model_dir))
    traj = oracle_trajectories(1)[0]
    samples = demo_samples(0, traj.messages, policy, 4096)
    assert len(samples) >= 1
    tok = policy.tokenizer
    trained = [i for s in samples for i, m in zip(s.input_ids, s.loss_mask, strict=True) if m]
    contents = [m.content for m in traj.messages if m.role == "assistant"]
    # every assistant action ends at the stop string, where generation stops: no end-of-turn token is trained
    assert tok.decode(trained) == "".join(contents)
    assert len(trained) == sum(len(tok.encode(c, add_special_tokens=False)) for c in contents)
    untrained = tok.decode([i for s in samples for i, m in zip(s.input_ids, s.loss_mask, strict=True) if not m])
    assert traj.messages[0].content in untrained and traj.task.prompt in untrained


def test_a_final_turn_without_a_stop_string_learns_to_end_its_turn(tiny_model_dir):
    policy = TrainingPolicy(str(tiny_model_dir))
    messages = [Message(role="user", content="2+2?"), Message(role="assistant", content="It is 4.")]
    (turn,) = clone_turns(messages, policy.render, policy.tokenizer, response_prefix="", stop=policy.stop)
    assert turn.completion_ids[-1] == policy.tokenizer.eos_token_id


def test_the_loss_is_the_mean_nll_of_the_masked_tokens_only(tiny_model_dir):
    policy = TrainingPolicy(str(tiny_model_dir))
    samples = demo_samples(0, oracle_trajectories(1)[0].messages, policy, 4096)
    model = policy.lm
    stats = nll_gradients(model, samples, 8, policy.tokenizer.pad_token_id)
    by_hand, count = 0.0, 0
    with torch.no_grad():
        for s in samples:
            ids = torch.tensor([s.input_ids])
            logp = model(input_ids=ids).logits.float().log_softmax(-1)[0, :-1]
            picked = logp.gather(-1, ids[0, 1:, None])[:, 0]
            mask = torch.tensor(s.loss_mask[1:], dtype=torch.bool)
            by_hand -= float(picked[mask].sum())
            count += int(mask.sum())
            everything = -float(picked.mean())
    assert stats["tokens"] == count
    assert stats["loss"] == pytest.approx(by_hand / count, rel=1e-4)
    assert stats["loss"] != pytest.approx(everything, rel=1e-3)  # the prompt's tokens would change it
    model.zero_grad(set_to_none=True)


# ---- data and rejection sampling -------------------------------------------------------------------------------


def _by_hand(model, samples):
    """Each sample's log-prob and argmax hit of every token (position t predicts token t)."""
    out = []
    with torch.no_grad():
        for s in samples:
            ids = torch.tensor([s.input_ids])
            logp = model(input_ids=ids).logits.float().log_softmax(-1)[0, :-1]
            picked = [0.0, *logp.gather(-1, ids[0, 1:, None])[:, 0].tolist()]
            hit = [False, *(logp.argmax(-1) == ids[0, 1:]).tolist()]
            out.append((picked, hit))
    return out


def test_turn_starts_marks_the_first_tokens_of_each_assistant_turn():
    assert turn_starts([0, 1, 1, 1, 0, 0, 1, 1], 2) == [False, True, True, False, False, False, True, True]
    assert turn_starts([0, 1, 1, 0, 1], 1) == [False, True, False, False, True]


def test_decision_weight_weighs_the_first_tokens_of_each_turn_and_one_is_the_plain_loss(tiny_model_dir):
    policy = TrainingPolicy(str(tiny_model_dir))
    model, pad = policy.lm, policy.tokenizer.pad_token_id
    samples = demo_samples(0, oracle_trajectories(2)[1].messages, policy, 4096)
    plain = nll_gradients(model, samples, 8, pad)
    weigh_decisions(samples, 1, 1.0)
    assert nll_gradients(model, samples, 8, pad)["loss"] == pytest.approx(plain["loss"], rel=1e-5)
    weigh_decisions(samples, 2, 10.0)
    weighted = nll_gradients(model, samples, 8, pad)
    by_hand = 0.0
    for s, (picked, _) in zip(samples, _by_hand(model, samples), strict=True):
        firsts = turn_starts(s.loss_mask, 2)
        by_hand -= sum(lp * (10.0 if f else 1.0) for lp, m, f in zip(picked, s.loss_mask, firsts, strict=True) if m)
    assert weighted["tokens"] == plain["tokens"]
    assert weighted["loss"] == pytest.approx(by_hand / plain["tokens"], rel=1e-4)
    assert weighted["loss"] > plain["loss"] * 1.2  # measured: the tool names' tokens weigh in
    model.zero_grad(set_to_none=True)


def test_rejection_sampling_keeps_successes_or_rubric_totals():
    task = Task(id="t", env_id=ENV, prompt="p")

    def demo(i: int, ok: bool, score: float | None) -> Demo:
        return Demo(str(i), f"t{i}", "teacher", [], "run", succeeded=ok, score=score)

    demos = [demo(0, True, 0.9), demo(1, False, 0.6), demo(2, True, None), demo(3, False, 0.1)]
    assert [d.id for d in select(demos, WarmStartConfig(agent="teacher", keep="succeeded"))] == ["0", "2"]
    assert [d.id for d in select(demos, WarmStartConfig(agent="teacher", keep="rubric", min_rubric=0.5))] == ["0", "1"]
    assert len(select(demos, WarmStartConfig(agent="teacher", keep="all"))) == 4
    traj = Trajectory(task=task, outcome=Outcome(reward=1.0), rewards={"rubric": 0.75})
    (d,) = demos_from_trajectories([traj], "run", {})
    assert d.succeeded and d.score == 0.75


def test_export_sft_files_are_read_and_need_rubric_or_all(tmp_path):
    traj = oracle_trajectories(1)[0]
    row = {"messages": [m.to_openai() for m in traj.messages], "task_id": "t", "trajectory_id": "x", "score": 0.9}
    path = tmp_path / "sft.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (d,) = read_demos(path)
    assert [m.content for m in d.messages] == [m.content for m in traj.messages] and d.score == 0.9
    with pytest.raises(ConfigError, match="keep: rubric"):
        select([d], WarmStartConfig(data=[str(path)]))
    path.write_text("{not json\n")
    with pytest.raises(ConfigError, match="sft.jsonl:1"):
        read_demos(path)


def test_a_warm_start_needs_data_and_refuses_oracles(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match="warm_start needs trajectories"):
        WarmStartConfig()
    with pytest.raises(ConfigError, match="oracle.*teacher"):
        run_sft(sft_config(tiny_model_dir, tmp_path, agent="oracle"), tmp_path / "out")
    store = TrajectoryStore(tmp_path / "oracle-run")
    store.extend(oracle_trajectories(2))
    with pytest.raises(ConfigError, match="oracle-run holds trajectories of an oracle"):
        run_sft(sft_config(tiny_model_dir, tmp_path, agent=None, data=[str(tmp_path / "oracle-run")]), tmp_path / "o3")
    with pytest.raises(ConfigError, match="train_layers and model.lora"):
        run_sft(
            sft_config(tiny_model_dir, tmp_path, train_layers=1).model_copy(
                update={"model": TrainConfig.model_validate({"model": {"name": str(tiny_model_dir), "lora": {}}}).model}
            ),
            tmp_path / "out2",
        )


# ---- a tiny run ------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_tiny_run_lowers_the_loss_and_its_model_plays_as_a_local_agent(tiny_model_dir, tmp_path):
    out = tmp_path / "sft"
    summary = run_sft(sft_config(tiny_model_dir, tmp_path, lr=1e-2), out)
    assert summary["steps"] == 24 and summary["kept"] >= 6
    assert summary["last_loss"] < 0.5 * summary["first_loss"]  # measured: 10.79 -> 2.28
    assert summary["heldout_loss_after"] < 0.5 * summary["heldout_loss_before"]
    assert summary["heldout_accuracy_after"] > summary["heldout_accuracy_before"] + 0.2  # measured: 0.00 -> 0.51
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == list(range(1, 25))
    assert [r["step"] for r in records if r["kind"] == "eval"] == [0, 8, 16, 24]
    assert (out / "loss.png").stat().st_size > 0 and (out / "summary.html").exists()
    # what `rubricgym run ENV --agent local --model OUT/model` does
    agent = LocalAgent(str(out / MODEL_DIR), temperature=0.0, max_new_tokens=32, seed=0)
    task = next(iter(make(ENV, **ENV_KWARGS).task_set(1, seed=5, split="test")))
    traj = asyncio.run(rollout(make(ENV, **ENV_KWARGS), agent, task, seed=0))
    assert traj.steps and traj.model == str(out / MODEL_DIR)
    # the directory holds the trained weights: the agent's network scores the held-out clone as the run measured
    cfg = sft_config(tiny_model_dir, tmp_path, lr=1e-2)
    demos = [d for d in read_demos(out / "teacher") if d.succeeded]
    _, held = prepare(
        demos,
        cfg.warm_start,
        TrainingPolicy(str(out / MODEL_DIR)),
        cfg.optim.max_seq_len,
        cfg.generation.max_new_tokens,
    )
    again = heldout_metrics(agent.lm, held, 8, agent.tokenizer.pad_token_id)
    assert again["heldout_loss"] == pytest.approx(summary["heldout_loss_after"], rel=1e-4)
    # decision accuracy: the share of turns whose first 2 tokens (the tool's name) are all the argmax
    right = turns = 0
    for sample, (_, hit) in zip(held, _by_hand(agent.lm, held), strict=True):
        begins = [i for i, b in enumerate(turn_starts(sample.loss_mask, 1)) if b]
        turns += len(begins)
        right += sum(hit[a] and hit[a + 1] for a in begins)
    assert turns >= 2 and right > 0
    assert again["heldout_decision_accuracy"] == pytest.approx(right / turns)
    assert summary["heldout_decision_accuracy_after"] == pytest.approx(again["heldout_decision_accuracy"])
    assert summary["heldout_decision_accuracy_after"] > summary["heldout_decision_accuracy_before"]


def test_train_layers_trains_only_the_top_layers(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    out = tmp_path / "sft"
    run_sft(sft_config(tiny_model_dir, tmp_path, lr=1e-2, steps=2, train_layers=1, held_out=0.0), out)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    tuned = AutoModelForCausalLM.from_pretrained(out / MODEL_DIR).state_dict()
    changed = {k for k in base if not torch.equal(base[k], tuned[k])}
    assert changed and all(k.startswith(("model.layers.1.", "model.norm.")) for k in changed)


@pytest.mark.slow
def test_train_runs_the_warm_start_first_and_reuses_it(tiny_config, tmp_path):
    from rubricgym.trainers.trainer import Trainer

    warm = {"agent": "teacher", "tasks": 6, "steps": 6, "batch_size": 4, "lr": 3e-3, "allow_cut_turns": True}
    cfg = tiny_config(tmp_path / "run", steps=1, env={"train_tasks": 8}, warm_start=warm)
    first = Trainer(cfg).run()
    ws = tmp_path / "run" / "warm_start"
    stamp = (ws / "metrics.jsonl").read_text()
    assert (ws / MODEL_DIR / "model.safetensors").exists() and first["steps"] == 1
    again = Trainer(cfg).run()  # a fresh run in the same directory: the finished warm start is reused as it is
    assert (ws / "metrics.jsonl").read_text() == stamp
    assert again["base"] == first["base"]  # GRPO starts from the same warm-started weights
    changed = cfg.model_copy(update={"warm_start": cfg.warm_start.model_copy(update={"steps": 7})})
    with pytest.raises(ConfigError, match="different settings.*warm_start"):
        Trainer(changed).run()


# ---- resume after a kill -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_sft_resumes_after_a_kill(tiny_model_dir, tmp_path):
    cfg = sft_config(tiny_model_dir, tmp_path, steps=40, save_every=4, eval_every=100, held_out=0.0)
    path = tmp_path / "sft.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json", by_alias=True)))
    out = tmp_path / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "rubricgym", "sft", "-c", str(path), "--out", str(out), "--live"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    while not (out / "checkpoints" / "step-000008" / "state.json").exists():
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert time.monotonic() < deadline, "no checkpoint at step 8 within 240 s"
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = json.loads((sorted((out / "checkpoints").glob("step-*"))[-1] / "state.json").read_text())["step"]
    assert killed_at < 40
    refused = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "--resume" in refused.stdout
    done = subprocess.run([*cmd, "--resume"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warm start step 40/40" in done.stdout  # plain progress lines when not on a terminal
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 41))  # the killed run's steps after its checkpoint were rewritten once
    assert (out / MODEL_DIR / "model.safetensors").exists()


def test_rubric_rejection_sampling_scores_unscored_trajectories_with_the_reward_path():
    from rubricgym.rewards.path import RewardPath

    env = make(ENV, **ENV_KWARGS)
    tasks = list(env.task_set(4, seed=0, split="train"))
    trajs = [
        asyncio.run(rollout(make(ENV, **ENV_KWARGS), env_agents(ENV)[name](seed=i), t, seed=i))
        for name in ("teacher", "guess")
        for i, t in enumerate(tasks)
    ]
    demos = demos_from_trajectories(trajs, "run", {})
    assert all(d.score is None for d in demos)
    path = RewardPath(entry=env.default_rubric())
    asyncio.run(score_missing(demos, lambda task: path))
    totals = [b.total for b in asyncio.run(path.score_many(trajs))]
    assert [d.score for d in demos] == pytest.approx(totals)
    kept = select(demos, WarmStartConfig(agent="teacher", keep="rubric", min_rubric=0.5))
    assert [d.id for d in kept] == [d.id for d, t in zip(demos, totals, strict=True) if t >= 0.5]
    assert 0 < len(kept) < len(demos)  # the guesser's wrong answers fall below the threshold


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["lora", "fsdp2"])
def test_lora_and_fsdp2_clone_and_export_a_model_directory(tiny_model_dir, tmp_path, mode):
    cfg = sft_config(tiny_model_dir, tmp_path, lr=1e-2, steps=4, eval_every=2, save_every=2)
    model = {"lora": {"r": 4}} if mode == "lora" else {"parallel": {"strategy": "fsdp2"}}
    cfg = TrainConfig.model_validate(
        cfg.model_dump(mode="json", by_alias=True) | {"model": cfg.model.model_dump() | model}
    )
    was_distributed = torch.distributed.is_initialized()
    try:
        summary = run_sft(cfg, tmp_path / "out")  # fsdp2 in one process: a gloo group of one
    finally:
        if torch.distributed.is_initialized() and not was_distributed:
            torch.distributed.destroy_process_group()  # later tests expect a process without one
    ckpt = tmp_path / "out" / "checkpoints" / "step-000004"
    assert (ckpt / ("adapter_model.safetensors" if mode == "lora" else "dcp")).exists()
    assert summary["last_loss"] < summary["first_loss"]
    assert summary["heldout_accuracy_after"] > summary["heldout_accuracy_before"]
    agent = LocalAgent(summary["model"])
    assert sum(p.numel() for p in agent.lm.parameters()) > 0 and not any(
        "lora" in n for n, _ in agent.lm.named_parameters()
    )


def test_the_sft_command_names_what_is_missing_or_wrong(tmp_path):
    from typer.testing import CliRunner

    from rubricgym.cli import app

    runner = CliRunner()
    missing = runner.invoke(app, ["sft", "--out", str(tmp_path / "o")], env={"COLUMNS": "200"})
    assert missing.exit_code == 2 and "warm_start needs trajectories" in missing.output
    bad = runner.invoke(app, ["sft", "--agent", "teacher", "--keep", "best"], env={"COLUMNS": "200"})
    assert bad.exit_code == 2 and "warm_start.keep" in bad.output
    assert not (tmp_path / "o").exists()  # nothing was written before the config validated


# ---- DAgger ------------------------------------------------------------------------------------------------------


def test_dagger_labels_every_state_the_clone_reached_with_the_teachers_turn(tiny_model_dir):
    env = make(ENV, **ENV_KWARGS)
    tasks = list(env.task_set(4, seed=0, split="train"))
    drifted = [  # the "random" agent stands in for a clone that left the teacher's path
        asyncio.run(rollout(make(ENV, **ENV_KWARGS), env_agents(ENV)["random"](seed=i), t, seed=i))
        for i, t in enumerate(tasks)
    ]
    teacher = env_agents(ENV)["teacher"](seed=0)
    labels, differ = asyncio.run(relabel(drifted, teacher, env.tools()))
    turns = [(t, i) for t in drifted for i, m in enumerate(t.messages) if m.role == "assistant"]
    assert len(labels) == len(turns) and differ > 0
    for label, (t, i) in zip(labels, turns, strict=True):
        assert label.train_from == i and label.task_id == t.task.id
        assert label.messages[:-1] == t.messages[:i]  # the clone's own chat up to the state, as it saw it
        again = asyncio.run(teacher.episode(t.task, t.seed).act(list(t.messages[:i]), env.tools()))
        assert label.messages[-1] == Message(role="assistant", content=again)
    # a label trains the teacher's turn alone, not the clone's turns before it
    policy = TrainingPolicy(str(tiny_model_dir), response_prefix=PREFIX)
    late = max(labels, key=lambda x: x.train_from)
    assert late.train_from > 2  # a state after some of the clone's own turns
    (turn,) = clone_turns(
        late.messages, policy.render, policy.tokenizer, response_prefix=PREFIX, stop=policy.stop, first=late.train_from
    )
    assert PREFIX + turn.text == late.messages[-1].content
    with pytest.raises(ValueError, match="does not start with"):  # the random clone's turns, were they cloned
        clone_turns(late.messages, policy.render, policy.tokenizer, response_prefix=PREFIX, stop=policy.stop)


def test_dagger_needs_a_teacher():
    with pytest.raises(ValueError, match="dagger_rounds needs agent"):
        WarmStartConfig(data=["run"], dagger_rounds=1)


@pytest.mark.slow
def test_a_dagger_round_plays_the_clone_labels_its_states_and_clones_on(tiny_model_dir, tmp_path):
    out = tmp_path / "sft"
    cfg = sft_config(tiny_model_dir, tmp_path, steps=4, dagger_rounds=1, dagger_tasks=3, dagger_steps=3, held_out=0.0)
    cfg = cfg.model_copy(update={"generation": cfg.generation.model_copy(update={"max_new_tokens": 40})})
    summary = run_sft(cfg, out)
    assert summary["steps"] == 7
    (round1,) = summary["dagger"]
    played = list(TrajectoryStore(out / "dagger-1").iter())
    assert round1["episodes"] == len(played) == 3 and {t.agent for t in played} == {"policy"}
    assert round1["labels"] == sum(m.role == "assistant" for t in played for m in t.messages) > 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == list(range(1, 8))
    # finished: a second run reuses it and plays nothing again
    before = (out / "dagger-1" / "trajectories.jsonl").stat().st_mtime_ns
    assert run_sft(cfg, out, resume=True)["steps"] == 7
    assert (out / "dagger-1" / "trajectories.jsonl").stat().st_mtime_ns == before


def test_dagger_labels_keep_the_held_out_split_of_the_cloned_trajectories():
    ws = WarmStartConfig(agent="teacher", held_out=0.25)
    demos = [Demo(f"t{i}", f"task-{i}", "teacher", [], "run") for i in range(8)]
    _, held = split_held_out(demos, ws)
    labels = [Demo(f"l{i}", f"task-{i}", "teacher (DAgger label)", [], "label", train_from=3) for i in range(40)]
    train2, held2 = split_held_out(demos + labels, ws)  # labels of 32 tasks no trajectory had
    assert {d.task_id for d in held2} == {d.task_id for d in held}  # the same held-out tasks as before the labels
    assert {d.id for d in held2 if d.train_from} == {f"l{d.task_id.split('-')[1]}" for d in held}


def test_a_conversation_past_max_seq_len_is_refused_not_silently_cut(tiny_model_dir, tmp_path):
    # At the default 1024 tokens the deep-search teacher's episodes (1,400-2,300 tokens) lost their answer turn
    # from the loss, and the clone never learned to answer; the warm start now says so before cloning.
    policy = TrainingPolicy(str(tiny_model_dir))
    demos = demos_from_trajectories(oracle_trajectories(4), "oracle-run", {})
    full = [len(s) for d in demos for s in demo_samples(0, d.messages, policy, 100_000)]
    limit = min(full) - 1  # every conversation's last assistant tokens lie past it
    cfg = sft_config(tiny_model_dir, tmp_path, allow_oracle=True)
    with pytest.raises(ConfigError) as e:
        prepare(demos, cfg.warm_start, policy, limit, cfg.generation.max_new_tokens)
    msg = str(e.value)
    assert f"run past optim.max_seq_len ({limit} tokens), the longest to {max(full)}" in msg
    assert f"optim.max_seq_len to at least {max(full)}" in msg and "allow_cut_turns" in msg
    cut = cfg.warm_start.model_copy(update={"allow_cut_turns": True})
    train, held = prepare(demos, cut, policy, limit, cfg.generation.max_new_tokens)
    assert train and all(len(s) <= limit for s in [*train, *held])
    fits, _ = prepare(demos, cfg.warm_start, policy, max(full), cfg.generation.max_new_tokens)
    assert sum(len(s) for s in fits) > sum(len(s) for s in train)
