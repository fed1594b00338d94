"""``model.train_layers``: GRPO trains the top ``k`` decoder layers and the final norm; every other weight (the
embeddings and the head tied to them included) stays the model it loaded, through checkpoints and resume."""

import json

import pytest
import torch

from rubricgym.trainers.config import ConfigError, validate_config
from rubricgym.trainers.engine.sharding import decoder_layers
from rubricgym.trainers.trainer import Trainer

# the entropy bonus has a gradient even when every reward ties (the tiny random model earns none)
MOVING = {"loss": {"entropy_coef": 0.1}, "optim": {"lr": 1e-2}}


def top_names(model: torch.nn.Module, k: int) -> set[str]:
    top = {id(p) for layer in decoder_layers(model)[-k:] for p in layer.parameters()}
    top |= {id(p) for p in model.model.norm.parameters()}
    return {n for n, p in model.named_parameters() if id(p) in top}


def test_grpo_trains_only_the_top_layers_and_resumes_with_the_rest_as_loaded(tiny_config, tmp_path):
    run = tmp_path / "run"
    trainer = Trainer(tiny_config(run, steps=2, model={"train_layers": 1}, **MOVING))
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    top = top_names(trainer.model, 1)
    assert len(decoder_layers(trainer.model)) > 1 and top  # the tiny model has a bottom to keep frozen
    optimized = {id(p) for g in trainer.optimizer.param_groups for p in g["params"]}
    assert optimized == {id(p) for n, p in trainer.model.named_parameters() if n in top}
    trainer.run()
    changed = {n for n, p in trainer.model.named_parameters() if not torch.equal(p, before[n])}
    assert changed and changed <= top  # the top layer moved; the bottom, embeddings and head did not

    resumed = Trainer(tiny_config(run, steps=3, model={"train_layers": 1}, **MOVING))
    resumed.run(resume=True)
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines() if '"train"' in x]
    assert steps == [1, 2, 3]  # continued after step 2
    for n, p in resumed.model.named_parameters():
        if n not in top:
            assert torch.equal(p, before[n]), n


def test_train_layers_with_lora_or_beyond_the_model_fails_before_training(tiny_config, tmp_path):
    with pytest.raises(ConfigError, match="model.train_layers and model.lora both choose what trains"):
        validate_config({"model": {"train_layers": 2, "lora": {"r": 4}}})
    with pytest.raises(ConfigError, match=r"model.train_layers: 99, but the model has \d+ decoder layers"):
        Trainer(tiny_config(tmp_path / "run", model={"train_layers": 99}))
