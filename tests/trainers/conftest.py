"""A tiny randomly initialised Llama with SmolLM2's tokenizer: exercises the trainer's mechanics in seconds."""

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, local_model_dir: Path) -> Path:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    out = tmp_path_factory.mktemp("tiny-llama")
    tok = AutoTokenizer.from_pretrained(local_model_dir)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture
def tiny_config(tiny_model_dir: Path):
    """A factory of small training configs on the tiny model: ``tiny_config(run_dir, steps=3, ...)``."""
    from rubricgym.trainers.config import TrainConfig

    def make(run_dir: Path, **over) -> TrainConfig:
        data = {
            "run_dir": str(run_dir),
            "steps": 2,
            "tasks_per_step": 2,
            "group_size": 2,
            "save_every": 1,
            "live": False,
            "plots": True,
            "model": {"name": str(tiny_model_dir)},
            "generation": {"max_new_tokens": 6, "temperature": 1.0},
            "env": {"kwargs": {"min_ops": 1, "max_ops": 1, "max_steps": 2}, "train_tasks": 8, "eval_tasks": 2},
            "optim": {"lr": 1e-3},
        }
        for k, v in over.items():
            data[k] = {**data.get(k, {}), **v} if isinstance(v, dict) else v
        return TrainConfig.model_validate(data)

    return make
