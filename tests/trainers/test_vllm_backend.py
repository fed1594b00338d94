"""The vLLM backend's served copy of the policy (the rollouts against a real server are in test_vllm_lora.py,
which shares one server start between the merged and the adapter pushes)."""

import torch


def test_untied_state_dict_writes_lm_head_as_its_own_tensor(local_model_dir, tmp_path):
    import json

    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from rubricgym.trainers.engine.vllm_backend import untied_model_dir

    model = AutoModelForCausalLM.from_pretrained(local_model_dir, dtype=torch.float32)
    assert model.config.tie_word_embeddings
    out = untied_model_dir(model, local_model_dir, tmp_path / "served")
    config = json.loads((out / "config.json").read_text())
    assert config["tie_word_embeddings"] is False
    assert (out / "tokenizer.json").exists()
    weights = load_file(str(out / "model.safetensors"))
    head, embed = weights["lm_head.weight"], weights["model.embed_tokens.weight"]
    assert head.dtype == torch.bfloat16 and torch.equal(head, embed) and head.data_ptr() != embed.data_ptr()
