"""Panels: majority and mean combination, failed members left out, agreement statistics."""

import pytest

from rubricgym.core.checks import check
from rubricgym.core.types import CheckResult
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.panel import PanelJudge, agreement, fleiss_kappa, item_agreement
from rubricgym.rewards.rubric import Criterion

C = Criterion(id="c", text="c", check="c")


def member(met: bool, score: float | None = None, id: str = "m") -> CheckJudge:
    @check("c")
    def fn(traj, step=None) -> CheckResult:
        return CheckResult(score=score if score is not None else float(met), met=met, rationale=f"{id} says {met}")

    j = CheckJudge({"c": fn})
    j.id = id
    return j


def test_fleiss_kappa_wikipedia_example():
    # the worked example on Wikipedia's "Fleiss' kappa" page: 10 items, 14 raters, 5 categories, kappa 0.210
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    assert fleiss_kappa(table) == pytest.approx(0.2099, abs=1e-3)
    assert item_agreement([0, 2, 6, 4, 2]) == pytest.approx(0.253, abs=1e-3)
    assert fleiss_kappa([[3, 0], [3, 0]]) is None  # every vote in one category: kappa undefined


def test_binary_agreement_by_hand():
    # items [T,T,F] and [T,T,T]: P_i = 1/3 and 1 -> P = 2/3; p_T = 5/6 -> Pe = 26/36; kappa = (2/3-26/36)/(10/36)
    a = agreement([[True, True, False], [True, True, True]])
    assert a.items == 2 and a.percent_agreement == pytest.approx(2 / 3) and a.unanimous == 0.5
    assert a.fleiss_kappa == pytest.approx(-0.2)


async def test_majority_and_mean(oracle_trajs):
    members = [member(True, 0.9, "a"), member(True, 0.6, "b"), member(False, 0.0, "c")]
    maj = await PanelJudge(members).judge(C, oracle_trajs[0])
    assert maj.met and maj.score == pytest.approx(2 / 3) and len(maj.members) == 3
    assert maj.details["agreement"] == pytest.approx(1 / 3)
    mean = await PanelJudge(members, method="mean").judge(C, oracle_trajs[0])
    assert mean.met and mean.score == pytest.approx(0.5)
    split = await PanelJudge([member(True, id="a"), member(False, id="b")]).judge(C, oracle_trajs[0])
    assert not split.met  # a tie is not a majority


async def test_failed_members_are_left_out(oracle_trajs):
    broken = CheckJudge({})
    broken.id = "broken"
    panel = PanelJudge([member(False, id="a"), broken])
    v = await panel.judge(C, oracle_trajs[0])
    assert v.ok and not v.met and v.details["failed_members"] == 1
    assert panel.agreement().items == 0  # an item with a failed member does not count towards agreement
    all_failed = await PanelJudge([broken]).judge(C, oracle_trajs[0])
    assert not all_failed.ok and "every panel member failed" in all_failed.error and all_failed.score is None


async def test_panel_agreement_accumulates(oracle_trajs):
    panel = PanelJudge([member(True, id="a"), member(True, id="b")])
    for t in oracle_trajs:
        await panel.judge(C, t)
    a = panel.agreement()
    assert a.items == 3 and a.percent_agreement == 1.0 and a.fleiss_kappa is None


def test_panel_needs_judges():
    with pytest.raises(ValueError):
        PanelJudge([])
    with pytest.raises(ValueError):
        PanelJudge([member(True)], method="median")  # type: ignore[arg-type]
