"""Rollout workers on a local multi-node Ray cluster (``ray.cluster_utils.Cluster``: a head and two worker raylets
on this machine): placement across nodes, and a killed worker replaced with its groups replayed exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainers.conftest import collect_killing_worker_0, fingerprint

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow

ENV_KWARGS = {"min_ops": 1, "max_ops": 1, "max_steps": 2}


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[str, Any]]:
    """Head (no CPUs: the learner's node) + two nodes of 2 CPUs, each carrying one ``rollout`` resource (a test
    may add and remove nodes: ``cluster["cluster"]``)."""
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        nodes = [c.add_node(num_cpus=2, resources={"rollout": 1}) for _ in range(2)]
        c.wait_for_nodes()
        ray.init(address=c.address, log_to_driver=False)
        yield {"cluster": c, "head": c.head_node.node_id, "workers": {n.node_id for n in nodes}}
    finally:
        ray.shutdown()
        c.shutdown()


def configs(model_dir: Path | str, max_new_tokens: int = 24) -> tuple[Any, Any, Any]:
    from rubricgym.trainers.config import EnvConfig, GenerationConfig, ModelConfig

    return (
        ModelConfig(name=str(model_dir), threads=1),
        GenerationConfig(max_new_tokens=max_new_tokens, temperature=1.0),
        EnvConfig(kwargs=ENV_KWARGS),
    )


def backend(model_dir: Path | str, **kw: Any) -> Any:
    from rubricgym.trainers.engine.ray_backend import RayBackend

    return RayBackend(*configs(model_dir), **kw)


def test_a_packed_placement_group_puts_the_workers_on_one_node(cluster, tiny_model_dir):
    pool = backend(tiny_model_dir, workers=2, worker_resources={"num_cpus": 1}, placement="strict_pack")
    try:
        nodes = pool.placement()
    finally:
        pool.close()
    assert set(nodes) == {0, 1}
    assert len(set(nodes.values())) == 1 and set(nodes.values()) < cluster["workers"]  # the head has no CPU


def test_a_placement_the_cluster_cannot_hold_fails_with_what_is_free(cluster, tiny_model_dir):
    from rubricgym.trainers.engine.ray_backend import RayBackend

    with pytest.raises(RuntimeError, match=r"could not place 3 rollout workers .* STRICT_SPREAD .* free"):
        RayBackend(*configs(tiny_model_dir), workers=3, placement="strict_spread", placement_timeout_s=2)


def test_a_killed_worker_is_replaced_with_the_latest_weights_and_its_groups_replayed_once(cluster, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    from rubricgym.core.registry import make

    tasks = list(make("toy-calculator-v0", **ENV_KWARGS).task_set(4, seed=3, split="train"))
    seeds = [1000 + 101 * j for j in range(len(tasks))]
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)  # weights a fresh actor would not have from the model dir

    rollout_slot = {"num_cpus": 1, "resources": {"rollout": 1}}
    pool = backend(tiny_model_dir, workers=2, worker_resources=rollout_slot, placement="strict_spread")
    try:
        nodes = pool.placement()
        assert set(nodes.values()) == cluster["workers"]  # one per node with a rollout slot, none on the head
        pool.push_weights(model)
        reference = asyncio.run(pool.collect(tasks, seeds, 2, anchor_greedy=True))
        assert fingerprint(asyncio.run(pool.collect(tasks, seeds, 2, anchor_greedy=True))) == fingerprint(reference)
        assert pool.restarts == 0

        with pytest.warns(RuntimeWarning, match="rollout worker 0 died"):
            recovered = asyncio.run(collect_killing_worker_0(pool, tasks, seeds))
        assert pool.restarts == 1  # the kill landed mid-call: otherwise there would be nothing to replace
        assert fingerprint(recovered) == fingerprint(reference)  # every (task, seed) once, in order, same tokens
        assert [len({r.trajectory.group_id for r in g}) for g in recovered] == [1] * len(tasks)
        assert len({g[0].trajectory.group_id for g in recovered}) == len(tasks)
        assert pool.placement() == nodes  # the replacement took the dead actor's bundle

        # worker 1's node is lost between steps: the next weight push replaces it on a spare node
        spare = cluster["cluster"].add_node(num_cpus=2, resources={"rollout": 1})
        lost = next(n for n in cluster["cluster"].worker_nodes if n.node_id == nodes[1])
        cluster["cluster"].remove_node(lost)
        with pytest.warns(RuntimeWarning, match="rollout worker 1 died"):
            pool.push_weights(model)
        assert pool.restarts == 2
        assert pool.placement() == {0: nodes[0], 1: spare.node_id}  # its bundle moved, still strictly spread
        assert fingerprint(asyncio.run(pool.collect(tasks, seeds, 2, anchor_greedy=True))) == fingerprint(reference)
    finally:
        pool.close()


def test_a_worker_that_keeps_dying_raises_an_error_naming_it_and_the_cause(cluster, tiny_model_dir, tmp_path):
    from rubricgym.core.registry import make

    tasks = list(make("toy-calculator-v0", **ENV_KWARGS).task_set(1, seed=3, split="train"))
    pool = backend(tmp_path, workers=1, max_restarts=1)  # no model there: every actor dies in its constructor
    try:
        with (
            pytest.warns(RuntimeWarning, match="rollout worker 0 died"),
            pytest.raises(RuntimeError, match=r"rollout worker 0 died 2 times .*max_restarts=1.*ActorDiedError") as e,
        ):
            asyncio.run(pool.collect(tasks, [0], 1))
        assert str(tmp_path) in str(e.value)  # the cause: loading the model from an empty directory
        assert pool.restarts == 1
    finally:
        pool.close()


def test_without_an_address_the_pool_starts_its_own_ray_even_beside_a_running_cluster(cluster, tiny_model_dir):
    # the Cluster (like `ray start`) advertises itself to every plain ray.init() on this machine
    from rubricgym.trainers.engine.ray_backend import RayBackend

    ray.shutdown()
    try:
        pool = RayBackend(*configs(tiny_model_dir), workers=1)
        try:
            assert ray.cluster_resources().get("CPU") == 1 and "rollout" not in ray.cluster_resources()
        finally:
            pool.close()
        assert not ray.is_initialized()  # it owned that Ray and shut it down
    finally:
        ray.init(address=cluster["cluster"].address, log_to_driver=False)
