"""The utilization timeline of a simulation as an SVG picture, written by hand (no dependency).

Units held per quota share over time, stacked, averaged over equal time buckets
(time-weighted, so a short burst counts for its length only), with the
capacity as a dashed line and each share's own limit listed in the legend.
"""

from __future__ import annotations

import math
from html import escape

from quartermaster.audit.simulate import Outcome

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1")
WIDTH, HEIGHT = 960, 360
LEFT, RIGHT, TOP, BOTTOM = 56, 180, 36, 40
BUCKETS = 480


def bucket_means(
    times: list[float], values: list[int], start: float, end: float, n: int
) -> list[float]:
    """Time-weighted mean of the step function (value[i] from times[i] on) per bucket."""
    width = (end - start) / n if end > start else 1.0
    sums = [0.0] * n
    for i, t in enumerate(times):
        t_next = times[i + 1] if i + 1 < len(times) else end
        value = values[i]
        if value == 0 or t_next <= t:
            continue
        first = max(0, int((t - start) / width))
        last = min(n - 1, int((t_next - start) / width))
        for b in range(first, last + 1):
            lo = max(t, start + b * width)
            hi = min(t_next, start + (b + 1) * width)
            if hi > lo:
                sums[b] += value * (hi - lo)
    return [total / width for total in sums]


def _ticks(span: float) -> tuple[float, str]:
    """A tick step and unit for an x axis `span` seconds long."""
    for step, unit in ((60, "min"), (3600, "h"), (86400, "d")):
        if span / step <= 40:
            scale = max(1, round(span / step / 8))
            return step * scale, unit
    return 86400 * max(1, round(span / 86400 / 8)), "d"


def render(outcome: Outcome, limits: dict[str, int], title: str = "") -> str:
    timeline = outcome.timeline
    start = timeline.times[0] if timeline.times else 0.0
    end = start + max(outcome.horizon, 1e-9)
    shares = list(timeline.held)
    means = {s: bucket_means(timeline.times, timeline.held[s], start, end, BUCKETS) for s in shares}
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    stacked = [sum(column) for column in zip(*means.values(), strict=True)]
    top_value: int = max(1, outcome.capacity, math.ceil(max(stacked, default=0.0) - 1e-6))

    def x(b: float) -> float:
        return LEFT + plot_w * b / BUCKETS

    def y(v: float) -> float:
        return TOP + plot_h * (1 - v / top_value)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT}" y="20" font-size="14">{escape(title or outcome.scenario)}: '
        f"units held per quota share (utilization {outcome.utilization:.1%})</text>",
    ]
    base = [0.0] * BUCKETS
    for i, share in enumerate(shares):
        upper = [b + m for b, m in zip(base, means[share], strict=True)]
        points = [(x(b), y(upper[b])) for b in range(BUCKETS)] + [(x(BUCKETS), y(upper[-1]))]
        points += [(x(BUCKETS), y(base[-1]))] + [
            (x(b), y(base[b])) for b in reversed(range(BUCKETS))
        ]
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
        color = PALETTE[i % len(PALETTE)]
        out.append(f'<polygon points="{path}" fill="{color}" fill-opacity="0.85" stroke="none"/>')
        ly = TOP + 18 * i
        out.append(
            f'<rect x="{WIDTH - RIGHT + 16}" y="{ly}" width="12" height="12" fill="{color}"/>'
        )
        label = f"{share} (own {limits.get(share, 0)})"
        out.append(f'<text x="{WIDTH - RIGHT + 34}" y="{ly + 10}">{escape(label)}</text>')
        base = upper
    cap_y = y(outcome.capacity)
    out.append(
        f'<line x1="{LEFT}" y1="{cap_y:.1f}" x2="{LEFT + plot_w}" y2="{cap_y:.1f}" '
        'stroke="black" stroke-dasharray="6,4"/>'
    )
    out.append(
        f'<text x="{LEFT + plot_w - 90}" y="{cap_y - 4:.1f}">capacity {outcome.capacity}</text>'
    )
    bottom = TOP + plot_h
    out.append(
        f'<line x1="{LEFT}" y1="{bottom}" x2="{LEFT + plot_w}" y2="{bottom}" stroke="black"/>'
    )
    out.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="black"/>')
    for v in sorted({0, top_value // 2, top_value}):
        out.append(f'<text x="{LEFT - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v}</text>')
    step, unit = _ticks(end - start)
    scale = {"min": 60, "h": 3600, "d": 86400}[unit]
    tick = 0.0
    while tick <= end - start:
        tx = LEFT + plot_w * tick / (end - start)
        out.append(
            f'<line x1="{tx:.1f}" y1="{bottom}" x2="{tx:.1f}" y2="{bottom + 4}" stroke="black"/>'
        )
        out.append(
            f'<text x="{tx:.1f}" y="{bottom + 18}" text-anchor="middle">'
            f"{tick / scale:g}{unit}</text>"
        )
        tick += step
    out.append(f'<text x="{LEFT - 40}" y="{TOP - 8}">units</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
