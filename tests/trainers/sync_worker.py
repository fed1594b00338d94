"""A rollout worker process for test_weight_sync.py: joins the learner's weight-sync group as rank 1 and writes what
it saw to a JSON file.

``python sync_worker.py SCENARIO ADDRESS MODEL_DIR OUT`` with SCENARIO:

- ``rollout``: its own ``TrainingPolicy`` on MODEL_DIR samples once (packed weights built), then receives two
  syncs of the whole model and after each samples ``PROMPT`` with seed 11; then one sync of LoRA adapters while
  it has none (refused: ``"refused"`` holds the error); then it adds the adapters and receives that sync again
  and samples: ``{"before", "tokens": [3 lists], "reports": [3 dicts], "refused"}``;
- ``wait``: never gets a sync (``receive(wait_s=3)``): ``{"timeout"}`` holds the error; then exits;
- ``plain``: receives one sync into its own model and saves its state dict to OUT (``torch.save``);
- ``fsdp``: run by ``torchrun --nproc-per-node 2``: the learner, sharded with FSDP2 after a seeded perturbation of
  every weight; rank 0 sends (and saves the perturbed whole weights to OUT), rank 1 gathers in step.
"""

import asyncio
import json
import sys
from dataclasses import asdict
from typing import Any

import torch

from rubricgym.trainers.engine.weight_sync import WeightSync, WeightSyncMismatch, WeightSyncTimeout

PROMPT = [1, 9690, 198, 2683, 359, 253, 5356, 11173, 30, 2, 198, 1, 4093, 198]
LORA = {"r": 4, "alpha": 8}


def sample(policy: Any) -> list[int]:
    """What ``policy`` samples for ``PROMPT`` at its temperature with seed 11."""
    return asyncio.run(policy.episode(None, seed=11).generate(PROMPT)).completion_ids


def main(scenario: str, address: str, model_dir: str, out: str) -> None:
    result: dict[str, Any] = {}
    if scenario in ("plain", "fsdp"):
        whole_weights(scenario, address, model_dir, out)
        return
    if scenario == "wait":
        sync = WeightSync.connect(address, 1, 2, timeout_s=60)
        try:
            sync.receive(torch.nn.Linear(2, 2), wait_s=3)
        except WeightSyncTimeout as e:
            result["timeout"] = str(e)
    else:
        from rubricgym.trainers.config import LoraConfig
        from rubricgym.trainers.engine.lora import add_adapters
        from rubricgym.trainers.engine.policy import TrainingPolicy

        policy = TrainingPolicy(model_dir, temperature=1.0, max_new_tokens=8).load()
        result["before"] = sample(policy)
        sync = WeightSync.connect(address, 1, 2, timeout_s=60)
        result["tokens"], result["reports"] = [], []
        for step in range(3):
            if step == 2:
                try:
                    sync.receive(policy)
                except WeightSyncMismatch as e:
                    result["refused"] = str(e)
                add_adapters(policy.lm, LoraConfig(**LORA), seed=0)
            result["reports"].append(asdict(sync.receive(policy)))
            result["tokens"].append(sample(policy))
    sync.close()
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f)


def whole_weights(scenario: str, address: str, model_dir: str, out: str) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if scenario == "plain":
        sync = WeightSync.connect(address, 1, 2, timeout_s=120)
        sync.receive(model)
        sync.close()
        torch.save(model.state_dict(), out)
        return
    from rubricgym.trainers.config import ParallelConfig
    from rubricgym.trainers.engine.distributed import init_from_env, leave, rank_world
    from rubricgym.trainers.engine.sharding import shard
    from rubricgym.trainers.engine.weight_sync import gather_for_send

    init_from_env()
    with torch.no_grad():
        g = torch.Generator().manual_seed(5)
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)
    if rank_world()[0] == 0:
        torch.save({k: v.clone() for k, v in model.state_dict().items()}, out)
    shard(model, ParallelConfig(strategy="fsdp2"))
    assert hasattr(next(model.parameters()), "full_tensor"), "not sharded"
    if rank_world()[0] == 0:
        sync = WeightSync.connect(address, 0, 2, timeout_s=120)
        sync.send(model, 1, bucket_mb=1.0)
        sync.close()
    else:
        gather_for_send(model)
    leave()


if __name__ == "__main__":
    main(*sys.argv[1:])
