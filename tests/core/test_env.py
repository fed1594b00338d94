import asyncio
from typing import Literal

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


# ---- a step runs its tool call through call_tool (one path, issue 45) --------------------------------------


class _EchoEnv(rubricgym.RubricEnv):
    env_id, stages = "echo-test-v0", ("act",)

    def sample_task(self, rng, split="train"):
        return rubricgym.Task(id=f"echo-{int(rng.integers(1000))}", env_id="echo-test-v0", prompt="Echo.")

    @rubricgym.tool
    def echo(self, text: str, times: int = 1) -> str:
        """Repeat text (plain text return: the step wraps it)."""
        if times < 1:
            raise rubricgym.ToolError("times must be at least 1")
        return text * times

    @rubricgym.tool
    def mode(self, kind: Literal["a", "b"]) -> str:
        """A tool with a Literal argument (its values are checked before the call)."""
        return kind


def test_every_valid_call_runs_through_call_tool_and_its_errors_become_observations():
    class Counting(_EchoEnv):
        def call_tool(self, c):
            self.seen.append(c.name)
            return super().call_tool(c)

    env = Counting()
    env.seen = []
    actions = [
        call("echo", text="ab", times=2),  # plain text return
        call("echo", text="ab", times=0),  # ToolError
        call("echo", text=5),  # a schema error: never reaches the tool
        call("mode", kind="c"),  # a Literal value outside the enum: call_tool's check
        call("mode", kind="b"),
        call("nope"),  # an unknown tool: never reaches the tool
    ]
    env.reset(seed=1)
    for a in actions:
        env.step(a)
    assert env.seen == ["echo", "echo", "mode", "mode"]
    steps = env.trajectory().steps
    replies = [s.observation.messages[0].content for s in steps]
    assert replies[0] == "abab"
    assert replies[1] == "Error from echo: times must be at least 1"
    assert "argument 'text' of tool 'echo' must be string" in replies[2]
    assert replies[3] == "Error from mode: argument 'kind' of tool 'mode' must be one of 'a', 'b', got 'c'"
    assert replies[4] == "b" and "unknown tool 'nope'" in replies[5]
    assert steps[0].tool_result == "abab" and steps[1].tool_error == "times must be at least 1"
    assert steps[2].action.parse_error and steps[2].action.tool_call.name == "echo"  # the invalid call is recorded
    assert steps[3].tool_error and steps[3].action.parse_error is None


def test_an_env_or_instance_with_its_own_call_tool_is_not_bypassed():
    class Counting(_EchoEnv):
        def call_tool(self, c):
            self.calls = getattr(self, "calls", 0) + 1
            return super().call_tool(c)

    env = Counting()
    env.reset(seed=0)
    assert env.step(call("echo", text="x"))[0] == "x" and env.calls == 1
    other = _EchoEnv()
    other.call_tool = lambda c: rubricgym.ToolOutput(text="instance's own")
    other.reset(seed=0)
    assert other.step(call("echo", text="x"))[0] == "instance's own"


def test_reset_without_a_seed_continues_the_rng_and_with_one_restarts_it():
    env = _EchoEnv()
    first = [env.reset(seed=7)[1]["task_id"], env.reset()[1]["task_id"], env.reset()[1]["task_id"]]
    again = [env.reset(seed=7)[1]["task_id"], env.reset()[1]["task_id"], env.reset()[1]["task_id"]]
    assert first == again and len(set(first)) > 1


def test_a_task_that_begin_rewrites_is_the_one_reset_shows():
    """An env whose ``begin`` replaces the task (a GUI env puts the first page into the prompt) starts the episode
    with the replaced prompt, in ``reset`` and in the typed API alike."""

    class _PageEnv(_EchoEnv):
        def begin(self, task):
            self._task = task.model_copy(update={"prompt": f"{task.prompt}\n\nPage: hello"})

    env = _PageEnv()
    for _ in range(2):  # the second reset reads the cached system prompt
        text, _ = env.reset(seed=0)
        assert text.endswith("Echo.\n\nPage: hello")
        assert env.reset_typed(seed=0).messages[-1].content.endswith("Page: hello")


def test_last_step_is_the_histories_last_entry():
    env = _EchoEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="needs a step"):
        env.last_step()
    for action in (call("echo", text="ab"), "no call here", call("echo", text="c", times=2)):
        env.step(action)
        step, messages = env.last_step()
        assert step == env.steps[-1] and messages == env.messages[-2:]
