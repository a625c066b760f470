"""The usage series of `qm usage` on hand-built logs: borrowing, reclaim, windows, CSV."""

from __future__ import annotations

import datetime as dt

import pytest

from quartermaster.audit.envelope import Envelope
from quartermaster.audit.errors import AuditError
from quartermaster.audit.logfile import from_batches
from quartermaster.audit.usage import Bound, parse_bound, to_csv, usage_series
from quartermaster.cli.top import lent_units, top_reason
from quartermaster.testing.builders import World, a_job

UNIT = "ml.g5.xlarge"
QS1, QS2 = ("q", "QS1", UNIT), ("q", "QS2", UNIT)


def logged(world: World) -> list[Envelope]:
    """The world's events as the services store them (one message per event)."""
    return list(from_batches([e] for e in world.log))


def borrow_then_reclaim() -> World:
    """QS1 borrows QS2's idle unit at 1010; QS2's job reclaims it at 1030."""
    w = World().environment(ml_g5_xlarge=2).queue().hosts(2)
    w.share("QS1", 1, "LEND_AND_BORROW").share("QS2", 1, "LEND")
    w.clock = 1010.0
    first = w.submit(a_job(name="a", priority=2))
    second = w.submit(a_job(name="b", priority=1))  # the lower: the reclaim's victim
    w.pass_()
    w.start(first).start(second)
    w.clock = 1030.0
    w.submit(a_job(name="c").in_share("QS2"))
    w.pass_()
    w.clock = 1032.0
    w.confirm_all_stops()
    w.pass_()
    w.clock = 1040.0
    w.tick(0)
    return w


def test_borrowing_shows_as_use_above_the_own_limit_until_reclaimed() -> None:
    series = usage_series(logged(borrow_then_reclaim()))
    qs1 = [(round(p.at), p.in_use, p.limit, p.borrowed) for p in series.of(QS1)]
    assert qs1 == [(1000, 0, 1, 0), (1010, 1, 1, 0), (1010, 2, 1, 1), (1032, 1, 1, 0)]
    assert [(round(p.at), p.in_use) for p in series.of(QS2)] == [(1000, 0), (1032, 1)]
    assert series.peak_borrowed(QS1) == 1 and series.peak_borrowed(QS2) == 0
    assert series.start == 1000.0 and series.end == 1040.0


def test_a_reclaim_is_marked_on_the_victims_share_with_its_rule_and_lender() -> None:
    (mark,) = usage_series(logged(borrow_then_reclaim())).preemptions
    assert (mark.share, mark.rule, mark.lender_share, mark.for_job) == (
        "QS1",
        "RECLAIM",
        "QS2",
        "c",
    )
    assert mark.job_name == "b" and mark.at == pytest.approx(1030.001)


def test_in_share_preemption_is_marked_too() -> None:
    w = World().environment(ml_g5_xlarge=1).queue().hosts(1)
    w.share("QS1", 1, "LEND_AND_BORROW", preemption=True)
    low = w.submit(a_job(name="low", priority=1))
    w.pass_()
    w.start(low)
    w.submit(a_job(name="high", priority=5))
    w.pass_()
    (mark,) = usage_series(logged(w)).preemptions
    assert (mark.job_name, mark.rule, mark.for_job) == ("low", "IN_SHARE", "high")


def test_a_window_starts_with_the_state_then_and_drops_what_is_outside() -> None:
    log = logged(borrow_then_reclaim())
    series = usage_series(log, since=parse_bound("15s"), until=Bound(at=1035.0))
    assert (series.start, series.end) == (1025.0, 1035.0)
    assert [(p.at, p.in_use) for p in series.of(QS1)] == [(1025.0, 2), (1032.0, 1)]
    assert len(series.preemptions) == 1
    before = usage_series(log, until=parse_bound("20s"))
    assert before.end == 1020.0 and before.preemptions == []
    assert all(p.at <= 1020.0 for p in before.points)


def test_the_window_comes_from_the_logs_clock_not_the_machines() -> None:
    log = logged(borrow_then_reclaim())
    assert usage_series(log, since=parse_bound("1h")).start == 1040.0 - 3600
    assert usage_series(log).points == usage_series(log).points


def test_a_queue_filter_keeps_only_its_shares() -> None:
    w = borrow_then_reclaim()
    w.queue("other").share("X", 1, queue="other")
    log = logged(w)
    assert {k[0] for k in usage_series(log).share_units()} == {"q", "other"}
    assert {k[0] for k in usage_series(log, queue="other").share_units()} == {"other"}


@pytest.mark.parametrize(
    ("text", "bound"),
    [
        ("90s", Bound(before_end=90)),
        ("30m", Bound(before_end=1800)),
        ("1h30m", Bound(before_end=5400)),
        ("2d", Bound(before_end=172800)),
        ("@1700000000.5", Bound(at=1700000000.5)),
        (
            "2026-12-01T10:07:02",
            Bound(at=dt.datetime(2026, 12, 1, 10, 7, 2, tzinfo=dt.UTC).timestamp()),
        ),
        (
            "2026-12-01T11:07:02+01:00",
            Bound(at=dt.datetime(2026, 12, 1, 10, 7, 2, tzinfo=dt.UTC).timestamp()),
        ),
    ],
)
def test_bounds_parse(text: str, bound: Bound) -> None:
    assert parse_bound(text) == bound


@pytest.mark.parametrize("text", ["yesterday", "1x", "", "@soon", "h1"])
def test_a_bad_bound_names_the_flag(text: str) -> None:
    with pytest.raises(AuditError, match="--until"):
        parse_bound(text, "--until")


def test_until_before_since_is_refused() -> None:
    with pytest.raises(AuditError, match="before --since"):
        usage_series(logged(borrow_then_reclaim()), Bound(at=1030), Bound(at=1020))


def test_an_empty_log_is_refused() -> None:
    with pytest.raises(AuditError, match="no events"):
        usage_series([])


def test_csv_has_one_line_per_point_in_time_order() -> None:
    lines = list(to_csv(usage_series(logged(borrow_then_reclaim()))))
    assert lines[0] == "time,epoch,seq,queue,share,unit,in_use,limit,borrowed"
    borrowed = [line for line in lines[1:] if line.endswith(",2,1,1")]
    assert len(borrowed) == 1 and ",q,QS1,ml.g5.xlarge," in borrowed[0]
    assert borrowed[0].startswith("1970-01-01T00:16:50.00")
    times = [float(line.split(",")[1]) for line in lines[1:]]
    assert times == sorted(times) and len(lines) == 7


# ---- qm top's pure parts ------------------------------------------------------------


def test_lent_units_charges_borrowers_to_idle_lenders_never_to_reserve() -> None:
    seed = {"QS1": (2, 1), "QS2": (0, 1), "QS3": (0, 1)}
    strategies = {"QS1": "LEND_AND_BORROW", "QS2": "LEND", "QS3": "RESERVE"}
    assert lent_units(seed, strategies, capacity=3) == {"QS1": 0, "QS2": 1, "QS3": 0}
    # Capacity beyond every own limit is lent first: no share lends then.
    assert lent_units(seed, strategies, capacity=4) == {"QS1": 0, "QS2": 0, "QS3": 0}
    two_lenders = {"A": (3, 1), "B": (0, 1), "C": (0, 2)}
    lenders = {"A": "LEND_AND_BORROW", "B": "LEND", "C": "LEND_AND_BORROW"}
    assert lent_units(two_lenders, lenders, capacity=4) == {"A": 0, "B": 1, "C": 1}


def test_top_reason_counts_the_commonest() -> None:
    assert top_reason([]) == "-"
    assert top_reason(["RESERVE_HELD_BACK"]) == "RESERVE_HELD_BACK"
    assert (
        top_reason(["BEHIND_IN_SHARE", "SHARE_AT_LIMIT", "SHARE_AT_LIMIT"]) == "SHARE_AT_LIMIT x2"
    )
