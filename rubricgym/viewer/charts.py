"""Inline SVG line charts for the dashboard: integer step axes, confidence bands, alarm markers. No script, no
network: the same markup works served and exported."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

COLOURS = ("#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2", "#4b5563", "#be185d")


@dataclass
class Series:
    label: str
    points: list[tuple[int, float]]
    band: list[tuple[int, float, float]] = field(default_factory=list)
    """``(step, low, high)``: drawn as a shaded band behind the line (a CI or ±1 std)."""
    dashed: bool = False


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + k * step for k in range(int((hi - first) / step + 1e-9) + 1)]


def _int_ticks(lo: int, hi: int, n: int = 8) -> list[int]:
    step = max(1, math.ceil((hi - lo) / n))
    return list(range(lo, hi + 1, step))


def line_chart(title: str, series: list[Series], alarms: list[tuple[int, str]], cid: str) -> str:
    """One panel: lines (with bands) over integer steps, red markers at steps with a monitor alarm."""
    w, h, left, right, top, bottom = 460, 220, 48, 12, 26, 34
    xs = [x for s in series for x, _ in s.points] + [x for s in series for x, _, _ in s.band]
    ys = [y for s in series for _, y in s.points] + [v for s in series for _, a, b in s.band for v in (a, b)]
    if not xs:
        return ""
    x0, x1 = min(xs), max(xs)
    if x0 == x1:
        x0, x1 = x0 - 1, x1 + 1
    y0, y1 = min(ys), max(ys)
    if y1 - y0 < 1e-12:
        y0, y1 = y0 - 0.5, y1 + 0.5
    pad = (y1 - y0) * 0.05
    y0, y1 = y0 - pad, y1 + pad

    def px(x: float) -> float:
        return left + (w - left - right) * (x - x0) / (x1 - x0)

    def py(y: float) -> float:
        return top + (h - top - bottom) * (1 - (y - y0) / (y1 - y0))

    out = [
        f"<svg class='chart' id='{escape(cid)}' xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {w} {h}' "
        f"width='{w}' height='{h}' role='img' aria-label='{escape(title)}'>",
        f"<text x='{left}' y='16' font-size='13' font-weight='600'>{escape(title)}</text>",
    ]
    for t in _ticks(y0, y1):
        out.append(
            f"<line x1='{left}' x2='{w - right}' y1='{py(t):.1f}' y2='{py(t):.1f}' stroke='#e5e7eb'/>"
            f"<text x='{left - 4}' y='{py(t) + 3:.1f}' font-size='10' text-anchor='end'>{t:.4g}</text>"
        )
    for t in _int_ticks(math.ceil(x0), math.floor(x1)):
        out.append(
            f"<text class='xtick' x='{px(t):.1f}' y='{h - bottom + 14}' font-size='10' text-anchor='middle'>{t}</text>"
        )
    out.append(f"<text x='{(w + left) / 2:.0f}' y='{h - 4}' font-size='10' text-anchor='middle'>step</text>")
    for step, why in alarms:
        if x0 <= step <= x1:
            out.append(
                f"<line class='alarm' x1='{px(step):.1f}' x2='{px(step):.1f}' y1='{top}' y2='{h - bottom}' "
                f"stroke='#dc2626' stroke-dasharray='3 2'><title>alarm at step {step}: {escape(why)}</title></line>"
            )
    for k, s in enumerate(series):
        colour = COLOURS[k % len(COLOURS)]
        if len(s.band) >= 2:
            upper = " ".join(f"{px(x):.1f},{py(b):.1f}" for x, _, b in s.band)
            lower = " ".join(f"{px(x):.1f},{py(a):.1f}" for x, a, _ in reversed(s.band))
            out.append(f"<polygon class='band' points='{upper} {lower}' fill='{colour}' fill-opacity='0.15'/>")
        elif len(s.band) == 1:
            x, a, b = s.band[0]
            out.append(
                f"<line class='band' x1='{px(x):.1f}' x2='{px(x):.1f}' y1='{py(a):.1f}' y2='{py(b):.1f}' "
                f"stroke='{colour}' stroke-opacity='0.4' stroke-width='6'/>"
            )
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s.points)
        dash = " stroke-dasharray='5 3'" if s.dashed else ""
        if len(s.points) > 1:
            out.append(f"<polyline points='{pts}' fill='none' stroke='{colour}' stroke-width='1.8'{dash}/>")
        for x, y in s.points:
            out.append(
                f"<circle cx='{px(x):.1f}' cy='{py(y):.1f}' r='2.5' fill='{colour}'>"
                f"<title>step {x}: {y:.4g}</title></circle>"
            )
        out.append(
            f"<text x='{w - right - 4}' y='{top + 12 + 12 * k}' font-size='10' text-anchor='end' fill='{colour}'>"
            f"{escape(s.label)}</text>"
        )
    out.append("</svg>")
    return "".join(out)
