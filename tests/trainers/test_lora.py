"""LoRA training (``trainers/engine/lora.py``) on the tiny model: only the adapters train, the sampler generates through
them, the KL reference is the base with the adapters off, checkpoints resume exactly, ``export --merge`` and the
vLLM weight push carry the merged weights."""

import asyncio
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from rubricgym.trainers.config import ConfigError, ModelConfig, TrainConfig, validate_config
from rubricgym.trainers.engine.lora import ADAPTER_FILE, merged_state_dict, reference
from rubricgym.trainers.trainer import Trainer

LORA = {"r": 4, "alpha": 8}


def lora_data(run_dir: Path, model_dir: Path, **over) -> dict:
    """A tiny LoRA run whose every update moves the adapters: the entropy bonus has a gradient even when all
    rewards tie (a random model earns none), and the KL term (beta) then runs against the base."""
    data = {
        "run_dir": str(run_dir),
        "steps": 2,
        "tasks_per_step": 2,
        "group_size": 2,
        "save_every": 1,
        "live": False,
        "plots": False,
        "model": {"name": str(model_dir), "lora": LORA},
        "generation": {"max_new_tokens": 6, "temperature": 1.0},
        "env": {"kwargs": {"min_ops": 1, "max_ops": 1, "max_steps": 2}, "train_tasks": 8, "eval_tasks": 2},
        "optim": {"lr": 1e-2},
        "loss": {"beta": 0.1, "entropy_coef": 0.1},
    }
    return data | over


def logits(model: torch.nn.Module, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0]


@pytest.fixture(scope="module")
def trained(tiny_model_dir, tmp_path_factory):
    """A LoRA run of two steps, and the base network's weights from before it."""
    from transformers import AutoModelForCausalLM

    cfg = TrainConfig.model_validate(lora_data(tmp_path_factory.mktemp("lora") / "run", tiny_model_dir))
    trainer = Trainer(cfg)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    trainer.run()
    return trainer, base


PROMPT = [1, 2, 3, 4, 5, 6, 7, 8]


def test_lora_config_defaults_and_validation(monkeypatch):
    assert ModelConfig().lora is None  # full fine-tuning, as before
    lora = ModelConfig(lora={}).lora
    assert lora is not None and (lora.r, lora.alpha, lora.dropout) == (16, 32, 0.0)
    assert lora.target_modules == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    with pytest.raises(ConfigError, match="model.lora.r"):
        validate_config({"model": {"lora": {"r": 0}}})
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "peft" else real(name, *a))
    with pytest.raises(ConfigError, match=r"model.lora.*pip install 'rubricgym\[train\]'"):
        validate_config({"model": {"lora": {"r": 8}}})


def test_only_the_adapters_train_and_the_reference_is_the_base(trained):
    trainer, base = trained
    optimized = [p for g in trainer.optimizer.param_groups for p in g["params"]]
    lora = [p for n, p in trainer.model.named_parameters() if ".lora_" in n]
    assert len(optimized) == len(lora) == 2 * 7 * 2  # A and B of 7 projections in 2 layers
    assert {id(p) for p in optimized} == {id(p) for p in lora}
    assert all(not p.requires_grad for n, p in trainer.model.named_parameters() if ".lora_" not in n)
    assert all(float(p.detach().abs().sum()) > 0 for n, p in trainer.model.named_parameters() if "lora_B" in n)  # moved
    frozen = {k.replace(".base_layer.", "."): v for k, v in trainer.model.state_dict().items() if ".lora_" not in k}
    assert all(torch.equal(frozen[k], v) for k, v in base.state_dict().items())  # the base never moved
    # the KL reference is the same network (no copy) with its adapters off, and only while inside reference()
    assert trainer.ref_model is trainer.peft
    with reference(trainer.ref_model) as ref:
        assert torch.allclose(logits(ref, PROMPT), logits(base, PROMPT), atol=1e-5)
    assert not torch.allclose(logits(trainer.model, PROMPT), logits(base, PROMPT), atol=1e-3)
    records = [json.loads(x) for x in (trainer.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["kl"] > 0 for r in records if r["kind"] == "train"] == [False, True]  # step 2 left the base


def test_generation_after_an_update_samples_the_adapted_policy(trained, tiny_model_dir):
    """The trainer's sampler (packed weights on) generates through the adapters: its greedy turn's tokens and
    log-probs are the merged model's, not the base's."""
    from transformers import AutoModelForCausalLM

    from rubricgym.agents.decode import sample

    trainer, base = trained
    assert trainer.policy.packed_weights
    adapted = asyncio.run(trainer.policy.recording(trainer.tasks_at(0, 1)[0], 0, 0.0).generate(PROMPT))
    merged = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    merged.load_state_dict(merged_state_dict(trainer.model), strict=False)

    def greedy(lm):
        row = sample(lm, [PROMPT], max_new_tokens=6, temperature=0.0, is_end=lambda r, t: False)[0]
        return row.tokens, torch.tensor(row.logprobs)

    tokens, logprobs = greedy(merged)
    assert adapted.completion_ids == tokens
    assert torch.allclose(torch.tensor(adapted.logprobs), logprobs, atol=1e-4)
    base_tokens, base_logprobs = greedy(base)
    assert base_tokens != tokens or not torch.allclose(base_logprobs, logprobs, atol=1e-3)


def test_export_merge_writes_a_model_with_the_adapted_logits(trained, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rubricgym.cli import app

    trainer, _ = trained
    out = tmp_path / "merged"
    result = CliRunner().invoke(app, ["export", "--merge", str(trainer.run_dir), str(out)])
    assert result.exit_code == 0, result.output
    assert not (out / ADAPTER_FILE).exists() and (out / "config.json").exists()
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    assert not any("lora" in k for k in model.state_dict())
    assert torch.allclose(logits(model, PROMPT), logits(trainer.model, PROMPT), atol=1e-5)
    assert AutoTokenizer.from_pretrained(out).pad_token_id == trainer.tokenizer.pad_token_id
    again = CliRunner().invoke(app, ["export", "--merge", str(trainer.run_dir), str(out)])
    assert again.exit_code == 2 and "--force" in again.output  # never overwrites unasked
    inside = CliRunner().invoke(app, ["export", "--merge", "--force", str(trainer.run_dir), str(trainer.run_dir)])
    assert inside.exit_code == 2 and "run directory" in inside.output


def test_vllm_push_sends_merged_weights_under_base_names(trained, monkeypatch):
    import httpx

    from rubricgym.trainers.engine.vllm_backend import VLLMBackend, untied_state_dict

    trainer, base = trained
    posts: list[str] = []

    class Client:
        def __init__(self, **kw):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def post(self, url, json=None):
            posts.append(url)
            return httpx.Response(200, request=httpx.Request("POST", url))

    monkeypatch.setattr(httpx, "Client", Client)
    backend = VLLMBackend(
        "http://vllm.invalid/v1", "m", trainer.tokenizer, None, temperature=1.0, top_p=1.0, max_new_tokens=4
    )
    try:
        backend.push_weights(trainer.model)
        pushed = load_file(str(backend.weights_dir / "model.safetensors"))
    finally:
        backend.close()
    assert [u.rsplit("/", 1)[1] for u in posts] == ["collective_rpc", "reset_prefix_cache"]
    assert set(pushed) == set(untied_state_dict(base))  # the base model's names: no base_layer, no lora_
    merged = merged_state_dict(trainer.model)
    q = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(pushed[q], merged[q].to(torch.bfloat16))
    assert not torch.equal(pushed[q], base.state_dict()[q].to(torch.bfloat16))


@pytest.mark.slow
def test_a_resumed_lora_run_equals_the_uninterrupted_one(tiny_model_dir, tmp_path):
    full = TrainConfig.model_validate(lora_data(tmp_path / "full", tiny_model_dir, steps=3))
    Trainer(full).run()
    part = TrainConfig.model_validate(lora_data(tmp_path / "part", tiny_model_dir, steps=1))
    Trainer(part).run()
    Trainer(part.with_overrides(steps=3)).run(resume=True)

    def train_records(run):
        return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if '"train"' in x]

    keys = ("step", "cursor", "reward_mean", "loss", "kl", "grad_norm", "entropy", "response_tokens", "tokens")
    a = [{k: r.get(k) for k in keys} for r in train_records(full.run_dir)]
    b = [{k: r.get(k) for k in keys} for r in train_records(part.run_dir)]
    assert a == b and a[-1]["kl"] > 0
    ca, cb = (run / "checkpoints" / "step-000003" for run in (full.run_dir, part.run_dir))
    assert not (ca / "model.safetensors").exists()  # the adapter only
    fa, fb = load_file(str(ca / ADAPTER_FILE)), load_file(str(cb / ADAPTER_FILE))
    assert fa.keys() == fb.keys() and all(torch.equal(fa[k], fb[k]) for k in fa)
    oa, ob = (torch.load(c / "optimizer.pt", weights_only=False)["state"] for c in (ca, cb))
    assert all(torch.equal(oa[i]["exp_avg_sq"], ob[i]["exp_avg_sq"]) for i in oa)


def test_a_checkpoint_resumes_only_with_its_own_kind_of_training(tiny_model_dir, tmp_path):
    cfg = TrainConfig.model_validate(lora_data(tmp_path / "run", tiny_model_dir, steps=1))
    Trainer(cfg).run()
    plain = cfg.model_dump()
    plain["model"]["lora"] = None
    with pytest.raises(RuntimeError, match="holds a LoRA adapter: set model.lora"):
        Trainer(TrainConfig.model_validate(plain)).resume()


@pytest.mark.slow
def test_export_merge_of_a_full_fine_tuning_run_copies_its_model(tiny_config, tmp_path):
    from transformers import AutoModelForCausalLM

    from rubricgym.trainers.engine.export import export_merged

    cfg = tiny_config(tmp_path / "run", steps=1)
    trainer = Trainer(cfg)
    trainer.run()
    out = export_merged(cfg.run_dir, tmp_path / "out")
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {f.name for f in out.iterdir()}
    assert not (out / "optimizer.pt").exists()
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    assert torch.allclose(logits(model, PROMPT), logits(trainer.model, PROMPT))


def test_lora_with_ray_fails_at_config_validation():
    from rubricgym.trainers.config import ConfigError, validate_config

    with pytest.raises(ConfigError, match="model.lora does not run with ray"):
        validate_config({"ray": True, "model": {"lora": {"r": 4}}})
