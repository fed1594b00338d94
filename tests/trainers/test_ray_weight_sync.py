"""Ray rollout actors taking the learner's weights by collective (``generation.ray_weight_sync: collective``): the
actors hold exactly the learner's weights and roll out what an object-store push gives, a replaced actor is
brought back into a rebuilt sync group, a model that does not fit is refused on both sides. One local Ray (4 CPUs)
for the module; each pool has 2 actors of the tiny model."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainers.conftest import collect_killing_worker_0, fingerprint

ray = pytest.importorskip("ray")

ENV_KWARGS = {"min_ops": 1, "max_ops": 1, "max_steps": 2}


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def pool(model_dir: Path, transport: str) -> Any:
    from rubricgym.trainers.config import EnvConfig, GenerationConfig, ModelConfig
    from rubricgym.trainers.engine.ray_backend import RayBackend

    return RayBackend(
        ModelConfig(name=str(model_dir), threads=1),
        GenerationConfig(max_new_tokens=24, temperature=1.0, ray_weight_sync=transport),
        EnvConfig(kwargs=ENV_KWARGS),
        workers=2,
        sync_timeout_s=60,
    )


@pytest.fixture(scope="module")
def pools(local_ray: None, tiny_model_dir: Path) -> Iterator[dict[str, Any]]:
    """A pool of each transport; the object-store pool's actors load while the collective pool's group forms."""
    made: dict[str, Any] = {}
    try:
        made["object_store"] = pool(tiny_model_dir, "object_store")
        made["collective"] = pool(tiny_model_dir, "collective")  # returns once its actors have joined the group
        yield made
    finally:
        for p in made.values():
            p.close()


@pytest.fixture(scope="module")
def collective(pools: dict[str, Any]) -> Any:
    return pools["collective"]


def perturbed(model_dir: Path, seed: int) -> torch.nn.Module:
    """The tiny model with weights a fresh actor would not have (the learner after an update)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    return model


def assert_actors_hold(backend: Any, model: torch.nn.Module) -> None:
    learner = model.state_dict()
    for i, w in enumerate(backend.workers):
        actor = ray.get(w.weights.remote(), timeout=60)
        assert actor.keys() == learner.keys()
        for name, t in learner.items():
            assert torch.equal(actor[name], t), f"rollout worker {i}: {name} differs from the learner's"


def work(n: int = 4) -> tuple[list[Any], list[int]]:
    from rubricgym.core.registry import make

    tasks = list(make("toy-calculator-v0", **ENV_KWARGS).task_set(n, seed=3, split="train"))
    return tasks, [1000 + 101 * j for j in range(n)]


@pytest.mark.slow
def test_a_collective_push_gives_the_actors_the_learners_weights_and_the_object_store_pushs_rollouts(
    pools, tiny_model_dir
):
    collective, object_store = pools["collective"], pools["object_store"]
    model = perturbed(tiny_model_dir, 1)
    tasks, seeds = work()
    collective.push_weights(model)
    assert_actors_hold(collective, model)  # bitwise, every tensor (fp32 on both sides)
    assert collective.push_s > 0
    by_collective = asyncio.run(collective.collect(tasks, seeds, 2, anchor_greedy=True))

    before = asyncio.run(object_store.collect(tasks, seeds, 2, anchor_greedy=True))
    object_store.push_weights(model)
    by_object_store = asyncio.run(object_store.collect(tasks, seeds, 2, anchor_greedy=True))
    object_store.close()  # its actors' CPUs go back to the tests below
    assert fingerprint(by_collective) == fingerprint(by_object_store)
    assert fingerprint(by_collective) != fingerprint(before)  # the push changed what the actors sample


@pytest.mark.slow
def test_a_replaced_actor_rejoins_a_rebuilt_group_and_gets_the_current_weights(collective, tiny_model_dir):
    tasks, seeds = work()
    model = perturbed(tiny_model_dir, 2)
    collective.push_weights(model)
    reference = asyncio.run(collective.collect(tasks, seeds, 2, anchor_greedy=True))
    restarts = collective.restarts

    # mid-collection: the replacement replays worker 0's groups from the last pushed weights
    with pytest.warns(RuntimeWarning, match="rollout worker 0 died"):
        recovered = asyncio.run(collect_killing_worker_0(collective, tasks, seeds))
    assert collective.restarts == restarts + 1
    assert fingerprint(recovered) == fingerprint(reference)

    # between steps: worker 1 dies; the push replaces it, rebuilds the group with both actors and sends
    ray.kill(collective.workers[1])
    model = perturbed(tiny_model_dir, 3)
    with pytest.warns(RuntimeWarning, match="rollout worker 1 died"):
        collective.push_weights(model)
    assert collective.restarts == restarts + 2
    assert_actors_hold(collective, model)
    model = perturbed(tiny_model_dir, 4)
    collective.push_weights(model)  # the rebuilt group goes on serving pushes
    assert_actors_hold(collective, model)


@pytest.mark.slow
def test_a_model_that_does_not_fit_is_refused_on_both_sides_and_nothing_is_written(collective, tiny_model_dir):
    from transformers import AutoConfig, AutoModelForCausalLM

    from rubricgym.trainers.engine.weight_sync import WeightSyncMismatch

    model = perturbed(tiny_model_dir, 5)
    collective.push_weights(model)
    config = AutoConfig.from_pretrained(tiny_model_dir)
    config.intermediate_size = 48  # another model: its MLP weights have other shapes
    other = AutoModelForCausalLM.from_config(config)
    with pytest.raises(
        WeightSyncMismatch, match=r"learner: .*mlp.*rollout worker 0 \(sync rank 1\): .*mlp.*ray_weight_sync"
    ):
        collective.push_weights(other)
    assert_actors_hold(collective, model)  # nothing written
    model = perturbed(tiny_model_dir, 6)
    collective.push_weights(model)  # the next push rebuilds the group and sends
    assert_actors_hold(collective, model)


def test_the_collective_transport_is_refused_without_ray(tiny_config, tmp_path):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=r"ray_weight_sync 'collective' sends weights to Ray .*set ray: true"):
        tiny_config(tmp_path / "run", generation={"ray_weight_sync": "collective"})
    cfg = tiny_config(tmp_path / "run", ray=True, generation={"ray_weight_sync": "collective"})
    assert cfg.generation.ray_weight_sync == "collective"


@pytest.mark.slow
def test_an_actor_that_left_the_group_fails_the_push_with_each_sides_error_and_the_next_push_recovers(
    collective, tiny_model_dir
):
    from rubricgym.trainers.engine.ray_sync import _free_port
    from rubricgym.trainers.engine.weight_sync import WeightSyncTimeout

    # worker 0 leaves the sync group and is busy when the push starts: it waits 3 s to join a group no one opens
    busy = collective.workers[0].join_sync.remote(f"127.0.0.1:{_free_port()}", 1, 2, 3)
    collective.sync_timeout_s = 1  # how long the actors wait for the push to start
    try:
        with pytest.raises(WeightSyncTimeout) as e:
            collective.push_weights(perturbed(tiny_model_dir, 7))
    finally:
        collective.sync_timeout_s = 60
    said = str(e.value)
    assert "learner: weight sync (learner): the manifest's size did not complete" in said
    assert "rollout worker 0 (sync rank 1): this rollout actor has joined no weight-sync group" in said
    assert "rollout worker 1 (sync rank 2): weight sync (rollout worker 2)" in said
    assert "set generation.ray_weight_sync 'object_store'" in said
    with pytest.raises(ray.exceptions.RayTaskError, match="could not join"):
        ray.get(busy)
    model = perturbed(tiny_model_dir, 8)
    collective.push_weights(model)  # a new group with both actors
    assert_actors_hold(collective, model)
