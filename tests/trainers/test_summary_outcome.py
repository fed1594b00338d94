"""Training summaries put the outcome first and say when the rubric reward and the solve rate moved apart (the
README suite run: rubric 0.208 -> 0.616 while the solve rate fell 20.8% -> 12.5%)."""

from rubricgym.core.fmt import disagreement, solve_rate
from rubricgym.demo import comparison_lines
from rubricgym.trainers.evaluation import EvalResult, gain_lines
from rubricgym.trainers.report import write_html

IDS = [f"t{i}" for i in range(24)]


def readme_run() -> tuple[EvalResult, EvalResult]:
    """Base solves 5 of 24 at rubric 0.208; trained solves 3 of 24 (a subset) at rubric 0.616."""
    base = EvalResult.of("base", 0, IDS, [0.208] * 24, [1.0] * 5 + [0.0] * 19)
    trained = EvalResult.of("trained", 3, IDS, [0.616] * 24, [1.0] * 3 + [0.0] * 21)
    return base, trained


def test_the_eval_line_leads_with_the_solve_rate():
    base, _ = readme_run()
    line = base.line()
    assert "solved 20.8% [95% CI" in line and "rubric reward 0.208 [95% CI" in line
    assert line.index("solved") < line.index("rubric reward")
    no_outcome = EvalResult.of("base", 0, ["a"], [0.5], [])
    assert "solved" not in no_outcome.line() and "rubric reward 0.500" in no_outcome.line()


def test_gain_lines_warn_when_the_rubric_rose_while_the_solve_rate_fell():
    base, trained = readme_run()
    gain, warning = gain_lines(trained, base, env="toy-calculator-v0")
    assert gain.startswith("gain: solve rate -8.3% [95% CI") and "rubric reward +0.408" in gain
    assert gain.index("solve rate") < gain.index("rubric reward")
    assert warning == (
        "warning: rubric reward rose (+0.408) while the solve rate fell (20.8% -> 12.5%): the rubric may pay for "
        "activity; see rubricgym check toy-calculator-v0"
    )
    # per suite entry: both levels, then the warning
    entry = gain_lines(trained, base, env="toy-calculator-v0", prefix="", levels=True)
    assert entry[0].startswith("solve rate 20.8% -> 12.5% (gain -8.3%") and "rubric reward 0.208 -> 0.616" in entry[0]
    assert entry[1].startswith("warning: rubric reward rose")


def test_no_warning_when_both_rise_and_a_warning_when_the_rubric_falls_while_solves_rise():
    base, trained = readme_run()
    better = EvalResult.of("trained", 3, IDS, [0.616] * 24, [1.0] * 9 + [0.0] * 15)
    assert len(gain_lines(better, base)) == 1
    worse_rubric = EvalResult.of("trained", 3, IDS, [0.108] * 24, [1.0] * 9 + [0.0] * 15)
    warning = gain_lines(worse_rubric, base, env="clinical-v0")[1]
    assert "rubric reward fell (-0.100) while the solve rate rose (20.8% -> 37.5%)" in warning
    assert "rubricgym check clinical-v0" in warning
    assert disagreement(0.0, 0.5, 0.1) is None  # the rubric did not move: nothing to contrast


def test_partial_credit_outcomes_are_compared_as_the_outcome_reward():
    base = EvalResult.of("base", 0, ["a", "b"], [0.2, 0.2], [0.7, 0.3])
    trained = EvalResult.of("trained", 1, ["a", "b"], [0.6, 0.6], [0.3, 0.3])
    gain, warning = gain_lines(trained, base)
    assert gain.startswith("gain: outcome reward -0.200") and "solve rate" not in gain
    assert "while the outcome reward fell (0.500 -> 0.300)" in warning


def test_solve_rate_takes_the_envs_verdict_else_an_outcome_reward_of_one():
    from rubricgym.core.types import Outcome

    by_reward = [Outcome(reward=r) for r in (1.0, 0.999, 1 - 1e-12, 0.0)]
    assert solve_rate(by_reward) == 0.5 and solve_rate([]) is None
    # a partial-credit env says so: a right diagnosis with few exams (0.69) is solved, a full 1.0 without it is not
    assert solve_rate([Outcome(reward=0.69, solved=True), Outcome(reward=1.0, solved=False)]) == 0.5


def test_the_demo_comparison_warns_on_disagreement():
    base, trained = readme_run()
    lines = comparison_lines("overall", base, trained, "toy-calculator-v0")
    assert "rubric reward" in lines[1] and "solve rate" in lines[2]
    assert lines[3] == (
        "  warning: rubric reward rose (+0.408) while the solve rate fell (20.8% -> 12.5%): the rubric may pay for "
        "activity; see rubricgym check toy-calculator-v0"
    )
    assert len(comparison_lines("overall", base, base)) == 3


def test_the_html_report_marks_the_steps_that_raised_an_alarm(tmp_path):
    alarm = "step 2: warn rubric_up_outcome_down = 0.400 > 0.05 (the rubric reward rose while the solve rate fell)"
    records = [
        {"kind": "train", "step": 1, "reward_mean": 0.2, "success_mean": 0.5},
        {"kind": "train", "step": 2, "reward_mean": 0.6, "success_mean": 0.0, "monitor/toy/alarm": alarm},
    ]
    page = write_html(tmp_path, {}, records, [], ["summary"]).read_text()
    assert "monitor alarm" in page and "warn rubric_up_outcome_down = 0.400" in page
    assert page.index("<th>success_mean</th>") < page.index("<th>reward_mean</th>")
