"""Readable text of the audit results for the terminal: reports, instants, explanations."""

from __future__ import annotations

import datetime as dt

from quartermaster import events as ev
from quartermaster.audit.explain import Explanation, Transition
from quartermaster.audit.replay import Instant, ShareUsage
from quartermaster.audit.simulate import Comparison, lost_unit_hours
from quartermaster.audit.verify import Report
from quartermaster.cli.tables import render


def iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).isoformat(timespec="milliseconds")


def clock(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).strftime("%H:%M:%S.%f")[:-3]


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


# ---- verify -------------------------------------------------------------------------


def render_report(report: Report, seconds: float, max_differences: int) -> str:
    rate = report.events / seconds if seconds > 0 else 0.0
    lines = [
        f"verified {report.messages} messages ({report.events} events) in {seconds:.2f} s "
        f"({rate:,.0f} events/s): {report.decision_messages} decision messages, "
        f"{report.decisions} decisions, {report.passes} passes re-run",
    ]
    if report.raced:
        lines.append(
            f"{report.raced} decision messages were decided before the message preceding "
            "them (other writers appended between the pass and its append)"
        )
    if report.unchecked:
        lines.append(
            f"WARNING: {report.unchecked} host-loss messages not checked: no heartbeat timeout "
            "given (--heartbeat-timeout) or recorded"
        )
    if report.ignored:
        lines.append(
            f"WARNING: {len(report.ignored)} events ignored as the services ignore them, "
            f"e.g. seq {report.ignored[0].seq} {report.ignored[0].kind}: {report.ignored[0].why}"
        )
    timeout = report.heartbeat_timeout_seconds
    lines.append(
        f"host liveness judged with a {timeout:g} s heartbeat timeout"
        if timeout is not None
        else "host liveness: no heartbeat timeout given or recorded (host losses re-run with none)"
    )
    if report.ok:
        lines.append("OK: every recorded decision is what the pass gives at its point of the log")
        return "\n".join(lines)
    diffs = report.differences
    messages = len({d.seq for d in diffs})
    lines.append(
        f"DIFFERS: {len(diffs)} decisions in {messages} messages; the first at seq "
        f"{diffs[0].seq} (differences after it may follow from it)"
    )
    for d in diffs[:max_differences]:
        where = f"decision #{d.index}" if d.index is not None else "not recorded"
        note = f"; {d.note}" if d.note else ""
        lines.append(f"seq {d.seq}  {d.subject}  {where}  (pass re-run at seq {d.base}{note})")
        lines.append(f"  recorded:   {_json(d.recorded)}")
        lines.append(f"  re-derived: {_json(d.rederived)}")
    if len(diffs) > max_differences:
        lines.append(f"... and {len(diffs) - max_differences} more")
    return "\n".join(lines)


def _json(event: ev.Event | None) -> str:
    return "-" if event is None else ev.to_json(event).decode()


# ---- audit state --------------------------------------------------------------------------


def render_instant(x: Instant) -> str:
    usage = render(
        ("QUEUE", "SHARE", "UNIT", "STRATEGY", "IN USE", "LIMIT", "BORROWED", "STOPPING"),
        [
            (u.queue, u.share, u.unit, u.strategy, u.in_use, u.limit, u.borrowed, u.stopping)
            for u in x.usage
        ],
    )
    heads = render(
        ("QUEUE", "SHARE", "UNIT", "#", "JOB", "ID", "PRIO", "CREATED", "REASON"),
        [
            (
                h.queue,
                h.share,
                h.unit,
                h.position,
                h.job_name,
                h.job_id,
                h.priority,
                iso(h.created_at),
                h.reason,
            )
            for h in x.heads
        ],
    )
    pools = render(
        ("POOL (JOB)", "QUEUE", "SHARE", "UNIT", "N", "HOSTS", "AVAILABLE SINCE", "EXPIRES"),
        [
            (
                p.job_id,
                p.queue,
                p.share,
                p.unit,
                p.count,
                ",".join(p.hosts),
                iso(p.available_since),
                iso(p.expires_at),
            )
            for p in x.pools
        ],
    )
    return "\n".join(
        [
            f"state after seq {x.seq} (log time {iso(x.at)})",
            "",
            "usage per share and unit",
            usage,
            "",
            "queue heads",
            heads if x.heads else "(no RUNNABLE job)",
            "",
            "warm pools (Available)",
            pools if x.pools else "(none)",
        ]
    )


# ---- explain ---------------------------------------------------------------------------------


def _usage_line(rows: list[ShareUsage]) -> str:
    parts = []
    for u in rows:
        extra = f" (+{u.borrowed} borrowed)" if u.borrowed else ""
        extra += f" ({u.stopping} stopping)" if u.stopping else ""
        parts.append(f"{u.share} {u.in_use}/{u.limit}{extra}")
    unit = f" [{rows[0].unit}]" if rows else ""
    return ", ".join(parts) + unit


def render_explanation(x: Explanation) -> str:
    reason = f" ({x.status_reason})" if x.status_reason else ""
    lines = [
        f"job {x.job_name} ({x.job_id}) in {x.queue}/{x.share}: {x.status}{reason}; "
        f"the log up to seq {x.seq}",
    ]
    if x.waiting:
        lines.append(f"waits: {x.waiting}")
    for t in x.transitions:
        lines.append("")
        lines.extend(_transition(t))
    return "\n".join(lines)


def _transition(t: Transition) -> list[str]:
    moved = f"{t.status_from} -> {t.status_to}" if t.status_from != t.status_to else t.status_to
    out = [f"seq {t.seq:<6} {clock(t.at)}  {t.source:<8}  {t.event:<26} {moved.strip()}"]
    pad = " " * 11
    out.append(f"{pad}{t.summary}")
    d = t.decision
    if d is not None and t.decision_seq:
        out.append(f"{pad}completes the decision at seq {t.decision_seq}: rule {d.rule}")
    elif d is not None:
        out.append(f"{pad}rule {d.rule}: {d.reason}")
        if d.inputs:
            out.append(f"{pad}  inputs: " + " ".join(f"{k}={v}" for k, v in d.inputs.items()))
        if d.candidates:
            out.append(f"{pad}  candidates, in the rule's order:")
            for c in d.candidates:
                mark = "*" if c.chosen else " "
                name = c.job_name or "?"
                risk = duration(c.seconds_at_risk)  # "-": a candidate sent without it
                out.append(
                    f"{pad}  {mark} {name:<16} {c.share:<12} prio {c.priority:<4} "
                    f"at risk {risk:<9} {c.why}"
                )
    if t.usage:
        out.append(f"{pad}usage before: {_usage_line(t.usage)}")
    return out


# ---- simulate ------------------------------------------------------------------------------------


def render_comparison(c: Comparison, seconds: float) -> str:
    outcomes = c.outcomes()
    head = render(
        ("SCENARIO", "HORIZON", "UTILIZATION", "PASSES"),
        [(o.scenario, duration(o.horizon), f"{o.utilization:.1%}", o.passes) for o in outcomes],
    )
    rows = []
    for i, share in enumerate(c.candidate.shares):
        for o in outcomes:
            f = o.shares[i]
            rows.append(
                (
                    share.share if o is c.candidate else "",
                    o.scenario,
                    f.jobs,
                    f.finished,
                    "-" if f.utilization is None else f"{f.utilization:.1%}",
                    duration(f.wait_p50),
                    duration(f.wait_p90),
                    f.preemptions,
                    f"{f.borrowed_unit_hours:.2f}",
                    f"{f.lost_unit_hours:.2f}",
                )
            )
    table = render(
        (
            "SHARE",
            "SCENARIO",
            "JOBS",
            "DONE",
            "UTIL",
            "WAIT P50",
            "WAIT P90",
            "PREEMPT",
            "BORROWED U-H",
            "LOST U-H",
        ),
        rows,
    )
    lines = [
        f"simulated {len(outcomes)} scenarios in {seconds:.1f} s "
        f"({c.candidate.capacity} units of capacity)",
        head,
        "",
        table,
    ]
    if c.no_checkpoints is not None:
        intervals = ", ".join(
            f"{share} every {duration(seconds)}"
            for share, seconds in c.checkpoint_intervals.items()
        )
        lines += [
            "",
            f"lost to preemption: {lost_unit_hours(c.candidate):.2f} unit-hours with "
            f"checkpoints ({intervals}), {lost_unit_hours(c.no_checkpoints):.2f} without",
        ]
    return "\n".join(lines)
