"""Checkpoints (issue 28): the fold keeps each live attempt's newest checkpoint, the victim
order prefers the attempt that loses the least work, and the decision, `qm explain`, the
job's preemption summary and the scheduler's metrics say how much work was at risk.

Spec: semantics.md section 4, steps 4 and 5 (victim order).
"""

from __future__ import annotations

import itertools

import hypothesis.strategies as st
import pytest
from hypothesis import given
from prometheus_client import CollectorRegistry

from quartermaster import events as ev
from quartermaster.audit.envelope import Envelope
from quartermaster.audit.explain import explain
from quartermaster.audit.wire import from_proto, to_proto
from quartermaster.cli.audit_render import render_explanation
from quartermaster.core.model import Job
from quartermaster.core.preemption import seconds_at_risk, victim_order
from quartermaster.core.provenance import FAMILIES, Family
from quartermaster.core.snapshot import restore, take
from quartermaster.metrics import SchedulerMetrics
from quartermaster.store.documents import job_doc
from quartermaster.testing.builders import World, a_job

UNIT = "ml.g5.xlarge"


def about(seconds: float) -> object:
    """A figure up to the clock's own steps (a submission moves it by a millisecond)."""
    return pytest.approx(seconds, abs=0.01)


def checkpoint(w: World, job_id: str, attempt: int | None = None) -> World:
    job = w.job(job_id)
    return w.apply(
        ev.JobCheckpointed(
            at=w.clock,
            job_id=job_id,
            attempt=job.attempt_no if attempt is None else attempt,
            host=job.hosts[0],
            bytes=1 << 20,
            files=3,
        )
    )


def borrowers(*names: str) -> World:
    """QS1 (own 1, LEND_AND_BORROW) runs one job per name, 100 s apart, borrowing all but
    the first unit from QS2 (LEND, own len(names))."""
    n = len(names)
    w = World().environment(ml_g5_xlarge=n).queue().hosts(n)
    w.share("QS1", 1, "LEND_AND_BORROW")
    w.share("QS2", n - 1, "LEND")
    for name in names:
        w.submit(a_job(name=name).in_share("QS1"))
        w.pass_()
        w.start(name)
        w.tick(100)
    return w


def reclaim_one(w: World) -> ev.JobPreemptionRequested:
    w.submit(a_job(name="lender").in_share("QS2"))
    (preemption,) = (d for d in w.pass_() if isinstance(d, ev.JobPreemptionRequested))
    return preemption


# ---- the fold ---------------------------------------------------------------------


def test_a_report_for_the_live_attempt_is_its_last_checkpoint() -> None:
    w = borrowers("a")
    checkpoint(w, "a")
    assert w.job("a").last_checkpoint_at == w.clock
    w.tick(30)
    checkpoint(w, "a", attempt=w.job("a").attempt_no + 1)  # an attempt that does not exist
    checkpoint(w, "a", attempt=w.job("a").attempt_no - 1)  # an older one
    assert w.job("a").last_checkpoint_at == w.clock - 30


def test_a_new_dispatch_starts_without_a_checkpoint() -> None:
    w = borrowers("a", "b")
    checkpoint(w, "b")
    w.tick(10)
    reclaim_one(w)  # b checkpointed 10 s ago, a never: a has 210 s at risk and still goes
    assert w.preempted() == ["b"]
    old_attempt = w.job("b").attempt_no
    w.confirm_stop("b")
    w.pass_()
    w.succeed("lender")
    w.pass_()
    assert w.job("b").attempt_no == old_attempt + 1 and w.job("b").last_checkpoint_at is None
    w.apply(ev.JobCheckpointed(at=w.clock, job_id="b", attempt=old_attempt, host="h1"))
    assert w.job("b").last_checkpoint_at is None  # a late report of the preempted attempt


def test_a_checkpoint_older_than_the_dispatch_saves_nothing() -> None:
    w = borrowers("a")
    job = w.job("a")
    w.apply(ev.JobCheckpointed(at=job.dispatched_at - 5, job_id="a", attempt=1, host=job.hosts[0]))
    assert job.last_checkpoint_at is None


def test_a_snapshot_keeps_checkpoints_and_the_victim_order() -> None:
    w = borrowers("a", "b")
    checkpoint(w, "a")
    state, _ = restore(take(w.state, seq=1))
    assert state.jobs["a"].last_checkpoint_at == w.clock
    assert state.victims == w.state.victims


# ---- the victim order ---------------------------------------------------------------


def test_without_checkpoints_the_most_recently_started_goes() -> None:
    w = borrowers("a", "b", "c")
    preemption = reclaim_one(w)
    assert preemption.job_id == "c"
    assert preemption.seconds_at_risk == seconds_at_risk(w.job("c"), preemption.at) == about(100)


def test_the_attempt_that_checkpointed_last_loses_the_least_and_goes_first() -> None:
    w = borrowers("a", "b", "c")  # c started last: 100 s at risk without checkpoints
    w.clock -= 20  # a checkpointed 20 s ago: 20 s at risk
    checkpoint(w, "a")
    w.clock += 20
    preemption = reclaim_one(w)
    assert preemption.job_id == "a"
    assert preemption.rule is ev.Rule.RECLAIM
    assert preemption.seconds_at_risk == about(20)


def test_priority_still_comes_before_work_at_risk() -> None:
    w = World().environment(ml_g5_xlarge=2).queue().hosts(2)
    w.share("QS1", 1, "LEND_AND_BORROW")
    w.share("QS2", 1, "LEND")
    for name, priority in (("low", 0), ("high", 5)):
        w.submit(a_job(name=name, priority=priority).in_share("QS1"))
        w.pass_()
        w.start(name)
        w.tick(100)
    checkpoint(w, "high")  # nothing at risk, but it outranks low
    assert reclaim_one(w).job_id == "low"


def test_in_share_preemption_takes_the_least_work_at_risk_among_equals() -> None:
    w = World().environment(ml_g5_xlarge=2).queue().hosts(2)
    w.share("QS1", 2, "RESERVE", preemption=True)
    for name in ("first", "second"):
        w.submit(a_job(name=name, priority=1).in_share("QS1"))
        w.pass_()
        w.start(name)
        w.tick(600)
    checkpoint(w, "first")
    w.tick(5)
    w.submit(a_job(name="urgent", priority=9).in_share("QS1"))
    (preemption,) = (d for d in w.pass_() if isinstance(d, ev.JobPreemptionRequested))
    assert (preemption.job_id, preemption.rule) == ("first", ev.Rule.IN_SHARE)
    assert preemption.seconds_at_risk == about(5)


jobs_st = st.lists(
    st.tuples(st.integers(0, 3), st.floats(0, 1e6), st.none() | st.floats(0, 1e6)),
    min_size=1,
    max_size=12,
)


def some_jobs(specs: list[tuple[int, float, float | None]]) -> list[Job]:
    jobs = []
    for i, (priority, dispatched, checkpointed) in enumerate(specs):
        job = Job(f"j{i}", "n", "q", "QS1", UNIT, 1, priority, 0.0, 1, (), None, None, 0,
                  ev.WarmPoolKey(), "{}", {}, None)  # fmt: skip
        job.dispatched_at = dispatched
        if checkpointed is not None and checkpointed > dispatched:  # as the fold keeps them
            job.last_checkpoint_at = checkpointed
        jobs.append(job)
    return jobs


@given(jobs_st)
def test_with_no_checkpoints_the_order_is_the_one_before_checkpoints(
    specs: list[tuple[int, float, float | None]],
) -> None:
    jobs = some_jobs([(p, d, None) for p, d, _ in specs])
    before = sorted(jobs, key=lambda j: (j.priority, -j.dispatched_at, j.job_id))
    assert sorted(jobs, key=victim_order) == before


@given(jobs_st, st.floats(1e6, 2e6))
def test_among_equal_priorities_the_order_puts_less_work_at_risk_first(
    specs: list[tuple[int, float, float | None]], now: float
) -> None:
    ordered = sorted(some_jobs(specs), key=victim_order)
    for first, later in itertools.pairwise(ordered):
        if first.priority == later.priority:
            assert seconds_at_risk(first, now) <= seconds_at_risk(later, now)


# ---- what the decision's figure shows up in ---------------------------------------------


def test_the_lost_work_is_in_the_preemption_summary_and_the_metric() -> None:
    w = borrowers("a", "b")
    w.clock -= 40
    checkpoint(w, "b")
    w.clock += 40
    metrics = SchedulerMetrics(CollectorRegistry())
    w.submit(a_job(name="lender").in_share("QS2"))
    metrics.appended_decisions(w.state, w.pass_())
    assert w.preempted() == ["b"]
    w.confirm_stop("b")
    summary = job_doc(w.state, w.job("b"))["preemption_summary"]
    assert summary["preempted_attempt_count"] == 1
    assert summary["lost_unit_seconds"] == about(40)
    assert [a.get("lost_unit_seconds") for a in summary["recent_preempted_attempts"]] == [about(40)]
    assert "lost_unit_seconds" not in job_doc(w.state, w.job("a"))["attempts"][0]
    assert metrics.lost_work.labels("q", "QS1")._value.get() == about(40)


# ---- qm explain ---------------------------------------------------------------------------


def envelopes(log: list[ev.Event]) -> list[Envelope]:
    """The log as the services would have written it: each event on its family's subject."""
    out = []
    for seq, event in enumerate(log, start=1):
        family = min(FAMILIES[ev.tag_of(event)])
        host = getattr(event, "host", "") or getattr(event, "host_id", "")
        subject = {
            Family.REQUESTS: "qm.requests",
            Family.DECISIONS: "qm.decisions.q",
            Family.HOST_DECISIONS: "qm.decisions._hosts",
            Family.TIMERS: "qm.timers",
            Family.REPORTS: f"qm.reports.{host}",
        }[family]
        out.append(Envelope(seq, subject, [event]))  # type: ignore[list-item]
    return out


def test_explain_of_a_reclaim_shows_the_seconds_at_risk_of_each_candidate() -> None:
    w = borrowers("a", "b", "c")
    w.clock -= 20
    checkpoint(w, "a")
    w.clock += 20
    reclaim_one(w)
    x = explain(envelopes(w.log), "a")
    step = next(t for t in x.transitions if t.event == "job.preemption_requested")
    d = step.decision
    assert d is not None and d.rule == "RECLAIM"
    assert float(d.inputs["seconds_at_risk"]) == about(20)
    risk = {c.job_id: c.seconds_at_risk for c in d.candidates}
    # a: 20 s since its checkpoint; c and b: 100 and 200 s since their dispatch
    assert risk == {"a": about(20), "c": about(100), "b": about(200)}
    assert [(c.job_id, c.chosen) for c in d.candidates] == [("a", True), ("c", False), ("b", False)]
    assert d.candidates[0].why == "taken: lowest priority first, then the least work at risk"
    assert "100 s of work at risk, more than a's 20 s" in d.candidates[1].why
    text = render_explanation(x)
    assert "at risk 20 s" in text and "at risk 100 s" in text and "at risk 3.3 min" in text
    assert from_proto(to_proto(x)) == x  # the figures survive ExplainServiceJob


def test_explain_without_checkpoints_keeps_the_old_words() -> None:
    w = borrowers("a", "b")
    reclaim_one(w)
    x = explain(envelopes(w.log), "b")
    d = next(t for t in x.transitions if t.event == "job.preemption_requested").decision
    assert d is not None
    assert d.candidates[0].why == "taken: lowest priority first, then the most recently started"
    assert [c.seconds_at_risk for c in d.candidates] == [about(100), about(200)]


# ---- the pass, on generated running jobs ---------------------------------------------------

running_jobs = st.lists(
    st.tuples(
        st.integers(0, 1),  # priority
        st.sampled_from([1, 1, 2]),  # instances
        st.floats(1, 500),  # seconds until the next one is dispatched
        st.none() | st.floats(0, 1),  # checkpointed that far into its run so far (None: never)
    ),
    min_size=2,
    max_size=7,
)


def a_preempting_world(
    jobs: list[tuple[int, int, float, float | None]], in_share: bool
) -> tuple[World, list[str]]:
    """QS1 runs `jobs` (checkpointed as given); in-share: QS1 holds all the capacity and
    preempts; else QS1 borrows all but one unit from QS2 (LEND)."""
    total = sum(count for _, count, _, _ in jobs)
    w = World().environment(ml_g5_xlarge=total + 1).queue().hosts(total + 1)
    if in_share:
        w.share("QS1", total, "RESERVE", preemption=True)
        w.share("QS2", 1, "RESERVE")
    else:
        w.share("QS1", 1, "LEND_AND_BORROW")
        w.share("QS2", total, "LEND")
    names = []
    for i, (priority, count, gap, _) in enumerate(jobs):
        name = f"r{i}"
        w.submit(a_job(name=name, priority=priority, count=count).in_share("QS1"))
        w.pass_()
        w.start(name)
        w.tick(gap)
        names.append(name)
    now = w.clock
    for name, (*_, fraction) in zip(names, jobs, strict=True):
        if fraction is not None:
            job = w.job(name)
            at = job.dispatched_at + fraction * (now - job.dispatched_at)
            w.apply(ev.JobCheckpointed(at=at, job_id=name, attempt=1, host=job.hosts[0]))
    return w, names


@given(running_jobs, st.integers(1, 3), st.booleans())
def test_the_pass_never_passes_over_an_alike_victim_with_less_work_at_risk(
    jobs: list[tuple[int, int, float, float | None]], need: int, in_share: bool
) -> None:
    # given: QS1's running jobs, some checkpointed
    w, names = a_preempting_world(jobs, in_share)
    state = w.state
    running = [w.job(n) for n in names]
    keys = list(state.victims.get(("q", "QS1", UNIT), ()))
    if all(j.last_checkpoint_at is None for j in running):
        # without checkpoints the pass reads exactly today's order: most recently started
        assert keys == sorted((j.priority, -j.dispatched_at, j.job_id) for j in running)
    # when: a job needs units that only preemption can free
    w.submit(a_job(name="needs", priority=9, count=need).in_share("QS2" if not in_share else "QS1"))
    decided = w.pass_()
    preempted = [d for d in decided if isinstance(d, ev.JobPreemptionRequested)]
    taken = {d.job_id for d in preempted}
    # then: no job alike a victim (same priority and size) was left with less at risk
    for d in preempted:
        victim = w.job(d.job_id)
        risk = seconds_at_risk(victim, d.at)
        assert d.seconds_at_risk == risk
        for other in running:
            if other.job_id in taken or (other.priority, other.count) != (
                victim.priority,
                victim.count,
            ):
                continue
            assert seconds_at_risk(other, d.at) >= risk, (victim.job_id, other.job_id)


def test_describe_service_job_carries_the_lost_work() -> None:
    from google.protobuf import json_format

    from quartermaster.api.qm.v1 import quartermaster_pb2 as pb

    w = borrowers("a", "b")
    reclaim_one(w)
    w.confirm_stop("b")
    detail = json_format.ParseDict(
        job_doc(w.state, w.job("b")), pb.ServiceJobDetail(), ignore_unknown_fields=True
    )
    summary = detail.preemption_summary
    assert summary.lost_unit_seconds == about(100)
    assert summary.recent_preempted_attempts[0].lost_unit_seconds == about(100)
    other = json_format.ParseDict(
        job_doc(w.state, w.job("a")), pb.ServiceJobDetail(), ignore_unknown_fields=True
    )
    assert not other.attempts[0].HasField("lost_unit_seconds")  # never preempted


# ---- qm simulate ------------------------------------------------------------------------------


def test_simulated_checkpoints_shrink_the_lost_work_and_resume_the_victim() -> None:
    from quartermaster.audit.simconfig import ShareConfig, SimConfig, TraceJob, with_checkpoints
    from quartermaster.audit.simulate import compare, lost_unit_hours, trace_jobs

    hour = 3600.0
    config = SimConfig(
        capacity={UNIT: 2},
        shares=[
            ShareConfig("QS1", {UNIT: 1}, ev.SharingStrategy.LEND_AND_BORROW),
            ShareConfig("QS2", {UNIT: 1}, ev.SharingStrategy.LEND),
        ],
    )
    trace = [  # QS1's two jobs take both units; QS2's reclaims one at 5.5 h
        TraceJob(0, 10 * hour, "QS1", instance_type=UNIT, name="A"),
        TraceJob(0, 10 * hour, "QS1", instance_type=UNIT, name="B"),
        TraceJob(5.5 * hour, 10 * hour, "QS2", instance_type=UNIT, name="C"),
    ]
    c = compare(with_checkpoints(config, {"QS1": hour}), trace_jobs(trace))
    assert c.no_checkpoints is not None and c.checkpoint_intervals == {"QS1": hour}
    # without: the victim's 5.5 h are done again; it restarts at 10 h and ends at 20 h
    assert lost_unit_hours(c.no_checkpoints) == pytest.approx(5.5)
    assert c.no_checkpoints.horizon == pytest.approx(20 * hour)
    # hourly: it loses the half hour since 5 h and resumes at 10 h with 5 h left; C ends last
    assert lost_unit_hours(c.candidate) == pytest.approx(0.5)
    assert c.candidate.horizon == pytest.approx(15.5 * hour)
    assert [o.scenario for o in c.outcomes()] == [
        "candidate",
        "no checkpoints",
        "reserve-only",
        "pooled bound",
    ]
