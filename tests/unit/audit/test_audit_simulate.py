"""Simulate: a small trace gives the figures worked out by hand, and bad input names its field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from logs import seed_log

from quartermaster.audit.errors import ConfigError
from quartermaster.audit.recorded import recorded_jobs
from quartermaster.audit.simconfig import ShareConfig, SimConfig, TraceJob, load_config, read_trace
from quartermaster.audit.simulate import compare, nearest_rank, simulate, trace_jobs
from quartermaster.audit.timeline_svg import bucket_means, render
from quartermaster.events import SharingStrategy
from quartermaster.events import State as Toggle

H = 3600.0
UNIT = "ml.g5.xlarge"


def two_shares() -> SimConfig:
    """2 hosts; QS1 (own 1) lends and borrows, QS2 (own 1) only lends."""
    return SimConfig(
        capacity={UNIT: 2},
        shares=[
            ShareConfig("QS1", {UNIT: 1}, SharingStrategy.LEND_AND_BORROW),
            ShareConfig("QS2", {UNIT: 1}, SharingStrategy.LEND),
        ],
    )


def abc() -> list[TraceJob]:
    """A and B (QS1) arrive at 0 for 10 h each; C (QS2) arrives at 5 h for 10 h."""
    return [
        TraceJob(0, 10 * H, "QS1", instance_type=UNIT, name="A"),
        TraceJob(0, 10 * H, "QS1", instance_type=UNIT, name="B"),
        TraceJob(5 * H, 10 * H, "QS2", instance_type=UNIT, name="C"),
    ]


def test_the_candidate_lends_then_reclaims() -> None:
    # 0 h: A on QS1's own unit, B borrows QS2's idle one. 5 h: C reclaims it, B is
    # preempted and starts over at 10 h when A ends; C ends at 15 h, B at 20 h.
    out = simulate(two_shares(), trace_jobs(abc()))
    assert out.horizon == 20 * H
    assert out.utilization == pytest.approx(35 / 40)  # A 10 + B 5 + B 10 + C 10 unit-h of 2 x 20
    qs1, qs2 = out.shares
    assert qs1.utilization == pytest.approx(25 / 20)  # above 100 %: it borrowed
    assert qs2.utilization == pytest.approx(10 / 20)
    assert qs1.borrowed_unit_hours == pytest.approx(5.0)  # B on QS2's unit from 0 to 5 h
    assert qs1.lost_unit_hours == pytest.approx(5.0)  # ... and those 5 h are done again
    assert (qs1.preemptions, qs2.preemptions) == (1, 0)
    assert (qs1.wait_p50, qs1.wait_p90) == (0.0, 5 * H)  # A 0; B waited 5 h after the reclaim
    assert (qs2.wait_p50, qs2.wait_p90) == (0.0, 0.0)


def test_the_references_static_split_and_pooled_bound() -> None:
    c = compare(two_shares(), trace_jobs(abc()))
    reserve, bound = c.reserve_only, c.pooled
    # Static split: B waits for A (10 h); C runs at once on QS2's own unit.
    assert reserve.utilization == pytest.approx(30 / 40)
    assert [s.wait_p90 for s in reserve.shares] == [10 * H, 0.0]
    assert [s.borrowed_unit_hours for s in reserve.shares] == [0.0, 0.0]
    assert sum(s.preemptions for s in reserve.shares) == 0
    # Pooled, no limits: A and B at once; C waits for A's host until 10 h.
    assert bound.utilization == pytest.approx(30 / 40)
    assert [s.wait_p90 for s in bound.shares] == [0.0, 5 * H]
    assert bound.shares[0].borrowed_unit_hours == pytest.approx(10.0)  # B beyond QS1's own 1
    assert [s.share for s in bound.shares] == ["QS1", "QS2"]  # figures per submitted share


def test_in_share_preemption_and_stop_time() -> None:
    config = SimConfig(
        capacity={UNIT: 1},
        shares=[ShareConfig("QS1", {UNIT: 1}, in_share_preemption=Toggle.ENABLED)],
        stop_seconds=60,
    )
    trace = [
        TraceJob(0, 2 * H, "QS1", priority=1, instance_type=UNIT, name="low"),
        TraceJob(H, H, "QS1", priority=5, instance_type=UNIT, name="high"),
    ]
    out = simulate(config, trace_jobs(trace))
    # high preempts low at 1 h and runs once low has stopped (60 s later) until 2 h + 60 s:
    # high waited 60 s. low is RUNNABLE again from its stop until then (1 h), starts over
    # and ends 2 h later.
    (share,) = out.shares
    assert share.preemptions == 1
    assert share.lost_unit_hours == pytest.approx((H + 60) / H)  # low's first hour and its stop
    assert out.horizon == 4 * H + 60
    assert sorted([share.wait_p50, share.wait_p90]) == [60.0, H]


def test_nearest_rank() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    assert (nearest_rank(values, 50), nearest_rank(values, 90)) == (5.0, 9.0)
    assert nearest_rank([], 50) is None


def test_the_timeline_picture(tmp_path: Path) -> None:
    out = simulate(two_shares(), trace_jobs(abc()))
    svg = render(out, {"QS1": 1, "QS2": 1})
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert svg.count("<polygon") == 2 and "capacity 2" in svg and "QS1 (own 1)" in svg
    # QS1 holds 2 units for the first quarter, 1 for the rest: the mean over the first half is 1.5.
    held = out.timeline.held["QS1"]
    assert bucket_means(out.timeline.times, held, 0, 20 * H, 2) == [1.5, 1.0]


def test_bad_configuration_fields_are_named(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(
        json.dumps({"capacity": {UNIT: 2}, "shares": [{"name": "A", "limits": {"x": 1}}]})
    )
    with pytest.raises(ConfigError, match=r"shares\[0\]\.limits\.x"):
        load_config(path)
    path.write_text(
        json.dumps(
            {"capacity": {UNIT: 2}, "shares": [{"name": "A", "limits": {}, "borrowLimit": "lots"}]}
        )
    )
    with pytest.raises(ConfigError, match="borrowLimit"):
        load_config(path)
    path.write_text(
        json.dumps(
            {"capacity": {UNIT: 2}, "shares": [{"name": "A", "limits": {}, "strategy": "SHARE"}]}
        )
    )
    with pytest.raises(ConfigError, match="strategy"):
        load_config(path)


def test_a_trace_naming_an_unknown_share_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = [
        {"arrival": 0, "duration": 5, "share": "QS1"},
        {"arrival": 1, "duration": 5, "share": "ZZ"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(ConfigError, match=r"t\.jsonl:2: share"):
        list(read_trace(path, two_shares()))


def test_a_recorded_log_gives_its_jobs_and_its_configuration() -> None:
    recorded = recorded_jobs(seed_log())
    assert recorded.config.capacity == {UNIT: 3}
    assert [s.name for s in recorded.config.shares] == ["QS1", "QS2", "QS3"]
    assert {j.job_id for j in recorded.jobs} == {"high", "med", "low", "qs2_job_1"}
    assert recorded.never_ran == 0
    low = next(j for j in recorded.jobs if j.job_id == "low")
    assert low.priority == 1  # as submitted (it was raised to 4 later)
    out = simulate(recorded.config, recorded.jobs_for(recorded.config))
    assert sum(s.jobs for s in out.shares) == 4
