"""The picture of a usage series: one panel per share and unit, use against the own limit.

Drawn with matplotlib's Agg backend (no display needed; the `plot` extra). Use is
a step line, the own limit a dashed one; units held above the limit (borrowed)
are shaded, and every preemption of one of the share's jobs is a red mark with
its rule. The x axis counts from the window's start, named in UTC in the title.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from quartermaster.audit.usage import PreemptionMark, UsagePoint, UsageSeries

PLOT_EXTRA = "drawing needs the plot extra: pip install 'quartermaster[plot]' (or use --format csv)"
_RULE_LABEL = {"RECLAIM": "reclaim", "IN_SHARE": "in-share", "LIMIT_LOWERED": "limit lowered"}
_RULE_STYLE = {  # colour and marker per preemption rule
    "RECLAIM": ("tab:red", "v"),
    "IN_SHARE": ("tab:purple", "D"),
    "LIMIT_LOWERED": ("tab:brown", "s"),
    "": ("tab:gray", "x"),
}
_LABELLED_MARKS = 4  # a panel with more preemptions shows markers only (labels would overlap)


def _time_scale(span: float) -> tuple[float, str]:
    """Seconds per tick unit and its name, so a short log and a long one both read well."""
    if span <= 300:
        return 1.0, "s"
    if span <= 3 * 3600:
        return 60.0, "min"
    return 3600.0, "h"


def _steps(points: list[UsagePoint], end: float) -> tuple[list[float], list[int], list[int]]:
    """x, use and limit of a step series held until `end` (several points at one time: the last)."""
    xs: list[float] = []
    use: list[int] = []
    limit: list[int] = []
    for p in points:
        if xs and xs[-1] == p.at:
            use[-1], limit[-1] = p.in_use, p.limit
            continue
        xs.append(p.at)
        use.append(p.in_use)
        limit.append(p.limit)
    if xs and xs[-1] < end:
        xs.append(end)
        use.append(use[-1])
        limit.append(limit[-1])
    return xs, use, limit


def _corners(
    xs: list[float], use: list[int], limit: list[int]
) -> tuple[list[float], list[int], list[int]]:
    """A step series as explicit corners: each segment's two ends carry its values.

    `fill_between(step=...)` shades only between two True points, so a segment
    borrowed on its own would not show; with both ends given, each does.
    """
    cx: list[float] = []
    cu: list[int] = []
    cl: list[int] = []
    for i in range(len(xs) - 1):
        cx += [xs[i], xs[i + 1]]
        cu += [use[i], use[i]]
        cl += [limit[i], limit[i]]
    return cx, cu, cl


def _rule_name(rule: str) -> str:
    return _RULE_LABEL.get(rule, rule.lower() or "rule not recorded")


def _label(mark: PreemptionMark) -> str:
    by = f" by {mark.lender_share}" if mark.lender_share else ""
    return f"{_rule_name(mark.rule)}{by}: {mark.job_name}"


def render_png(series: UsageSeries, out: Path, title: str = "Quota use per share") -> None:
    """Write the picture to `out` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.ticker import MaxNLocator

    keys = series.share_units()
    span = max(series.end - series.start, 1e-9)
    scale, unit_name = _time_scale(span)
    fig, axes = plt.subplots(
        max(1, len(keys)), 1, sharex=True, figsize=(9, 1.2 + 1.7 * max(1, len(keys))), squeeze=False
    )
    handles: dict[str, Any] = {}  # legend entries, in order of first appearance
    for ax, key in zip(axes[:, 0], keys, strict=False):
        queue, share, unit = key
        xs, use, limit = _steps(series.of(key), series.end)
        rel = [(x - series.start) / scale for x in xs]
        handles["in use"] = ax.step(rel, use, where="post", color="tab:blue", lw=2)[0]
        handles["own limit"] = ax.step(rel, limit, where="post", color="black", ls="--", lw=1.2)[0]
        corners_x, corners_use, corners_limit = _corners(rel, use, limit)
        above = [u > lim for u, lim in zip(corners_use, corners_limit, strict=True)]
        if any(above):
            handles["borrowed"] = ax.fill_between(
                corners_x,
                corners_limit,
                corners_use,
                where=above,
                color="tab:orange",
                alpha=0.45,
                hatch="//",
                lw=0,
            )
        top = max([*use, *limit, 1]) + 1
        marks = [m for m in series.preemptions if (m.queue, m.share, m.unit) == key]
        for rule in sorted({m.rule for m in marks}):
            # One artist per rule and panel, however many preemptions: a busy log draws fast.
            xs_rule = [(m.at - series.start) / scale for m in marks if m.rule == rule]
            color, symbol = _RULE_STYLE.get(rule, _RULE_STYLE[""])
            ax.vlines(xs_rule, 0, top, color=color, lw=1.1, alpha=0.8)
            handles[f"preempted: {_rule_name(rule)}"] = ax.plot(
                xs_rule, [top - 0.3] * len(xs_rule), marker=symbol, color=color, ms=7, ls=""
            )[0]
        for mark in marks if len(marks) <= _LABELLED_MARKS else ():
            color, _ = _RULE_STYLE.get(mark.rule, _RULE_STYLE[""])
            ax.annotate(
                _label(mark),
                ((mark.at - series.start) / scale, top - 0.3),
                xytext=(5, -3),
                textcoords="offset points",
                fontsize=7,
                color=color,
                va="top",
            )
        ax.set_ylim(0, top)
        ax.set_xlim(0, span / scale)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(f"{share}\n{unit}" if len({k[1] for k in keys}) == len(keys) else share)
        ax.grid(axis="y", alpha=0.3)
        if len({k[0] for k in keys}) > 1:
            ax.set_title(queue, fontsize=8, loc="right")
    if not keys:
        axes[0, 0].text(0.5, 0.5, "no quota shares in this window", ha="center", va="center")
    started = dt.datetime.fromtimestamp(series.start, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    axes[-1, 0].set_xlabel(f"{unit_name} since {started}")
    fig.suptitle(title)
    if handles:
        fig.legend(
            list(handles.values()),
            list(handles),
            loc="upper center",
            bbox_to_anchor=(0.5, 0.955),
            ncol=len(handles),
            fontsize=8,
            frameon=False,
        )
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(out, format="png", dpi=110)
    plt.close(fig)
