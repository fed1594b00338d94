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


def _score(agent, n=3, seed=0):
    from rubricgym.rewards.prm import ProcessRewardModel

    trajs = run(agent, n=n, seed=seed)
    rubric = rubricgym.spec(ENV).load().default_rubric()
    return trajs, asyncio.run(ProcessRewardModel(rubric).score_many(trajs))


def test_the_default_rubric_is_gated_on_the_answer_and_pays_progress_not_activity():
    """Issue 39: v2 paid 0.46-0.65 for a wrong answer taken from calculator calls; v3 gates on the answer
    (SWE-TRACE, gamma 0.7) and its process criteria pay only for work on the solution."""
    from rubricgym.rewards.consistency import ActivityAgent

    rubric = rubricgym.spec(ENV).load().default_rubric()
    assert (rubric.version, rubric.aggregation.method, rubric.aggregation.outcome_check) == (
        "3",
        "swe_trace",
        "correct",
    )
    _, oracle = _score(CalculatorOracle())
    assert [b.total for b in oracle] == [1.0, 1.0, 1.0]
    # activity without progress: four calls of the calculator's example (17 * 23 - 4 = 387), then answer 387
    activity, busy = _score(ActivityAgent())
    assert all(t.outcome.reward == 0.0 and len(t.steps) == 5 for t in activity)
    assert [b.total for b in busy] == [0.0, 0.0, 0.0]
    assert all(b.n_not_applicable == 6 for b in busy)  # clean + valid_step on each of 5 steps: no progress made


def test_near_miss_by_hand_and_the_outcome_agents_rank_below_any_solve():
    from rubricgym.envs.toy.agents import NearMissAgent, WrongAnswerAgent

    near, scored = _score(NearMissAgent(), n=6)
    t, b = next((t, b) for t, b in zip(near, scored, strict=True) if len(t.task.hidden["steps"]) == 3)
    # 3 operations: the first two computed right, the last slipped (+ 1), the slipped value answered (wrong).
    # grounded 1 (w .7), clean 1 (.7), used_calculator 2/3 (.3), valid_step 1 over 4 steps (.7), progress 2/3
    # over the 3 compute steps (.3): s_prm = (2.1 + 0.2 + 0.2) / 2.7; total = (1 - 0.7) * s_prm
    assert t.outcome.reward == 0.0 and t.outcome.answer == str(t.task.hidden["answer"] + 1)
    assert b.per_criterion == pytest.approx(
        {"correct": 0.0, "grounded": 1.0, "clean": 1.0, "used_calculator": 2 / 3, "valid_step": 1.0, "progress": 2 / 3}
    )
    assert b.total == pytest.approx(0.3 * 2.5 / 2.7)
    wrong, wrong_scored = _score(WrongAnswerAgent(), n=6)
    assert all(tr.outcome.reward == 0.0 for tr in wrong)
    assert all(w.per_criterion["grounded"] == 0.0 for w in wrong_scored)  # answered a number it never computed
    near_mean = sum(x.total for x in scored) / len(scored)
    wrong_mean = sum(x.total for x in wrong_scored) / len(wrong_scored)
    assert 0.3 >= near_mean > wrong_mean > 0.0
    checks = rubricgym.make(ENV).checks()
    assert checks["made_progress"](t).met and not checks["steps_computed"](t).met
    assert checks["steps_computed"](t).score == pytest.approx(2 / 3) and checks["answer_from_work"](t).met
