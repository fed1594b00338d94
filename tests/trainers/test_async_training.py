"""``async: {enabled, max_staleness}``: the trainer's rollouts pipelined ahead of its updates on a tiny model."""

import json
import math

import pytest
import torch
import yaml
from safetensors.torch import load_file

from rubricgym.trainers.config import ConfigError, TrainConfig, validate_config
from rubricgym.trainers.engine.sampler_copy import SamplerCopy
from rubricgym.trainers.trainer import Trainer

STYLES = (("expr", "expression"), ("word", "word"))
ASYNC_ONLY = ("staleness", "policy_version")


def records(run_dir, kind="train"):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def weights(run_dir, step):
    return load_file(str(run_dir / "checkpoints" / f"step-{step:06d}" / "model.safetensors"))


@pytest.mark.slow
def test_max_staleness_0_is_the_synchronous_trainer_bit_for_bit(tiny_config, tmp_path):
    """Same samples, same updates, same evaluations: every logged number and every final weight is equal."""
    over = {"steps": 3, "guidance": {"threshold": 1.1, "max_level": 1}, "loss": {"beta": 0.05, "entropy_coef": 0.05}}
    sync = tiny_config(tmp_path / "sync", **over)
    pipelined = tiny_config(tmp_path / "async", **over, **{"async": {"enabled": True, "max_staleness": 0}})
    Trainer(sync).run()
    Trainer(pipelined).run()
    a, b = records(sync.run_dir), records(pipelined.run_dir)
    assert [r["staleness"] for r in b] == [0, 0, 0]
    assert [r["policy_version"] for r in b] == [0, 1, 2]
    assert a[0]["guidance/share"] > 0  # the guided re-rolls went through the sampler copy too
    assert all(r["grad_norm"] > 0 for r in a)  # the weights move (the entropy bonus), so equality means something

    def same(r):
        return {k: v for k, v in r.items() if not k.endswith("_s") and k not in ASYNC_ONLY}

    assert [same(r) for r in a] == [same(r) for r in b]
    assert records(sync.run_dir, "eval") == records(pipelined.run_dir, "eval")
    wa, wb = weights(sync.run_dir, 3), weights(pipelined.run_dir, 3)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.slow
def test_a_suite_with_its_curriculum_runs_pipelined_at_staleness_0_as_it_runs_synchronously(tiny_config, tmp_path):
    toy = {"env": "toy-calculator-v0", "tasks": 2, "kwargs": {"min_ops": 1, "max_ops": 1, "max_steps": 2}}
    entries = [{**toy, "name": n, "kwargs": {**toy["kwargs"], "style": style}} for n, style in STYLES]
    suite = tmp_path / "two-toys.yaml"
    suite.write_text(yaml.safe_dump({"name": "two-toys", "entries": entries}))
    runs = []
    for name, pipelined in (("sync", False), ("async", True)):
        data = tiny_config(tmp_path / name, loss={"entropy_coef": 0.05}).model_dump(mode="json")
        data["env"] = {"suite": str(suite), "train_tasks": 6, "curriculum": {"method": "sec", "alpha": 0.5}}
        data["async"] = {"enabled": pipelined, "max_staleness": 0}
        cfg = TrainConfig.model_validate(data)
        Trainer(cfg).run()
        runs.append(
            [{k: v for k, v in r.items() if not k.endswith("_s") and k not in ASYNC_ONLY} for r in records(cfg.run_dir)]
        )
    assert runs[0] == runs[1] and "curriculum/word/q" in runs[0][-1]


@pytest.mark.slow
def test_max_staleness_1_trains_each_batch_one_version_behind_with_the_mismatch_logged(tiny_config, tmp_path):
    """Step k+1's rollouts are generated while update k trains, from the weights after update k-1: staleness 1,
    corrected by TIS against the learner's log-probs, and the run checkpoints and resumes."""
    pipelined = {"async": {"enabled": True, "max_staleness": 1}}
    cfg = tiny_config(tmp_path / "s1", steps=4, save_every=2, loss={"entropy_coef": 0.05}, **pipelined)
    summary = Trainer(cfg).run()
    train = records(cfg.run_dir)
    assert [r["step"] for r in train] == [1, 2, 3, 4]
    assert [r["staleness"] for r in train] == [0, 1, 1, 1]
    assert [r["policy_version"] for r in train] == [0, 0, 1, 2]
    assert all(math.isfinite(r["loss"]) and math.isfinite(r["mismatch_kl"]) for r in train)
    assert train[1]["mismatch_kl"] > 0  # sampled one update ago: the learner's log-probs differ from the sampler's
    assert train[0]["mismatch_kl"] < 1e-6  # same weights on both sides
    assert all(r["episode_max_s"] >= r["episode_p99_s"] >= r["episode_p50_s"] > 0 for r in train)  # the long tail
    assert summary["steps"] == 4 and [r["cursor"] for r in train] == [2, 4, 6, 8]
    resumed = Trainer(cfg.with_overrides(steps=6))  # from step 4's checkpoint: the producer restarts from there
    resumed.run(resume=True)
    again = records(cfg.run_dir)
    assert [r["step"] for r in again] == [1, 2, 3, 4, 5, 6]
    assert [r["cursor"] for r in again[4:]] == [10, 12]
    assert [r["policy_version"] for r in again[4:]] == [4, 4]


@pytest.mark.slow
def test_ray_actors_as_the_pipelined_sampler_train_as_the_local_sampler_copy(tiny_config, tmp_path):
    """With ray the actors are the sampler: each collection starts by pushing them the last staged update, so a
    pipelined run on one actor logs what the same run with the in-process sampler copy logs (rollouts, staleness,
    versions, the mismatch, updates), and its final evaluation samples from the learner's last weights."""
    ray = pytest.importorskip("ray")

    class Watched(Trainer):  # what the actor holds when the trained policy is evaluated
        async def evaluate(self, tag, step):
            if tag == "trained":
                self.seen = ray.get(self.backend.workers[0].weights.remote()), self.model.state_dict()
            return await super().evaluate(tag, step)

    over = {"steps": 2, "loss": {"entropy_coef": 0.05}, "async": {"enabled": True, "max_staleness": 1}}
    local = tiny_config(tmp_path / "local", **over)
    pooled = tiny_config(tmp_path / "ray", ray=True, ray_workers=1, **over)
    Trainer(local).run()
    trainer = Watched(pooled)
    trainer.run()

    def same(r):
        return {k: v for k, v in r.items() if not k.endswith("_s") and k != "ray_restarts"}

    a, b = records(local.run_dir), records(pooled.run_dir)
    assert [r["staleness"] for r in b] == [0, 1] and [r["policy_version"] for r in b] == [0, 0]
    assert all(r["grad_norm"] > 0 for r in b)  # the weights move, so equal rollouts mean the pushes landed
    assert [same(r) for r in b] == [same(r) for r in a]
    assert records(pooled.run_dir, "eval") == records(local.run_dir, "eval")
    actor, learner = trainer.seen
    assert all(torch.equal(actor[k], learner[k]) for k in learner)  # update 2, staged after the last collection


def test_the_sampler_copy_changes_only_when_a_staged_update_is_published(tiny_config, tmp_path):
    trainer = Trainer(tiny_config(tmp_path / "copy"))
    copy = SamplerCopy(trainer.policy, trainer.model, version=0)
    before = {n: p.clone() for n, p in copy.model.named_parameters()}
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(0.01)
    copy.stage(trainer.model, version=1)
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(0.01)  # a later change: not part of version 1
    assert all(torch.equal(p, before[n]) for n, p in copy.model.named_parameters())  # staged, not published
    assert copy.publish() == 1 and copy.publish() == 1
    for n, p in copy.model.named_parameters():
        assert torch.allclose(p, before[n] + 0.01) and not p.requires_grad


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"generation": {"backend": "vllm"}}, "not vllm or fsdp2"),
        ({"ray": True, "eval_every": 2}, "the actors hold the sampler's weights"),
        ({"env": {"suite": "levels"}}, "curriculum"),
        ({"rubric_buffer": {"every": 2}}, "rubric_buffer"),
    ],
)
def test_async_refuses_what_it_cannot_run_before_anything_loads(extra, says):
    with pytest.raises(ConfigError, match=says):
        validate_config({"async": {"enabled": True, "max_staleness": 1}, **extra})


def test_async_staleness_0_accepts_a_suite_and_negative_staleness_is_refused():
    validate_config({"async": {"enabled": True, "max_staleness": 0}, "env": {"suite": "levels"}})
    with pytest.raises(ConfigError, match="max_staleness"):
        validate_config({"async": {"enabled": True, "max_staleness": -1}})
