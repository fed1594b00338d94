"""Plots people expect (training report) and an arena report that names its agents and explains its two ratings."""

from __future__ import annotations

import json

from rubricgym.arena.report import arena_html
from rubricgym.trainers.report import write_plots


def _records(kl: float | None) -> list[dict]:
    out: list[dict] = [{"kind": "eval", "step": 0, "eval_mean": 0.2, "eval_ci_low": 0.1, "eval_ci_high": 0.3}]
    for step in (1, 2, 3):
        out.append(
            {"kind": "train", "step": step, "reward_mean": 0.1 * step, "success_mean": 0.0, "kl": kl, "entropy": None}
        )
    return out


def test_a_metric_that_is_off_gets_no_panel(tmp_path):
    names = {p.stem for p in write_plots(_records(kl=None), tmp_path)}
    assert "reward" in names and "kl" not in names and "entropy" not in names
    assert not (tmp_path / "kl.png").exists()
    names = {p.stem for p in write_plots(_records(kl=0.01), tmp_path)}
    assert "kl" in names and (tmp_path / "kl.png").exists()
    names = {p.stem for p in write_plots(_records(kl=None), tmp_path)}  # a stale panel from an earlier write goes
    assert not (tmp_path / "kl.png").exists()


def test_arena_report_names_the_winner_and_explains_bt_vs_elo(arena_run):
    rep = json.loads((arena_run / "arena.json").read_text())
    page = arena_html(rep)
    ex = rep["example"]
    winner = ex[ex["result"]["winner"]]
    assert f"winner: <b id='winner'>{winner}</b>" in page
    assert "winner: a" not in page and "winner: b" not in page
    assert "Why Bradley-Terry and Elo differ" in page


def test_dashboard_panels_per_entry_alarms_and_integer_steps(tmp_path):
    import json as _json

    from rubricgym.viewer.dashboard import dashboard

    records = [
        {
            "kind": "train",
            "step": s,
            "reward_mean": 0.2 * s,
            "reward_std": 0.1,
            "kl": None,
            "judge/latency_s": 0.5,
            "judge/cache_hits": float(s),
            "env/toy/reward": 0.3,
            "env/ds/reward": 0.1 * s,
            "monitor/exploitation": 0.1 * s,
            "monitor/alarm": "exploitation rose above 0.25" if s == 3 else None,
        }
        for s in range(1, 5)
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(_json.dumps(r) + "\n" for r in records) + '{"kind": "tra')
    board = dashboard(tmp_path)
    ids = [p["id"] for p in board["panels"]]
    assert {"reward", "judge", "cache", "entry-reward", "monitors"} <= set(ids)
    assert "kl" not in ids and "KL to reference" in board["off"]
    assert board["alarms"] == [(3, "monitor/alarm: exploitation rose above 0.25")]
    reward = next(p["svg"] for p in board["panels"] if p["id"] == "reward")
    assert reward.count("class='alarm'") == 1 and "class='band'" in reward
    ticks = [t.split(">")[1] for t in reward.split("<text class='xtick'")[1:]]
    assert [t.split("<")[0] for t in ticks] == ["1", "2", "3", "4"]
    entry = next(p["svg"] for p in board["panels"] if p["id"] == "entry-reward")
    assert ">toy<" in entry and ">ds<" in entry
