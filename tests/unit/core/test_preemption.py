"""Preemption: cross-share reclaim, in-share preemption, lowered limits, retries, priorities.

Spec: semantics.md section 2 (preemption statuses, preemptionRetriesBeforeTermination,
UpdateServiceJob) and section 4, steps 4-7.
"""

from __future__ import annotations

import pytest

from quartermaster import events as ev
from quartermaster.core.model import ACTIVE_STATUSES, JobStatus
from quartermaster.testing.builders import World, a_job

UNIT = "ml.g5.xlarge"


def in_use(w: World, share: str) -> int:
    return w.state.use[("q", share, UNIT)]


def preemption_requests(w: World, job_id: str) -> int:
    """How often the whole log asked this job to stop for another one."""
    return sum(1 for e in w.log if isinstance(e, ev.JobPreemptionRequested) and e.job_id == job_id)


def run_one_by_one(w: World, share: str, jobs: list[tuple[str, int, int]]) -> None:
    """Dispatch and start (name, priority, count) jobs one pass apart, 10 s apart."""
    for name, priority, count in jobs:
        w.submit(a_job(name=name, priority=priority, count=count).in_share(share))
        w.pass_()
        assert name in w.dispatched(), f"{name} should have been dispatched"
        w.start(name)
        w.tick(10)


def reclaim_world(capacity: int, borrower_own: int = 1) -> World:
    """QS1 borrows (LAB), QS2 lends the rest of the capacity (LEND)."""
    w = World().environment(ml_g5_xlarge=capacity).queue().hosts(capacity)
    w.share("QS1", borrower_own, "LEND_AND_BORROW")
    w.share("QS2", capacity - borrower_own, "LEND")
    return w


# ---- cross-share reclaim: which victims -------------------------------------------


@pytest.mark.parametrize(
    ("borrowers", "need", "victims"),
    [
        # (name, priority, count) in dispatch order; `need` units for QS2's head
        pytest.param([("j1", 0, 1), ("j2", 0, 1), ("j3", 0, 1)], 1, {"j3"}, id="most-recent-first"),
        pytest.param(
            [("j1", 0, 1), ("j2", 5, 1), ("j3", 5, 1)], 1, {"j1"}, id="lowest-priority-first"
        ),
        pytest.param(
            [("j1", 5, 1), ("j2", 0, 1), ("j3", 0, 1)], 1, {"j3"}, id="priority-then-recency"
        ),
        pytest.param(
            [("j1", 0, 1), ("j2", 0, 1), ("j3", 0, 1)], 2, {"j3", "j2"}, id="two-most-recent"
        ),
        pytest.param(
            [("j1", 1, 1), ("j2", 0, 1), ("j3", 2, 1)], 2, {"j2", "j1"}, id="two-lowest-priority"
        ),
        pytest.param(
            [("big", 1, 2), ("s1", 0, 1)], 2, {"big"}, id="fewest-victims-drops-unneeded-small"
        ),
        pytest.param([("big", 1, 2), ("s1", 0, 1)], 1, {"s1"}, id="one-unit-from-lowest"),
    ],
)
def test_reclaim_preempts_the_minimal_set_of_borrowing_victims(
    borrowers: list[tuple[str, int, int]], need: int, victims: set[str]
) -> None:
    # given: 3 units; QS1 (own 1) runs 3 units, 2 of them borrowed from QS2 (own 2)
    w = reclaim_world(3)
    run_one_by_one(w, "QS1", borrowers)
    assert in_use(w, "QS1") == 3
    # when: QS2 asks for units of its own limit
    q = w.submit(a_job(name="q", count=need).in_share("QS2"))
    w.pass_()
    # then
    assert set(w.preempted()) == victims
    assert len(w.preempted()) == len(victims)
    w.confirm_all_stops()
    w.pass_()
    assert q in w.dispatched()
    assert all(w.status(v) is JobStatus.RUNNABLE for v in victims)
    untouched = {name for name, _, _ in borrowers} - victims
    assert all(w.status(j) is JobStatus.RUNNING for j in untouched)


@pytest.mark.parametrize(
    ("head_count", "victims"),
    [
        pytest.param(1, 1, id="one-instance-head-reclaims"),
        pytest.param(2, 0, id="unsatisfiable-two-instance-head-preempts-nobody"),
    ],
)
def test_never_preempt_unless_the_freed_units_let_the_head_run(
    head_count: int, victims: int
) -> None:
    # given: maxCapacity 4 but 3 hosts; QS1 (LAB, own 1) borrows 1 of QS2's 2 units;
    # QS3 (RESERVE, own 1) keeps its idle unit
    w = World().environment(ml_g5_xlarge=4).queue().hosts(3)
    w.share("QS1", 1, "LEND_AND_BORROW")
    w.share("QS2", 2, "LEND")
    w.share("QS3", 1, "RESERVE")
    run_one_by_one(w, "QS1", [("b1", 0, 1), ("b2", 0, 1)])
    # when: QS2's head needs head_count units (within its own limit)
    q = w.submit(a_job(name="q", count=head_count).in_share("QS2"))
    w.pass_()
    w.tick(60)
    w.pass_()
    # then: reclaiming 1 unit lets a 1-instance head run, never a 2-instance one
    assert sum(preemption_requests(w, j) for j in ("b1", "b2")) == victims
    if victims == 0:
        assert w.status("b1") is JobStatus.RUNNING
        assert w.status("b2") is JobStatus.RUNNING
        assert w.status(q) is JobStatus.RUNNABLE


def test_a_preempted_job_holds_its_host_until_the_stop_is_confirmed() -> None:
    # given: QS1 (LAB, own 1) runs a and b; b borrows QS2's unit
    w = reclaim_world(2)
    run_one_by_one(w, "QS1", [("a", 0, 1), ("b", 0, 1)])
    b_host = w.job("b").hosts[0]
    # when: QS2 reclaims
    q = w.submit(a_job(name="q").in_share("QS2"))
    w.pass_()
    # then: b is asked to stop, but keeps its host (and its status) for now
    assert w.preempted() == ["b"]
    assert w.dispatched() == {}
    assert w.state.hosts[b_host].holder == "b"
    assert w.status("b") is JobStatus.RUNNING
    assert w.status(q) is JobStatus.RUNNABLE
    # and more passes, even later, decide nothing more
    for _ in range(3):
        w.tick(30)
        assert w.pass_() == []
    assert preemption_requests(w, "b") == 1
    assert preemption_requests(w, "a") == 0
    # when: the node agent confirms the stop
    w.confirm_stop("b")
    w.pass_()
    # then: the waiting job gets exactly that host; b waits again
    assert w.dispatched() == {q: (b_host,)}
    assert w.status("b") is JobStatus.RUNNABLE
    assert w.job("b").preempted_count == 1
    assert w.job("b").attempts_used == 1  # a preemption uses no retry attempt
    assert w.preempted() == []


def test_two_shares_reclaiming_at_once_preempt_only_the_borrowed_units() -> None:
    # given: 3 units; QS1 (LAB, own 1) runs v1, v2, v3: it borrows QS2's and QS3's units
    w = World().environment(ml_g5_xlarge=3).queue().hosts(3)
    w.share("QS1", 1, "LEND_AND_BORROW")
    w.share("QS2", 1, "LEND")
    w.share("QS3", 1, "LEND")
    run_one_by_one(w, "QS1", [("v1", 0, 1), ("v2", 0, 1), ("v3", 0, 1)])
    # when: QS2 and QS3 each ask for their own unit in the same pass
    w.submit(a_job(name="q2").in_share("QS2"))
    w.submit(a_job(name="q3").in_share("QS3"))
    w.pass_()
    # then: the two borrowed units are reclaimed; QS1 keeps its own unit
    assert sorted(w.preempted()) == ["v2", "v3"]
    w.confirm_all_stops()
    w.pass_()
    assert set(w.dispatched()) == {"q2", "q3"}
    assert w.status("v1") is JobStatus.RUNNING
    assert in_use(w, "QS1") == 1


# ---- in-share preemption ------------------------------------------------------------


@pytest.mark.parametrize(
    ("enabled", "running_priority", "new_priority", "preempts"),
    [
        pytest.param(True, 1, 2, True, id="enabled-higher-preempts"),
        pytest.param(True, 1, 1, False, id="enabled-equal-does-not"),
        pytest.param(True, 2, 1, False, id="enabled-lower-does-not"),
        pytest.param(False, 1, 2, False, id="disabled-higher-does-not"),
        pytest.param(False, 0, 9999, False, id="disabled-max-priority-does-not"),
    ],
)
def test_in_share_preemption_only_where_enabled_and_only_strictly_lower_priority(
    enabled: bool, running_priority: int, new_priority: int, preempts: bool
) -> None:
    # given: one unit, one RESERVE share running one job
    w = World().environment(ml_g5_xlarge=1).queue().hosts(1)
    w.share("QS1", 1, "RESERVE", preemption=enabled)
    run_one_by_one(w, "QS1", [("running", running_priority, 1)])
    # when
    new = w.submit(a_job(name="new", priority=new_priority))
    w.pass_()
    # then
    assert w.preempted() == (["running"] if preempts else [])
    w.confirm_all_stops()
    w.pass_()
    if preempts:
        assert w.dispatched() == {new: ("h1",)}
        assert w.status("running") is JobStatus.RUNNABLE
    else:
        assert w.status(new) is JobStatus.RUNNABLE
        assert w.status("running") is JobStatus.RUNNING


@pytest.mark.parametrize(
    ("running", "victim"),
    [
        pytest.param([("r1", 1, 1), ("r2", 0, 1)], "r2", id="lowest-priority"),
        pytest.param([("r1", 0, 1), ("r2", 1, 1)], "r1", id="lowest-priority-older"),
        pytest.param([("r1", 0, 1), ("r2", 0, 1)], "r2", id="most-recent-on-tie"),
        pytest.param([("r1", 0, 1), ("r2", 5, 1)], "r1", id="never-equal-priority"),
    ],
)
def test_in_share_victims_lowest_priority_then_most_recent(
    running: list[tuple[str, int, int]], victim: str
) -> None:
    # given: two units, one RESERVE share with in-share preemption, both units busy
    w = World().environment(ml_g5_xlarge=2).queue().hosts(2)
    w.share("QS1", 2, "RESERVE", preemption=True)
    run_one_by_one(w, "QS1", running)
    # when: a priority-5 job arrives
    w.submit(a_job(name="hi", priority=5))
    w.pass_()
    # then
    assert w.preempted() == [victim]


def test_in_share_preemption_frees_all_units_a_multi_instance_head_needs() -> None:
    # given: 2 units busy with two low-priority jobs
    w = World().environment(ml_g5_xlarge=2).queue().hosts(2)
    w.share("QS1", 2, "RESERVE", preemption=True)
    run_one_by_one(w, "QS1", [("r1", 0, 1), ("r2", 1, 1)])
    # when: a 2-instance job of priority 2 arrives
    w.submit(a_job(name="pair", priority=2, count=2))
    w.pass_()
    # then: both are asked to stop, and the pair starts only once both confirmed
    assert sorted(w.preempted()) == ["r1", "r2"]
    w.confirm_stop("r1")
    w.pass_()
    assert w.dispatched() == {}
    w.confirm_stop("r2")
    w.pass_()
    assert set(w.dispatched()) == {"pair"}


def test_in_share_preemption_never_takes_a_victim_whose_unit_cannot_help() -> None:
    # given: 2 units; a priority-0 job and a priority-9 job; the head needs 2 units
    w = World().environment(ml_g5_xlarge=2).queue().hosts(2)
    w.share("QS1", 2, "RESERVE", preemption=True)
    run_one_by_one(w, "QS1", [("low", 0, 1), ("top", 9, 1)])
    # when: a priority-5 pair arrives: it could only run by preempting `top` too
    pair = w.submit(a_job(name="pair", priority=5, count=2))
    w.pass_()
    # then: nobody is preempted, since preempting `low` alone does not let it run
    assert w.preempted() == []
    assert w.status(pair) is JobStatus.RUNNABLE


# ---- lowered limits ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "borrow_limit"),
    [
        pytest.param("RESERVE", -1, id="RESERVE"),
        pytest.param("LEND", -1, id="LEND"),
        pytest.param("LEND_AND_BORROW", 0, id="LAB-no-borrowing"),
        pytest.param("LEND_AND_BORROW", -1, id="LAB-unlimited"),
    ],
)
def test_a_lowered_limit_makes_excess_jobs_preemptible(strategy: str, borrow_limit: int) -> None:
    # given: 3 units; QS1 (own 2) runs 2 jobs; QS2 (LEND, own 1) runs 1
    w = World().environment(ml_g5_xlarge=3).queue().hosts(3)
    w.share("QS1", 2, strategy, borrow_limit=borrow_limit)
    w.share("QS2", 1, "LEND")
    run_one_by_one(w, "QS1", [("x1", 0, 1), ("x2", 0, 1)])
    run_one_by_one(w, "QS2", [("y1", 0, 1)])
    # when: an administrator moves one unit from QS1 to QS2
    w.share("QS1", 1, strategy, borrow_limit=borrow_limit, updated=True)
    w.share("QS2", 2, "LEND", updated=True)
    # then: lowering a limit preempts nothing by itself
    assert w.pass_() == []
    # when: QS2 needs the unit
    y2 = w.submit(a_job(name="y2").in_share("QS2"))
    w.pass_()
    # then: QS1's most recent excess job is preempted, and y2 runs after the stop
    assert w.preempted() == ["x2"]
    w.confirm_all_stops()
    w.pass_()
    assert set(w.dispatched()) == {y2}
    assert in_use(w, "QS1") == 1
    assert in_use(w, "QS2") == 2


# ---- preemptionRetriesBeforeTermination ---------------------------------------------


def preempt_again(w: World, victim: str, round_no: int) -> None:
    """One in-share preemption of `victim` by a fresh high-priority job."""
    hi = w.submit(a_job(name=f"hi_{round_no}", priority=9))
    w.pass_()
    assert w.preempted() == [victim]
    w.confirm_stop(victim)
    w.pass_()
    assert hi in w.dispatched()
    w.start(hi).succeed(hi)
    w.tick(5)
    w.pass_()


@pytest.mark.parametrize(
    ("retries", "fails_on_preemption"),
    [
        pytest.param(0, 1, id="0-fails-on-first"),
        pytest.param(1, 2, id="1-fails-on-second"),
        pytest.param(3, 4, id="3-fails-on-fourth"),
        pytest.param(None, None, id="unset-unlimited"),
    ],
)
def test_preemption_retries_before_termination(
    retries: int | None, fails_on_preemption: int | None
) -> None:
    # given: one unit, in-share preemption on, a low-priority job running
    w = World().environment(ml_g5_xlarge=1).queue().hosts(1)
    w.share("QS1", 1, "RESERVE", preemption=True)
    w.submit(a_job(name="v", preemption_retries=retries))
    w.pass_()
    w.start("v")
    rounds = fails_on_preemption or 6
    for n in range(1, rounds + 1):
        # when: v is preempted for the n-th time
        preempt_again(w, "v", n)
        job = w.job("v")
        # then
        assert job.preempted_count == n
        if n == fails_on_preemption:
            assert job.status is JobStatus.FAILED
            assert not job.is_terminated
            assert job.attempts_used == 1
            return
        assert job.status in ACTIVE_STATUSES  # RUNNABLE again, re-dispatched after hi_n
        assert w.state.hosts["h1"].holder == "v"
        w.start("v")
    assert fails_on_preemption is None
    assert len(w.job("v").recent_preemptions) == rounds


def test_a_failed_preempted_job_is_not_dispatched_again() -> None:
    # given: a job that may not be preempted even once
    w = World().environment(ml_g5_xlarge=1).queue().hosts(1)
    w.share("QS1", 1, "RESERVE", preemption=True)
    w.submit(a_job(name="v", preemption_retries=0, attempts=3))
    w.pass_()
    w.start("v")
    # when
    preempt_again(w, "v", 1)
    # then: the retry strategy does not revive it
    assert w.status("v") is JobStatus.FAILED
    assert w.dispatched() == {}
    assert w.state.hosts["h1"].holder is None


# ---- priority updates --------------------------------------------------------------


@pytest.mark.parametrize(
    ("new_priorities", "victim"),
    [
        pytest.param({}, "b", id="no-update-lowest-is-b"),
        pytest.param({"a": 0}, "a", id="a-lowered-below-b"),
        pytest.param({"b": 9}, "a", id="b-raised-above-a"),
        pytest.param({"a": 1}, "b", id="a-equal-b-more-recent"),
    ],
)
def test_a_priority_update_makes_a_running_job_the_preferred_victim(
    new_priorities: dict[str, int], victim: str
) -> None:
    # given: QS1 (LAB, own 1) runs a (priority 5) then b (priority 1, borrowed)
    w = reclaim_world(2)
    run_one_by_one(w, "QS1", [("a", 5, 1), ("b", 1, 1)])
    for job_id, priority in new_priorities.items():
        w.set_priority(job_id, priority)
    # when: QS2 reclaims its unit
    w.submit(a_job(name="q").in_share("QS2"))
    w.pass_()
    # then
    assert w.preempted() == [victim]


def test_a_priority_update_of_a_waiting_job_triggers_in_share_preemption() -> None:
    # given: one unit with in-share preemption; `run` (priority 3) runs, `wait` (1) waits
    w = World().environment(ml_g5_xlarge=1).queue().hosts(1)
    w.share("QS1", 1, "RESERVE", preemption=True)
    run_one_by_one(w, "QS1", [("run", 3, 1)])
    w.submit(a_job(name="wait", priority=1))
    assert w.pass_() == []
    # when
    w.set_priority("wait", 4)
    w.pass_()
    # then
    assert w.preempted() == ["run"]
    w.confirm_stop("run")
    w.pass_()
    assert w.dispatched() == {"wait": ("h1",)}
