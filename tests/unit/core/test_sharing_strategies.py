"""Sharing strategies, borrow limits, unassigned capacity, FIFO borrowing, oversubscription.

Spec: semantics.md sections 1 (quota shares), 3 (capacity accounting) and 4,
steps 2-3 (own-quota phase, borrow phase). Every test is given/when/then on a
`World`; tables carry the rules that vary by data.
"""

from __future__ import annotations

import pytest

from quartermaster.core.model import ACTIVE_STATUSES, JobStatus
from quartermaster.testing.builders import World, a_job

UNIT = "ml.g5.xlarge"


def world(capacity: int, *shares: tuple[str, int, str], borrow_limit: int = -1) -> World:
    """`capacity` hosts and maxCapacity; shares as (name, own limit, strategy)."""
    w = World().environment(ml_g5_xlarge=capacity).queue().hosts(capacity)
    for name, limit, strategy in shares:
        w.share(name, limit, strategy, borrow_limit=borrow_limit)
    return w


def submit_many(w: World, share: str, n: int, prefix: str | None = None) -> list[str]:
    prefix = prefix or share.lower()
    return [w.submit(a_job(name=f"{prefix}_{i}").in_share(share)) for i in range(1, n + 1)]


def in_use(w: World, share: str) -> int:
    """Units the share holds (running jobs, stops not confirmed, warm pools)."""
    return w.state.use[("q", share, UNIT)]


def active(w: World, share: str) -> list[str]:
    return sorted(
        j.job_id for j in w.state.jobs.values() if j.share == share and j.status in ACTIVE_STATUSES
    )


# ---- strategies: who lends, who borrows ---------------------------------------


@pytest.mark.parametrize(
    ("borrower", "lender", "expected_running"),
    [
        pytest.param("RESERVE", "LEND", 1, id="RESERVE-never-borrows"),
        pytest.param("LEND", "LEND", 1, id="LEND-never-borrows"),
        pytest.param("LEND", "LEND_AND_BORROW", 1, id="LEND-never-borrows-from-LAB"),
        pytest.param("LEND_AND_BORROW", "LEND", 3, id="LAB-borrows-from-LEND"),
        pytest.param("LEND_AND_BORROW", "LEND_AND_BORROW", 3, id="LAB-borrows-from-LAB"),
        pytest.param("LEND_AND_BORROW", "RESERVE", 1, id="RESERVE-never-lends"),
    ],
)
def test_only_lend_and_borrow_borrows_and_reserve_never_lends(
    borrower: str, lender: str, expected_running: int
) -> None:
    # given: 3 units; QS1 (own 1) has 3 jobs, QS2 (own 2) sits idle
    w = world(3, ("QS1", 1, borrower), ("QS2", 2, lender))
    jobs = submit_many(w, "QS1", 3)
    # when
    w.pass_()
    # then: dispatch order inside the share; the rest waits
    assert set(w.dispatched()) == set(jobs[:expected_running])
    assert in_use(w, "QS1") == expected_running
    assert all(w.status(j) is JobStatus.RUNNABLE for j in jobs[expected_running:])


@pytest.mark.parametrize("lender", ["LEND", "LEND_AND_BORROW"])
def test_only_the_lend_and_borrow_side_of_a_pair_borrows_the_other_idle_unit(
    lender: str,
) -> None:
    # given: QS1 (LAB, own 1) is idle; QS2 (own 2) has 3 jobs
    w = world(3, ("QS1", 1, "LEND_AND_BORROW"), ("QS2", 2, lender))
    # when: QS2 fills its own limit
    submit_many(w, "QS2", 3)
    w.pass_()
    # then: own limit only (a LEND share never borrows QS1's idle unit)
    expected = 2 if lender == "LEND" else 3
    assert len(w.dispatched()) == expected


# ---- borrowLimit (percent of own maxCapacity) -----------------------------------


@pytest.mark.parametrize(
    ("own", "borrow_limit", "expected_running"),
    [
        pytest.param(1, 200, 3, id="1+200%=3"),
        pytest.param(1, 100, 2, id="1+100%=2"),
        pytest.param(1, 0, 1, id="0%-no-borrowing"),
        pytest.param(1, -1, 6, id="-1-unlimited"),
        pytest.param(2, 50, 3, id="2+50%=3"),
        pytest.param(2, 0, 2, id="2+0%=2"),
        pytest.param(2, 100, 4, id="2+100%=4"),
    ],
)
def test_borrow_limit_caps_what_a_lend_and_borrow_share_holds(
    own: int, borrow_limit: int, expected_running: int
) -> None:
    # given: 6 units; QS1 borrows under borrowLimit, QS2 lends everything else
    w = World().environment(ml_g5_xlarge=6).queue().hosts(6)
    w.share("QS1", own, "LEND_AND_BORROW", borrow_limit=borrow_limit)
    w.share("QS2", 6 - own, "LEND")
    submit_many(w, "QS1", 6)
    # when
    w.pass_()
    w.pass_()  # a second pass changes nothing: the cap is not a transient
    # then
    assert in_use(w, "QS1") == expected_running
    assert len(active(w, "QS1")) == expected_running


def test_borrow_limit_counts_multi_instance_jobs_in_units() -> None:
    # given: QS1 own 1, borrowLimit 200 (3 units at most); jobs of 2 instances
    w = World().environment(ml_g5_xlarge=6).queue().hosts(6)
    w.share("QS1", 1, "LEND_AND_BORROW", borrow_limit=200)
    w.share("QS2", 5, "LEND")
    first = w.submit(a_job(name="pair_1", count=2).in_share("QS1"))
    second = w.submit(a_job(name="pair_2", count=2).in_share("QS1"))
    # when
    w.pass_()
    # then: 2 units fit under the cap of 3, a second pair (4 units) does not
    assert set(w.dispatched()) == {first}
    assert w.status(second) is JobStatus.RUNNABLE


# ---- unassigned capacity --------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "expected_running"),
    [
        pytest.param("RESERVE", 1, id="RESERVE"),
        pytest.param("LEND", 1, id="LEND"),
        pytest.param("LEND_AND_BORROW", 3, id="LEND_AND_BORROW"),
    ],
)
def test_unassigned_capacity_is_used_only_by_lend_and_borrow(
    strategy: str, expected_running: int
) -> None:
    # given: 3 units and one share with limit 1: 2 units belong to no share
    w = world(3, ("QS1", 1, strategy))
    submit_many(w, "QS1", 3)
    # when
    w.pass_()
    # then
    assert len(w.dispatched()) == expected_running


def test_unassigned_capacity_is_never_reclaimed() -> None:
    # given: 3 units, QS1 (LAB, own 1) and QS2 (LEND, own 1): 1 unit unassigned;
    # QS1 runs 3 jobs: its own, QS2's idle unit and the unassigned one
    w = world(3, ("QS1", 1, "LEND_AND_BORROW"), ("QS2", 1, "LEND"))
    borrowers = submit_many(w, "QS1", 3)
    w.pass_()
    assert set(w.dispatched()) == set(borrowers)
    for job in borrowers:
        w.start(job)
    # when: QS2 wants two units (its limit is one)
    q1, q2 = submit_many(w, "QS2", 2)
    w.pass_()
    # then: exactly QS2's own unit is reclaimed, never the unassigned one
    assert len(w.preempted()) == 1
    w.confirm_all_stops()
    w.pass_()
    assert set(w.dispatched()) == {q1}
    w.pass_()
    assert w.preempted() == []
    assert w.status(q2) is JobStatus.RUNNABLE
    assert in_use(w, "QS1") == 2  # own unit + the unassigned one
    assert in_use(w, "QS2") == 1


def test_a_unit_borrowed_from_unassigned_capacity_leaves_the_lender_its_own_unit() -> None:
    # given: 3 units, QS1 (LAB, own 1) runs 2 jobs; QS2 (LEND, own 1) is idle
    w = world(3, ("QS1", 1, "LEND_AND_BORROW"), ("QS2", 1, "LEND"))
    submit_many(w, "QS1", 2)
    w.pass_()
    # when: QS2 submits within its own limit
    q = w.submit(a_job(name="q").in_share("QS2"))
    w.pass_()
    # then: it runs on the free unit, nobody is preempted
    assert set(w.dispatched()) == {q}
    assert w.preempted() == []


# ---- FIFO borrowing across shares ------------------------------------------------


@pytest.mark.parametrize(
    ("second_jobs_order", "winner", "loser"),
    [
        pytest.param(("A", "B"), "a_2", "b_2", id="A-older-borrows"),
        pytest.param(("B", "A"), "b_2", "a_2", id="B-older-borrows"),
    ],
)
def test_borrowing_goes_to_the_oldest_head_across_shares(
    second_jobs_order: tuple[str, str], winner: str, loser: str
) -> None:
    # given: two borrowers with one own unit each, one lender with one idle unit
    w = world(3, ("A", 1, "LEND_AND_BORROW"), ("B", 1, "LEND_AND_BORROW"), ("L", 1, "LEND"))
    w.submit(a_job(name="a_1").in_share("A"))
    w.submit(a_job(name="b_1").in_share("B"))
    for share in second_jobs_order:
        w.submit(a_job(name=f"{share.lower()}_2").in_share(share))
    # when
    w.pass_()
    # then: both own jobs run, and the lender's unit goes to the older second job
    assert set(w.dispatched()) == {"a_1", "b_1", winner}
    assert w.status(loser) is JobStatus.RUNNABLE


def test_fifo_borrowing_compares_createdat_not_priority_across_shares() -> None:
    # given: B's waiting head is older; A's waiting head has a far higher priority
    w = world(3, ("A", 1, "LEND_AND_BORROW"), ("B", 1, "LEND_AND_BORROW"), ("L", 1, "LEND"))
    w.submit(a_job(name="a_1").in_share("A"))
    w.submit(a_job(name="b_1").in_share("B"))
    w.pass_()  # both own units are taken
    w.submit(a_job(name="b_2").in_share("B"))
    w.submit(a_job(name="a_2", priority=9000).in_share("A"))
    # when
    w.pass_()
    # then
    assert "b_2" in w.dispatched()
    assert w.status("a_2") is JobStatus.RUNNABLE


def test_fifo_borrowing_gives_every_idle_unit_in_createdat_order() -> None:
    # given: two borrowers and 3 idle lendable units; borrow heads alternate in age
    w = world(5, ("A", 1, "LEND_AND_BORROW"), ("B", 1, "LEND_AND_BORROW"), ("L", 3, "LEND"))
    order = ["a_1", "b_1", "b_2", "a_2", "b_3", "a_3"]
    for name in order:
        w.submit(a_job(name=name).in_share(name[0].upper()))
    # when
    w.pass_()
    # then: own units a_1, b_1; borrowed units to b_2, a_2, b_3 (oldest first); a_3 waits
    assert set(w.dispatched()) == {"a_1", "b_1", "b_2", "a_2", "b_3"}
    assert w.status("a_3") is JobStatus.RUNNABLE


# ---- oversubscription: sum of limits > capacity -----------------------------------


@pytest.mark.parametrize(
    ("capacity", "limits", "running_before", "expected"),
    [
        # equal ratios: the name breaks ties; then the lower ratio goes first
        pytest.param(3, {"A": 2, "B": 4}, {}, {"A": 1, "B": 2}, id="2+4>3"),
        pytest.param(3, {"A": 2, "B": 2}, {}, {"A": 2, "B": 1}, id="2+2>3"),
        pytest.param(2, {"A": 3, "B": 1}, {}, {"A": 1, "B": 1}, id="3+1>2"),
        pytest.param(1, {"A": 1, "B": 1}, {}, {"A": 1, "B": 0}, id="name-breaks-tie"),
        pytest.param(3, {"A": 4, "B": 2}, {}, {"A": 2, "B": 1}, id="4+2>3"),
        # usage already held counts: A (1/2) waits for B (0/4) to catch up
        pytest.param(3, {"A": 2, "B": 4}, {"A": 1}, {"A": 1, "B": 2}, id="usage-counts"),
        pytest.param(4, {"A": 3, "B": 3}, {"B": 2}, {"A": 2, "B": 2}, id="usage-counts-2"),
    ],
)
def test_oversubscribed_shares_are_served_lowest_usage_ratio_first(
    capacity: int, limits: dict[str, int], running_before: dict[str, int], expected: dict[str, int]
) -> None:
    # given: LEND shares whose limits add up to more than the capacity
    w = World().environment(ml_g5_xlarge=capacity).queue().hosts(capacity)
    for name, limit in limits.items():
        w.share(name, limit, "LEND")
    for name, n in running_before.items():
        submit_many(w, name, n, prefix=f"{name.lower()}_old")
    w.pass_()
    assert {n: in_use(w, n) for n in running_before} == running_before
    # when: every share has more work than the capacity (B's jobs submitted first)
    for name in sorted(limits, reverse=True):
        submit_many(w, name, capacity)
    w.pass_()
    # then
    assert {name: in_use(w, name) for name in limits} == expected
    assert sum(expected.values()) == capacity


def test_oversubscription_never_exceeds_capacity_or_preempts_an_own_quota_job() -> None:
    # given: A and B each own 2 of 2 units; A fills both while B is idle
    w = world(2, ("A", 2, "LEND"), ("B", 2, "LEND"))
    submit_many(w, "A", 2)
    w.pass_()
    # when: B submits within its own (oversubscribed) limit
    b = w.submit(a_job(name="b").in_share("B"))
    w.pass_()
    # then: A borrows nothing, so there is nothing to reclaim: B waits
    assert w.preempted() == []
    assert w.status(b) is JobStatus.RUNNABLE
    assert in_use(w, "A") == 2
