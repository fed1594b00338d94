import asyncio

import pytest

import rubricgym
from rubricgym.env_checker import check_env_id
from rubricgym.envs.toy.agents import CalculatorOracle, GuessingAgent, RandomAgent
from rubricgym.envs.toy.arith import CalculatorError, evaluate, expression_problem, word_problem

ENV = "toy-calculator-v0"


def run(agent, n=6, seed=0):
    tasks = rubricgym.TaskSet.generate(ENV, n, seed=seed)
    return asyncio.run(rubricgym.rollout_many(ENV, agent, tasks, progress=False)).trajectories


def test_calculator_is_safe_and_explains_refusals():
    assert evaluate("(17 * 23 - 4) / 3") == 129
    assert evaluate("2 ^ 10") == 1024
    for bad, reason in [("__import__('os')", "unsupported"), ("9**99", "exponent"), ("1/0", "zero"), ("", "empty")]:
        with pytest.raises(CalculatorError, match=reason):
            evaluate(bad)


def test_word_problem_steps_reach_the_answer():
    import numpy as np

    for s in range(20):
        text, steps, answer = word_problem(np.random.default_rng(s), 3)
        assert len(steps) == 3 and evaluate(steps[-1]) == answer and answer > 0


def test_expression_style_states_the_same_problem_as_one_expression():
    import numpy as np

    for s in range(20):
        text, steps, answer = expression_problem(np.random.default_rng(s), 3)
        assert (steps, answer) == word_problem(np.random.default_rng(s), 3)[1:]
        assert text.startswith("Compute ") and evaluate(text[len("Compute ") : -1]) == answer
    env = rubricgym.make(ENV, style="expression", min_ops=1, max_ops=1)
    task = env.task_set(1)[0]
    env.reset(options={"task": task})
    expr = task.prompt.split("Compute ")[1].split(".")[0]
    call = '<tool_call>{{"name": "{}", "arguments": {{"{}": {}}}}}</tool_call>'
    env.step(call.format("calculator", "expression", f'"{expr}"'))
    obs, reward, done, _, _ = env.step(call.format("answer", "value", task.hidden["answer"]))
    assert done and reward == 1.0
    with pytest.raises(ValueError, match="style"):
        rubricgym.make(ENV, style="riddle")


def test_system_prompt_shows_a_correct_call_of_every_tool_from_schema_examples():
    prompt = rubricgym.make(ENV).system_prompt()
    assert '{"name": "calculator", "arguments": {"expression": "17 * 23 - 4"}}' in prompt
    assert '{"name": "answer", "arguments": {"value": 387}}' in prompt


def test_oracle_solves_everything_and_baselines_do_not():
    assert all(t.outcome.reward == 1.0 for t in run(CalculatorOracle()))
    assert sum(t.outcome.reward for t in run(RandomAgent(seed=0))) < 2
    assert sum(t.outcome.reward for t in run(GuessingAgent())) < 2


def test_checks_separate_grounded_oracle_from_guesser():
    checks = rubricgym.make(ENV).checks()
    oracle, guess = run(CalculatorOracle(), n=3)[0], run(GuessingAgent(), n=3)[0]
    assert checks["final_answer_correct"](oracle).met and checks["answer_grounded"](oracle).met
    assert not checks["answer_grounded"](guess).met and not checks["used_calculator"](guess).met
    assert all(checks["step_progress"](oracle, i).met for i in range(len(oracle.steps)))
    with pytest.raises(ValueError, match="step-scoped"):
        checks["step_valid"](oracle)


def test_rubricgym_check_passes():
    report = check_env_id(ENV, fuzz=100)
    assert report.ok, report.rows
