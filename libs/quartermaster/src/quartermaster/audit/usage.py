"""Quota use per share over time, from the log alone (`qm usage`).

The series is a fold of the log: after every message, each share's units in use
and own limit (`replay.usage`); a point is kept only where they change. Times are
the events' own `at`, and a window bound given as a duration (`1h`) counts back
from the log's last event, never from the machine's clock, so the same log always
gives the same series. Preemption decisions are kept as markers on the victim's
share, with the rule that made them.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Iterator

import msgspec

from quartermaster import events as ev
from quartermaster.audit.envelope import Envelope, admit
from quartermaster.audit.errors import AuditError
from quartermaster.audit.instants import epoch_of
from quartermaster.audit.replay import usage
from quartermaster.core import State, fold
from quartermaster.core.replay import replaying

ShareUnit = tuple[str, str, str]  # (queue, share, unit)

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_SHARE_EVENTS = (ev.QuotaShareCreated, ev.QuotaShareUpdated, ev.QuotaShareDeleted)


class Bound(msgspec.Struct, frozen=True):
    """One end of the window: an instant (epoch seconds), or seconds before the log's end."""

    at: float | None = None
    before_end: float | None = None

    def resolve(self, end: float) -> float:
        return self.at if self.at is not None else end - (self.before_end or 0.0)


def parse_bound(text: str, flag: str = "--since") -> Bound:
    """`90s`, `30m`, `1h30m`, `2d` (before the log's end); `@EPOCH`; or ISO 8601 (UTC if naive)."""
    words = text.strip()
    if words and _DURATION.sub("", words) == "":
        total = sum(float(n) * _SECONDS[u] for n, u in _DURATION.findall(words))
        return Bound(before_end=total)
    at = epoch_of(words)
    if at is not None:
        return Bound(at=at)
    raise AuditError(f"{flag}: a duration (1h, 30m, 90s), @EPOCH or an ISO 8601 time, got {text!r}")


class UsagePoint(msgspec.Struct, frozen=True):
    """A share's hold on one unit from `at` until its next point."""

    at: float
    seq: int
    queue: str
    share: str
    unit: str
    in_use: int
    limit: int

    @property
    def borrowed(self) -> int:
        """Units above the share's own limit (spec section 3)."""
        return max(0, self.in_use - self.limit)


class PreemptionMark(msgspec.Struct, frozen=True):
    """A preemption decision, on the share whose job was asked to stop."""

    at: float
    seq: int
    queue: str
    share: str
    unit: str
    job_id: str
    job_name: str
    rule: str  # RECLAIM, IN_SHARE, LIMIT_LOWERED ("" if the record names none)
    for_job: str
    lender_share: str


class UsageSeries(msgspec.Struct, frozen=True):
    """Every share's step series over [start, end], and the preemptions in it."""

    start: float
    end: float
    points: list[UsagePoint]
    preemptions: list[PreemptionMark]

    def share_units(self) -> list[ShareUnit]:
        return sorted({(p.queue, p.share, p.unit) for p in self.points})

    def of(self, key: ShareUnit) -> list[UsagePoint]:
        return [p for p in self.points if (p.queue, p.share, p.unit) == key]

    def peak_borrowed(self, key: ShareUnit) -> int:
        return max((p.borrowed for p in self.of(key)), default=0)


def _holds(state: State) -> dict[ShareUnit, tuple[int, int]]:
    return {(u.queue, u.share, u.unit): (u.in_use, u.limit) for u in usage(state)}


def _marks(state: State, seq: int, events: Iterable[ev.AnyEvent]) -> Iterator[PreemptionMark]:
    """Preemptions among `events`, named by the victim's share (looked up before the fold)."""
    for event in events:
        if isinstance(event, ev.JobPreemptionRequested) and event.job_id in state.jobs:
            job = state.jobs[event.job_id]
            yield PreemptionMark(
                event.at,
                seq,
                job.queue,
                job.share,
                job.unit,
                job.job_id,
                job.job_name,
                event.rule.value if event.rule is not None else "",
                event.for_job,
                event.lender_share or "",
            )


def usage_series(
    envelopes: Iterable[Envelope],
    since: Bound | None = None,
    until: Bound | None = None,
    queue: str | None = None,
) -> UsageSeries:
    """The series of the whole log, cut to [since, until]; at `since`, the state then."""
    state = State()
    held: dict[ShareUnit, tuple[int, int]] = {}
    points: list[UsagePoint] = []
    marks: list[PreemptionMark] = []
    first: float | None = None
    last = 0.0
    use_before: dict[ShareUnit, int] = {}
    with replaying(state):
        for envelope in envelopes:
            events, _ = admit(envelope)
            if not events:
                continue
            marks.extend(_marks(state, envelope.seq, events))
            for event in events:
                fold(state, event)
            at = max(e.at for e in events)
            first = at if first is None else first
            last = max(last, at)
            # Most messages (heartbeats, reports, ticks) change no share's use or limit:
            # only a changed use (a plain dict compare) or a share's event asks for the rows.
            if state.use == use_before and not any(isinstance(e, _SHARE_EVENTS) for e in events):
                continue
            use_before = dict(state.use)
            now = _holds(state)
            for key in sorted(now.keys() | held.keys()):
                value = now[key] if key in now else (0, held[key][1])
                if held.get(key) != value:
                    points.append(UsagePoint(at, envelope.seq, *key, *value))
            held = now
    if first is None:
        raise AuditError("the log holds no events")
    start = since.resolve(last) if since is not None else first
    end = until.resolve(last) if until is not None else last
    if end < start:
        raise AuditError("--until is before --since")
    return UsageSeries(
        start,
        end,
        _clip(points, start, end, queue),
        [m for m in marks if start <= m.at <= end and queue in (None, m.queue)],
    )


def _clip(
    points: list[UsagePoint], start: float, end: float, queue: str | None
) -> list[UsagePoint]:
    """Points inside the window; each share's last point before it is moved to `start`."""
    before: dict[ShareUnit, UsagePoint] = {}
    inside: list[UsagePoint] = []
    for p in points:
        if queue is not None and p.queue != queue:
            continue
        if p.at < start:
            before[(p.queue, p.share, p.unit)] = p
        elif p.at <= end:
            inside.append(p)
    opening = [msgspec.structs.replace(p, at=start) for _, p in sorted(before.items())]
    return opening + inside


CSV_HEADER = "time,epoch,seq,queue,share,unit,in_use,limit,borrowed"


def to_csv(series: UsageSeries) -> Iterator[str]:
    """One line per point, in time order, UTC ISO times first (for spreadsheets)."""
    yield CSV_HEADER
    for p in sorted(series.points, key=lambda p: (p.at, p.seq, p.queue, p.share, p.unit)):
        when = dt.datetime.fromtimestamp(p.at, dt.UTC).isoformat(timespec="milliseconds")
        yield (
            f"{when},{p.at:.3f},{p.seq},{p.queue},{p.share},{p.unit},"
            f"{p.in_use},{p.limit},{p.borrowed}"
        )
