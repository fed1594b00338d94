"""Self-contained HTML reports (inline CSS and SVG, no scripts or network): suite evaluation and arena."""

from __future__ import annotations

from html import escape
from typing import Any

CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#1d2330;max-width:1200px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #d5d9e0;padding:4px 8px;font-size:13px;text-align:right}th{background:#f2f4f7}
td.l,th.l{text-align:left}.muted{color:#6b7280;font-size:12px}.bad{color:#b42318}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:16px}.traj{border:1px solid #d5d9e0;padding:8px;font-size:12px}
.step{margin:4px 0;padding:4px;background:#f8f9fb;white-space:pre-wrap;word-break:break-word}
.win{border:2px solid #15803d}
"""


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{CSS}</style></head><body><h1>{escape(title)}</h1>{body}</body></html>"
    )


WHY_BT_ELO = (
    "Why Bradley-Terry and Elo differ: Bradley-Terry fits one strength per agent to all judged games at once (game "
    "order does not matter; its 95% CI comes from bootstrap resamples over tasks). Elo updates a rating after each "
    "game in the order the games were played, so it depends on that order and on its K-factor and has not converged "
    "after few games. Rank by Bradley-Terry and its CI; Elo is shown for comparison with online leaderboards."
)


def winner_name(ex: dict[str, Any]) -> str:
    """The winning agent's name (``tie`` or ``unjudged`` otherwise), never the side letter ``a``/``b``."""
    r = ex.get("result") or {}
    if r.get("error"):
        return "unjudged"
    w = r.get("winner")
    if w in ("a", "b"):
        return str(ex.get(w, w))
    return "tie" if w in (None, "tie") else str(w)


def _f(x: float | None, fmt: str = ".3f") -> str:
    return "–" if x is None else format(x, fmt)


def _ci(ci: Any, fmt: str = ".3f") -> str:
    return "–" if not ci else f"[{format(ci[0], fmt)}, {format(ci[1], fmt)}]"


def rank_warnings(agents: list[dict[str, Any]], envs: str) -> list[str]:
    """Where the leaderboard and the outcome disagree: an agent rated above another (their rating CIs apart, so
    not by chance) that solves fewer tasks. ``agents`` in rating order, with ``solved`` where it is known."""
    out = []
    for k, a in enumerate(agents):
        for b in agents[k + 1 :]:
            if a.get("solved") is None or b.get("solved") is None:
                continue
            if a["ci"][0] > b["ci"][1] and a["solved"] < b["solved"]:
                out.append(
                    f"warning: {a['name']} is rated above {b['name']} ({a['rating']:.0f} vs {b['rating']:.0f}) but "
                    f"solves fewer tasks ({a['solved']:.1%} vs {b['solved']:.1%}): the judge may pay for activity; "
                    f"see rubricgym check {envs}"
                )
    return out


def eval_html(report: Any) -> str:
    """One agent on one suite: the overall score and a row per entry, the outcome first, each with its 95%
    bootstrap CI."""
    rows = "".join(
        f"<tr><td class=l>{escape(e.entry)}</td><td class=l>{escape(e.env)}</td><td>{e.weight:.2f}</td>"
        f"<td>{e.scored}/{e.tasks}</td><td>{_f(e.success, '.1%')}</td><td>{_ci(e.success_ci, '.1%')}</td>"
        f"<td>{_f(e.reward)}</td><td>{_ci(e.reward_ci)}</td><td>{_f(e.steps, '.1f')}</td>"
        f"<td class='{'bad' if e.judge_errors else ''}'>{e.judge_errors}</td><td>{len(e.failed_tasks)}</td></tr>"
        for e in report.entries
    )
    overall = (
        f"<tr><th class=l>overall (weighted)</th><th></th><th>1.00</th><th></th><th>{_f(report.success, '.1%')}</th>"
        f"<th>{_ci(report.success_ci, '.1%')}</th><th>{_f(report.reward)}</th>"
        f"<th>{_ci(report.reward_ci)}</th><th></th><th>{report.judge_errors}</th><th></th></tr>"
    )
    head = (
        "<tr><th class=l>entry</th><th class=l>env</th><th>weight</th><th>scored</th><th>solved</th><th>95% CI</th>"
        "<th>rubric reward</th><th>95% CI</th><th>steps</th><th>judge errors</th><th>failed</th></tr>"
    )
    body = (
        f"<p>agent <b>{escape(report.agent)}</b> on suite <b>{escape(report.suite)}</b> v{escape(report.version)}."
        " Judge errors are left out of the means, never scored 0.</p>"
        f"<table>{head}{rows}{overall}</table>"
    )
    return _page(f"rubricgym eval: {report.agent} on {report.suite}", body)


def _ratings_svg(agents: list[dict[str, Any]]) -> str:
    """Horizontal CI bars with the point rating, one row per agent."""
    lo = min(a["ci"][0] for a in agents) - 20
    hi = max(a["ci"][1] for a in agents) + 20
    width, left, row = 640, 140, 26
    span = max(hi - lo, 1e-9)

    def x(v: float) -> float:
        return left + (width - left - 20) * (v - lo) / span

    parts = [
        f"<svg id='ratings' xmlns='http://www.w3.org/2000/svg' width='{width}' "
        f"height='{row * len(agents) + 30}' role='img' aria-label='ratings with 95% CI'>"
    ]
    for k, a in enumerate(agents):
        y = 15 + k * row
        parts.append(
            f"<text x='4' y='{y + 4}' font-size='12'>{escape(a['name'])}</text>"
            f"<line x1='{x(a['ci'][0]):.1f}' x2='{x(a['ci'][1]):.1f}' y1='{y}' y2='{y}' "
            "stroke='#2563eb' stroke-width='3'/>"
            f"<circle cx='{x(a['rating']):.1f}' cy='{y}' r='5' fill='#1e3a8a'/>"
        )
    axis_y = row * len(agents) + 20
    for v in (lo + 20, (lo + hi) / 2, hi - 20):
        parts.append(f"<text x='{x(v):.1f}' y='{axis_y}' font-size='10' text-anchor='middle'>{v:.0f}</text>")
    return "".join(parts) + "</svg>"


def _heat(v: float | None) -> str:
    if v is None:
        return "#eeeeee"
    r, g = int(220 - 120 * v), int(100 + 120 * v)  # red (loses) .. green (wins)
    return f"rgb({r},{g},120)"


def _trajectory(name: str, steps: list[dict[str, Any]], answer: str | None, won: bool) -> str:
    items = "".join(
        f"<div class=step><b>{s['index']}</b> [{escape(s['stage'])}] {escape(s['action'] or '')}"
        + (f"<div class=bad>{escape(s['error'])}</div>" if s.get("error") else "")
        + (f"<div class=muted>→ {escape(s['result'])}</div>" if s.get("result") else "")
        + "</div>"
        for s in steps
    )
    return (
        f"<div class='traj{' win' if won else ''}'><h3>{escape(name)}{' (winner)' if won else ''}</h3>{items}"
        f"<p><b>answer:</b> {escape(str(answer))}</p></div>"
    )


def _example_html(ex: dict[str, Any] | None) -> str:
    if not ex:
        return "<p class=muted>no judged game to show</p>"
    r = ex["result"]
    why = [o.get("rationale") for o in r.get("orders", []) if o.get("rationale")]
    dims = ""
    if r.get("orders"):
        o = r["orders"][0]
        keys = sorted(set(o["path"].get("a") or {}) | set(o["answer"].get("a") or {}))

        def score(side: str, key: str) -> str:
            v = (o["path"].get(side) or {}).get(key, (o["answer"].get(side) or {}).get(key))
            return _f(v, ".1f")

        dims = "".join(
            f"<tr><td class=l>{escape(k)}</td><td>{score('a', k)}</td><td>{score('b', k)}</td></tr>" for k in keys
        )
        dims = (
            f"<table id='dims'><tr><th class=l>dimension (0-10)</th><th>{escape(ex['a'])}</th>"
            f"<th>{escape(ex['b'])}</th></tr>{dims}</table>"
        )
    rationale = "".join(f"<p>{escape(w)}</p>" for w in why) or (
        "<p class=muted>programmatic judge: the dimensions are the rubric's criteria, scored by the env's checks</p>"
    )
    return (
        f"<p>entry <b>{escape(ex['entry'])}</b>, task <code>{escape(ex['task_id'])}</code>: "
        f"{escape(ex['prompt'][:600])}</p>"
        f"<p>judge scores (both orders summed, 0-20): {escape(ex['a'])} {_f(r.get('score_a'), '.1f')} vs "
        f"{escape(ex['b'])} {_f(r.get('score_b'), '.1f')}; winner: <b id='winner'>{escape(winner_name(ex))}</b></p>"
        f"{dims}<h3>Judge's rationale</h3>{rationale}<div class=pair id='example'>"
        + _trajectory(ex["a"], ex["a_steps"], ex["a_answer"], r.get("winner") == "a")
        + _trajectory(ex["b"], ex["b_steps"], ex["b_answer"], r.get("winner") == "b")
        + "</div>"
    )


def arena_html(rep: dict[str, Any]) -> str:
    """Leaderboard with CI bars, win-rate heatmap, per-entry ratings and an example match side by side."""
    agents, names, order = rep["agents"], rep["names"], rep["order"]
    board = "".join(
        f"<tr><td>{k + 1}</td><td class=l>{escape(a['name'])}</td><td class=l>{escape(a['kind'])}</td>"
        f"<td>{_f(a.get('solved'), '.1%')}</td><td>{_ci(a.get('solved_ci'), '.1%')}</td>"
        f"<td>{a['rating']:.0f}</td><td>[{a['ci'][0]:.0f}, {a['ci'][1]:.0f}]</td><td>{a['elo']:.0f}</td>"
        f"<td>{a['games']}</td><td>{a['wins']}-{a['ties']}-{a['losses']}</td></tr>"
        for k, a in enumerate(agents)
    )
    board = (
        "<table id='leaderboard'><tr><th>#</th><th class=l>agent</th><th class=l>kind</th><th>solved</th>"
        "<th>95% CI</th><th>Bradley-Terry</th><th>95% CI</th><th>Elo (online)</th><th>games</th><th>W-T-L</th></tr>"
        + board
        + "</table>"
        + f"<p class=muted id='why-bt-elo'>{escape(WHY_BT_ELO)}</p>"
        + "".join(f"<p class=bad>{escape(w)}</p>" for w in rep.get("outcome_warnings", []))
    )
    idx = {n: k for k, n in enumerate(names)}
    heat = "".join(
        f"<tr><th class=l>{escape(a)}</th>"
        + "".join(
            f"<td style='background:{_heat(rep['win_rate'][idx[a]][idx[b]])}'>"
            + ("" if a == b or rep["win_rate"][idx[a]][idx[b]] is None else f"{rep['win_rate'][idx[a]][idx[b]]:.2f}")
            + "</td>"
            for b in order
        )
        + "</tr>"
        for a in order
    )
    heat = (
        "<table id='heatmap'><tr><th class=l>row beats column</th>"
        + "".join(f"<th>{escape(b)}</th>" for b in order)
        + "</tr>"
        + heat
        + "</table>"
    )
    entries = list(rep["per_entry"])
    per = "".join(
        f"<tr><td class=l>{escape(a)}</td>"
        + "".join(f"<td>{_f(rep['per_entry'][e].get(a), '.0f')}</td>" for e in entries)
        + "</tr>"
        for a in order
    )
    per = (
        "<table id='per-entry'><tr><th class=l>agent</th>"
        + "".join(f"<th>{escape(e)}</th>" for e in entries)
        + "</tr>"
        + per
        + "</table>"
    )
    unjudged = rep["unjudged"]
    notes = (
        f"<p>{rep['games']} judged games in {rep['matches']} matches ({rep['topology']}); "
        f"{rep['judge_calls']} judged in this run, {rep['cached_verdicts']} from the verdict cache. "
        f"Mean position bias: {_f(rep['position_bias'], '+.3f')} points for the response shown first.</p>"
        + (
            f"<p class=bad>{len(unjudged)} games unjudged (judge errors; not scored): "
            + escape(
                "; ".join(f"{u['a']} v {u['b']} on {u['entry']}/{u['task_id']}: {u['error']}" for u in unjudged[:5])
            )
            + "</p>"
            if unjudged
            else ""
        )
        + (f"<p>Panel agreement: {escape(json_line(rep['panel_agreement']))}</p>" if rep.get("panel_agreement") else "")
    )
    body = (
        f"<p>suite <b>{escape(rep['suite'])}</b> v{escape(rep['suite_version'])}; judge "
        f"{escape(', '.join(sorted(set(rep['judges'].values()))))}; CIs: {rep['bootstrap_resamples']} bootstrap "
        f"resamples over tasks. Every match, with both trajectories and their per-step verdicts: "
        f"<code>rubricgym view OUT</code>.</p>{notes}"
        f"<h2>Ratings (Bradley-Terry, 95% CI)</h2>{_ratings_svg(agents)}{board}"
        f"<h2>Win rate</h2>{heat}<h2>Per-entry ratings</h2>{per}<h2>Example match</h2>"
        f"{_example_html(rep.get('example'))}"
    )
    return _page(f"rubricgym arena: {rep['suite']}", body)


def json_line(obj: Any) -> str:
    return ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in obj.items())
