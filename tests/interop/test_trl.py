"""The TRL bridge: tool methods TRL can schema, episodes through them, rubric rewards (None when verdicts error),
and a slow test in which TRL's own GRPOTrainer runs two steps on a tiny model with our env and rubric."""

from __future__ import annotations

import asyncio
import inspect
import math

import pytest
from transformers.utils import get_json_schema

from rubricgym.envs.toy.agents import tool_call
from rubricgym.interop.trl import (
    EPISODE_OVER,
    SMOLLM2_SYSTEM,
    environment_factory,
    reward_funcs,
    task_dataset,
    with_tool_template,
)

ENV = "toy-calculator-v0"
BROKEN_RUBRIC = {
    "id": "broken",
    "version": "1",
    "criteria": [
        {"id": "correct", "text": "Correct.", "scope": "trajectory", "check": "final_answer_correct"},
        {"id": "ghost", "text": "Names a check the env lacks.", "scope": "trajectory", "check": "no_such_check"},
    ],
}


def test_the_env_class_exposes_exactly_the_tools_with_schemas_transformers_reads():
    env_class = environment_factory(ENV)
    public = {n for n, _ in inspect.getmembers(env_class, inspect.isfunction) if not n.startswith("_")}
    assert public == {"reset", "get_reward", "calculator", "answer"}
    env = env_class()
    schema = get_json_schema(env.answer)["function"]
    assert schema["parameters"]["properties"]["value"]["type"] == ["number", "string"]
    assert schema["parameters"]["required"] == ["value"] and schema["description"].startswith("Give the final")
    assert get_json_schema(env.calculator)["function"]["parameters"]["properties"]["expression"]["type"] == "string"


def test_an_episode_played_through_the_tool_methods_is_recorded_and_rewarded():
    env = environment_factory(ENV)()
    prompt = env.reset(seed=0, prompt=[{"role": "user", "content": ""}])  # TRL passes the whole row
    task = env.trajectory.task
    assert prompt == task.prompt
    for expression in task.hidden["steps"]:
        assert "Error" not in env.calculator(expression=expression)
    assert env.get_reward() == 0.0
    assert env.answer(value=task.hidden["answer"]).endswith(EPISODE_OVER)
    assert env.get_reward() == 1.0 and env.calculator(expression="1") == EPISODE_OVER
    [fn] = reward_funcs(ENV)
    [score] = asyncio.run(fn(prompts=[None], completions=[[]], environments=[env]))
    assert fn.__name__ == "rubric_toy_calculator" and score == pytest.approx(1.0)
    env.reset(seed=0)
    assert env.trajectory.steps == [] and env.calculator(expression="2 * 3") == "6"


def test_rewards_replay_completions_on_the_row_seed_and_errored_verdicts_give_none():
    [fn] = reward_funcs(ENV)
    env = environment_factory(ENV)()
    env.reset(seed=0)
    answer = tool_call("answer", value=env.trajectory.task.hidden["answer"])
    scores = asyncio.run(
        fn(prompts=[None, None], completions=["no call", [{"role": "assistant", "content": answer}]], seed=[0, 0])
    )
    assert scores[0] is not None and scores[1] is not None and scores[1] > scores[0]
    [broken] = reward_funcs(ENV, rubric=BROKEN_RUBRIC)
    assert asyncio.run(broken(prompts=[None], completions=[answer], seed=[1])) == [None]
    with pytest.raises(ValueError, match="seed"):
        asyncio.run(fn(prompts=[None], completions=["x"]))


def test_trl_accepts_the_embedded_models_tokenizer_with_our_tool_template(local_model_dir, tiny_model_dir, tmp_path):
    """SmolLM2's own template is refused by GRPOTrainer (no tool support); with ``with_tool_template`` TRL's checks
    pass, a tool call renders as the envs parse it, TRL's parser reads one back, and the trainer is built."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import is_chat_template_prefix_preserving, supports_tool_calling

    raw = AutoTokenizer.from_pretrained(local_model_dir)
    assert not supports_tool_calling(raw)  # why the bridge needs a template at all
    tok = with_tool_template(AutoTokenizer.from_pretrained(local_model_dir))
    assert supports_tool_calling(tok) and is_chat_template_prefix_preserving(tok)
    env = environment_factory(ENV)()
    call = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "2 + 2"}}}
    chat = [{"role": "user", "content": "2 + 2?"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    text = tok.apply_chat_template(chat, tools=[env.calculator], tokenize=False)
    assert text.startswith(f"<|im_start|>system\n{SMOLLM2_SYSTEM}\n\n# Tools") and '"name": "calculator"' in text
    assert '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2 + 2"}}\n</tool_call>' in text
    parsed = tok.parse_response('<tool_call>\n{"name": "answer", "arguments": {"value": 4}}\n</tool_call>', prefix="")
    assert parsed["tool_calls"][0]["function"] == {"name": "answer", "arguments": {"value": 4}}

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        num_generations=2,
        use_cpu=True,
        report_to=[],
        max_steps=1,
    )
    with pytest.raises(ValueError, match="does not support tool calling"):
        GRPOTrainer(
            model=model,
            reward_funcs=reward_funcs(ENV),
            args=args,
            train_dataset=task_dataset(ENV, 2),
            processing_class=raw,
            environment_factory=environment_factory(ENV),
        )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs(ENV),
        args=args,
        train_dataset=task_dataset(ENV, 2),
        processing_class=tok,
        environment_factory=environment_factory(ENV),
    )
    assert trainer.chat_template is None  # prefix-preserving as given: TRL keeps our template


def test_a_tokenizer_without_chatml_is_told_what_to_do(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.convert_tokens_to_ids = lambda token: None  # as a tokenizer without ChatML's tokens answers
    with pytest.raises(ValueError, match="no <\\|im_start\\|> token"):
        with_tool_template(tok)


@pytest.mark.slow
def test_grpo_trainer_runs_two_steps_with_our_env_and_rubric(tiny_model_dir, tmp_path):
    """The tiny random model (SmolLM2's tokenizer) runs the same path as the embedded model in 1/6 of the time:
    neither calls a tool within 48 tokens (both logged tools/call_frequency 0.0), so what is tested is TRL's
    trainer driving our environment_factory and reward function."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(0)
    torch.set_num_threads(1)  # a tiny model: more threads only spin against each other on a shared machine
    tok = with_tool_template(AutoTokenizer.from_pretrained(tiny_model_dir))  # SmolLM2's tokenizer, tool-aware
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    logged: list[dict] = []

    class Log(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            logged.append(dict(logs or {}))

    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        num_generations=2,
        max_steps=2,
        max_completion_length=48,
        max_tool_calling_iterations=2,
        learning_rate=1e-6,
        beta=0.0,
        use_cpu=True,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        dataloader_num_workers=0,
        seed=0,
        temperature=1.0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs(ENV),
        args=args,
        train_dataset=task_dataset(ENV, 2),
        processing_class=tok,
        environment_factory=environment_factory(ENV),
        callbacks=[Log()],
    )
    trainer.train()
    assert trainer.state.global_step == 2
    steps = [entry for entry in logged if "rewards/rubric_toy_calculator/mean" in entry]
    assert len(steps) == 2
    assert all(math.isfinite(entry["rewards/rubric_toy_calculator/mean"]) for entry in steps)
    assert all("rewards/ToyCalculatorV0Environment/mean" in entry for entry in steps)
