"""What a Ray actor reserves and where it lands, for the rollout pool and the learner ranks alike.

``WorkerResources`` is what one actor asks for; ``bundle_of`` turns it into a placement-group bundle,
``actor_options`` into Ray's actor options (in a bundle of a group), and ``reserve`` reserves a placement group
for a set of actors, failing with what is free when the cluster cannot hold it. The rollout pool
(``engine/ray_backend.py``) and the learner ranks (``trainers/ray_learners.py``) place their actors with these.
``ray`` is an optional dependency: it is imported only by the functions that talk to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

Placement = Literal["pack", "spread", "strict_pack", "strict_spread"]
"""A placement group strategy (Ray's PACK, SPREAD, STRICT_PACK, STRICT_SPREAD), one bundle per actor."""


class WorkerResources(TypedDict, total=False):
    """What each actor (a rollout worker, a learner rank) asks Ray for (Ray's actor options of the same names)."""

    num_cpus: float
    num_gpus: float
    memory: int
    """Bytes of heap memory to reserve (Ray's logical ``memory`` resource)."""
    resources: dict[str, float]
    """Custom resources, e.g. ``{"rollout": 1}`` to run only on nodes started with ``--resources '{"rollout": 1}'``."""


def check_resources(res: Mapping[str, Any]) -> WorkerResources:
    """``res`` as the ``WorkerResources`` of one actor (one CPU unless it says otherwise); an unknown key is refused."""
    unknown = set(res) - set(WorkerResources.__annotations__)
    if unknown:
        raise ValueError(
            f"worker_resources: unknown keys {sorted(unknown)}; use {sorted(WorkerResources.__annotations__)} "
            "(custom resources go under 'resources', e.g. {'resources': {'rollout': 1}})"
        )
    out = WorkerResources(num_cpus=1)
    out.update(res)  # type: ignore[typeddict-item]
    return out


def bundle_of(r: Mapping[str, Any]) -> dict[str, float]:
    """The placement-group bundle of one actor reserving ``r`` (``WorkerResources``)."""
    bundle = {"CPU": r.get("num_cpus", 1), "GPU": r.get("num_gpus", 0), "memory": r.get("memory", 0)}
    bundle.update(r.get("resources", {}))
    return {k: float(v) for k, v in bundle.items() if v}


def actor_options(r: Mapping[str, Any], group: Any = None, index: int = 0) -> dict[str, Any]:
    """Ray's actor options for ``r`` (``WorkerResources``), in bundle ``index`` of placement group ``group``."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    options: dict[str, Any] = {"num_cpus": r.get("num_cpus", 1), "num_gpus": r.get("num_gpus", 0)}
    if r.get("memory"):
        options["memory"] = r["memory"]
    if r.get("resources"):
        options["resources"] = dict(r["resources"])
    if group is not None:
        options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
            placement_group=group, placement_group_bundle_index=index
        )
    return options


def reserve(bundle: dict[str, float], n: int, placement: str, timeout_s: float, what: str, advice: str) -> Any:
    """A placement group of ``n`` ``bundle``s with strategy ``placement``, ready; past ``timeout_s`` it is removed
    and a ``RuntimeError`` says what (``what``) could not be placed, what is free, and ``advice``."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    group = placement_group([bundle] * n, strategy=placement.upper())
    try:
        ray.get(group.ready(), timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        remove_placement_group(group)
        raise RuntimeError(
            f"Ray could not place {n} {what} of {bundle} with strategy {placement.upper()} in {timeout_s:.0f} s; "
            f"the cluster has {ray.available_resources()} free: {advice}"
        ) from None
    return group
