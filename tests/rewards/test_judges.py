"""CheckJudge runs the env's named checks; every way it can fail is an error verdict."""

from rubricgym.core.checks import check
from rubricgym.core.types import CheckResult
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.rubric import Criterion

CORRECT = Criterion(id="correct", text="Correct.", check="final_answer_correct")


async def test_check_judge_uses_the_trajectory_env(oracle_trajs, guess_trajs):
    judge = CheckJudge()
    good = await judge.judge(CORRECT, oracle_trajs[0])
    wrong = next(t for t in guess_trajs if t.outcome.reward == 0)
    bad = await judge.judge(CORRECT, wrong)
    assert (good.met, good.score, good.judge) == (True, 1.0, "check")
    assert (bad.met, bad.score) == (False, 0.0)
    assert good.evidence.steps == [len(oracle_trajs[0].steps) - 1]
    assert "expected" in bad.rationale


async def test_step_scope_check(oracle_trajs):
    c = Criterion(id="v", text="valid", scope="step", check="step_valid")
    v = await CheckJudge().judge(c, oracle_trajs[0], 1)
    assert v.ok and v.met and v.step == 1


async def test_failures_are_error_verdicts(oracle_trajs):
    judge = CheckJudge()
    missing = await judge.judge(Criterion(id="x", text="x", check="no_such_check"), oracle_trajs[0])
    assert not missing.ok and "no check 'no_such_check'" in missing.error and "final_answer_correct" in missing.error
    scope = await judge.judge(Criterion(id="x", text="x", check="step_valid"), oracle_trajs[0])
    assert not scope.ok and "step-scoped" in scope.error
    wrong_env = oracle_trajs[0].model_copy(deep=True)
    wrong_env.task.env_id = "nope-v0"
    env = await judge.judge(CORRECT, wrong_env)
    assert not env.ok and "cannot load the checks" in env.error


async def test_a_raising_check_is_an_error_not_a_crash(oracle_trajs):
    @check("boom")
    def boom(traj, step=None) -> CheckResult:
        raise ZeroDivisionError("bad check")

    v = await CheckJudge({"boom": boom}).judge(Criterion(id="b", text="b", check="boom"), oracle_trajs[0])
    assert not v.ok and "ZeroDivisionError" in v.error and v.score is None


def test_can_judge():
    assert CheckJudge().can_judge(CORRECT)
    assert not CheckJudge().can_judge(Criterion(id="l", text="llm criterion"))
