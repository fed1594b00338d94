"""The vLLM generation backend against a real vLLM server on CPU: token ids, log-probs and weight pushes."""

import asyncio

import pytest
import torch

from rubricgym.agents.serve import find_vllm_python


@pytest.mark.slow
def test_vllm_rollouts_record_tokens_and_follow_pushed_weights(local_model_dir, tmp_path):
    """One server start covers both halves: the first greedy turn checks tokens and log-probs as served from the
    exported weights (what a run without pushes sees), then pushes change and restore the weights."""
    if find_vllm_python() is None:
        pytest.skip("no vLLM venv: run `make vllm`")
    from rubricgym.trainers.config import TrainConfig
    from rubricgym.trainers.trainer import Trainer
    from rubricgym.trainers.update import generated_logprobs

    cfg = TrainConfig.model_validate(
        {
            "run_dir": str(tmp_path),
            "steps": 0,
            "tasks_per_step": 1,
            "group_size": 2,
            "live": False,
            "model": {"name": "smollm2-135m-instruct", "threads": 1},
            "generation": {
                "backend": "vllm",
                "max_new_tokens": 12,
                "temperature": 1.0,
                "response_prefix": '<tool_call>{"name": "',
            },
            "env": {"kwargs": {"min_ops": 1, "max_ops": 1, "max_steps": 1}, "train_tasks": 4, "eval_tasks": 1},
        }
    )
    trainer = Trainer(cfg)
    backend = trainer.backend
    try:
        task = trainer.tasks_at(0, 1)

        def greedy_turn():
            groups = asyncio.run(backend.collect(task, [5], 2, anchor_greedy=True))
            anchor = groups[0][0]
            assert anchor.trajectory.steps[0].action.text.startswith('<tool_call>{"name": "')
            return anchor.turns[0]

        def our_logprobs(turn):
            ids = torch.tensor([turn.prompt_ids + turn.completion_ids])
            mask = torch.zeros_like(ids, dtype=torch.float32)
            mask[0, len(turn.prompt_ids) :] = 1
            with torch.no_grad():
                lp, _ = generated_logprobs(trainer.model, ids, torch.ones_like(ids), mask)
            return lp[0, len(turn.prompt_ids) :]

        before = greedy_turn()
        assert len(before.completion_ids) == len(before.logprobs) > 0
        # the server (bf16) and the learner (fp32) agree on the greedy tokens' log-probs
        assert torch.allclose(our_logprobs(before), torch.tensor(before.logprobs), atol=0.35)

        torch.manual_seed(0)
        original = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        with torch.no_grad():
            for p in trainer.model.parameters():
                # a bf16-representable change, so the bf16 server and the fp32 learner hold the same weights
                p.add_(torch.randn_like(p) * 0.02)
                p.copy_(p.to(torch.bfloat16).float())
        backend.push_weights(trainer.model)
        after = greedy_turn()
        assert (after.completion_ids, after.logprobs) != (before.completion_ids, before.logprobs)
        assert torch.allclose(our_logprobs(after), torch.tensor(after.logprobs), atol=0.35)
        trainer.model.load_state_dict(original)
        backend.push_weights(trainer.model)
        again = greedy_turn()
        # the restored weights give back the first greedy turn: the same tokens with the same log-probs, up to a
        # near-tie that the bf16 server may break the other way in another batch (one of 12 tokens did, in CI)
        pairs = list(zip(again.completion_ids, before.completion_ids, strict=False))
        n = next((i for i, (x, y) in enumerate(pairs) if x != y), len(pairs))
        assert n >= 4 and torch.allclose(torch.tensor(again.logprobs[:n]), torch.tensor(before.logprobs[:n]), atol=0.1)
        if n < len(pairs):  # they parted at a near-tie: the token chosen now was about as likely as the one before
            assert abs(again.logprobs[n] - before.logprobs[n]) < 0.15
    finally:
        backend.close()


def test_untied_state_dict_writes_lm_head_as_its_own_tensor(local_model_dir, tmp_path):
    import json

    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from rubricgym.trainers.vllm_backend import untied_model_dir

    model = AutoModelForCausalLM.from_pretrained(local_model_dir, dtype=torch.float32)
    assert model.config.tie_word_embeddings
    out = untied_model_dir(model, local_model_dir, tmp_path / "served")
    config = json.loads((out / "config.json").read_text())
    assert config["tie_word_embeddings"] is False
    assert (out / "tokenizer.json").exists()
    weights = load_file(str(out / "model.safetensors"))
    head, embed = weights["lm_head.weight"], weights["model.embed_tokens.weight"]
    assert head.dtype == torch.bfloat16 and torch.equal(head, embed) and head.data_ptr() != embed.data_ptr()
