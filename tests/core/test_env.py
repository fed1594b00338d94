import asyncio

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import rubricgym
from rubricgym.core.types import Action, Message, ToolCall


@pytest.fixture
def env():
    return rubricgym.make("toy-calculator-v0")


def call(name, **args):
    import json

    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def test_gymnasium_check_env_passes_directly_and_through_gymnasium_make(env):
    check_env(env)
    check_env(gymnasium.make("rubricgym/ToyCalculator-v0").unwrapped)


def test_text_spaces_accept_any_unicode_up_to_max_length(env):
    assert env.observation_space.contains("line one\nzwei — 中文 🙂")
    assert not env.observation_space.contains("x" * (env.observation_space.max_length + 1))
    assert not env.observation_space.contains(b"bytes")


def test_malformed_action_is_an_observation_and_a_recorded_parse_error(env):
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("I think the answer is 12")
    assert "Invalid action" in obs and "<tool_call>" in obs
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["parse_error"] == "no tool call found"
    step = env.trajectory().steps[0]
    assert step.action.parse_error == "no tool call found" and step.stage == "compute"


def test_tool_error_is_explained(env):
    env.reset(seed=0)
    obs, *_, info = env.step(call("calculator", expression="1/0"))
    assert "division by zero" in obs and info["tool_error"] == "division by zero"


def test_stages_labels_and_episode_end_with_outcome(env):
    obs, info = env.reset(seed=1)
    task = env.trajectory().task
    for expr in task.hidden["steps"]:
        env.step(call("calculator", expression=expr))
    _, reward, terminated, truncated, _ = env.step(call("answer", value=task.hidden["answer"]))
    traj = env.trajectory()
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert traj.stages() == ["compute"] * len(task.hidden["steps"]) + ["answer"]
    assert traj.outcome.answer == str(task.hidden["answer"]) and traj.outcome.summary["correct"]
    with pytest.raises(RuntimeError, match="reset"):
        env.step(call("answer", value=1))


def test_max_steps_truncates(env):
    env = rubricgym.make("toy-calculator-v0", max_steps=2)
    env.reset(seed=0)
    assert env.step("junk")[3] is False
    obs, _, terminated, truncated, _ = env.step("junk")
    assert truncated and not terminated and "Step limit reached" in obs
    assert env.trajectory().outcome.truncated


def test_typed_face_structured_call_gets_tool_role_reply(env):
    env.reset_typed(seed=0)
    action = Action(
        text="", tool_call=ToolCall(id="c1", name="calculator", arguments={"expression": "6*7"}), structured=True
    )
    obs = env.step_typed(action)
    assert obs.messages == [Message(role="tool", content="42", tool_call_id="c1", name="calculator")]
    assert env.messages[-2].tool_calls[0].id == "c1"
    state = env.state()
    assert state.step_count == 1 and state.stage == "compute" and not state.done and state.max_steps == 8


def test_reset_with_explicit_task_and_wrong_env_task(env):
    task = env.task_set(1, seed=5)[0]
    obs, info = env.reset(options={"task": task.model_dump()})
    assert info["task_id"] == task.id and task.prompt in obs
    with pytest.raises(ValueError, match="is for env"):
        env.reset(options={"task": task.model_copy(update={"env_id": "other-v0"})})


def test_async_step_matches_sync(env):
    env.reset(seed=0)
    obs = asyncio.run(env.astep_typed(call("calculator", expression="2**10")))
    assert obs.text == "1024"


def test_episode_ids_are_distinct_per_reset(env):
    ids = []
    for seed in range(3):
        env.reset(seed=seed)
        ids.append(env.state().episode_id)
    assert len(set(ids)) == 3 and all(len(i) < 40 for i in ids)


def test_details_are_the_public_keys_of_the_record_in_a_dict_of_their_own(env):
    env.reset(seed=0)
    *_, info = env.step(call("calculator", expression="6*7"))
    assert info["details"] == {"value": 42}
    info["details"]["value"] = 0  # the agent's copy: the step's record is untouched
    assert env.steps[-1].info == {"value": 42}
    *_, info = env.step(call("answer", value=42))
    assert info["details"] == {"value": 42.0}  # whether it is correct stays private
    assert set(env.steps[-1].info) == {"value", "correct"}
