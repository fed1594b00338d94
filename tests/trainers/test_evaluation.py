"""What an evaluation line says about the outcome: a solve rate only where outcomes are solved or not."""

from rubricgym.trainers.evaluation import EvalResult


def test_the_line_calls_a_binary_outcome_solved_and_partial_credit_an_outcome_reward():
    binary = EvalResult.of("base", 0, ["a", "b"], [0.2, 0.8], [0.0, 1.0])
    assert "solved 50.0% [" in binary.line()
    partial = EvalResult.of("base", 0, ["a", "b", "c", "d"], [0.1, 0.2, 0.3, 0.4], [0.0, 0.2, 0.3, 0.5])
    line = partial.line()
    assert "solved" not in line and "outcome reward 0.250 [" in line  # 25% would read as one case in four solved
