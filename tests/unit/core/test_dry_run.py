"""Dry run of a submission: what the pass would do now, and nothing changes.

Each case dry-runs a submission, checks the answer, checks the state is
untouched, then submits for real and checks the pass does what was answered.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from sortedcontainers import SortedList

from quartermaster import events as ev
from quartermaster.core import DryRun, State, WaitCode, dry_run, fold, fork, settle
from quartermaster.testing.builders import World, a_job
from quartermaster.testing.invariants import check_allocation, snapshot

UNIT = "ml.g5.xlarge"


def image(state: State) -> Any:
    """Everything a State holds, entities and every index, as plain values."""

    def plain(value: Any) -> Any:
        if isinstance(value, SortedList | set):
            return sorted(value)
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in sorted(value.items(), key=str) if plain(v)}
        return msgspec.to_builtins(value)

    return {name: plain(value) for name, value in vars(state).items()}


def submission(w: World, name: str, share: str = "QS1", **fields: object) -> ev.JobSubmitted:
    """The event `World.submit` would fold for this job."""
    spec = a_job(name=name, **fields).in_share(share)  # type: ignore[arg-type]
    return ev.JobSubmitted(
        at=w.clock + 0.001,
        job_id=name,
        job_name=name,
        job_queue="q",
        quota_share=share,
        instance_type=UNIT,
        instance_count=spec.count,
        scheduling_priority=spec.priority,
        keep_alive_seconds=spec.keep_alive,
        warm_pool_key=spec.key or ev.WarmPoolKey(instance_type=UNIT, instance_count=spec.count),
    )


def probe_then_submit(w: World, name: str, share: str = "QS1", **fields: object) -> DryRun:
    """Dry-run, check nothing changed, submit for real, check the pass agrees."""
    event = submission(w, name, share, **fields)
    before = image(w.state)
    answer = dry_run(w.state, event)
    assert image(w.state) == before, "a dry run changed the state"
    w.submit(a_job(name=name, **fields).in_share(share))  # type: ignore[arg-type]
    w.pass_()
    if answer.starts:
        assert w.dispatched().get(name) == answer.hosts
    else:
        assert name not in w.dispatched()
    assert tuple(w.preempted()) == answer.preempts
    return answer


def lending_world() -> World:
    w = World().environment(ml_g5_xlarge=2).queue().hosts(2)
    w.share("QS1", 1, "LEND_AND_BORROW")
    w.share("QS2", 1, "LEND")
    return w


def test_a_job_that_fits_would_start_cold_on_the_lowest_free_host() -> None:
    w = lending_world()
    answer = probe_then_submit(w, "j")
    assert (answer.starts, answer.hosts, answer.warm_pool, answer.rule) == (
        True,
        ("h1",),
        None,
        ev.Rule.OWN_QUOTA,
    )


def test_a_matching_job_would_start_on_the_warm_pool() -> None:
    w = lending_world()
    w.submit(a_job(name="a", keep_alive=600))
    w.pass_()
    w.start("a").succeed("a")
    w.pass_()
    answer = probe_then_submit(w, "j")
    assert (answer.starts, answer.hosts, answer.warm_pool) == (True, ("h1",), "a")


def test_a_job_of_a_lender_would_preempt_the_borrower_and_wait_for_its_stop() -> None:
    w = lending_world()
    for name in ("mine", "borrowed"):
        w.submit(a_job(name=name))
        w.pass_()
        w.start(name)
    answer = probe_then_submit(w, "j", "QS2")
    assert (answer.starts, answer.preempts) == (False, ("borrowed",))
    assert answer.wait is not None and answer.wait.code is WaitCode.WAITING_FOR_STOP


def test_a_job_would_evict_a_pool_that_holds_its_units() -> None:
    w = World().environment(ml_g5_xlarge=1).queue().hosts(1)
    w.share("QS1", 1, "RESERVE")
    w.submit(a_job(name="a", keep_alive=600))
    w.pass_()
    w.start("a").succeed("a")
    w.pass_()
    answer = probe_then_submit(w, "j", key=ev.WarmPoolKey(role_arn="other"))
    assert (answer.starts, answer.hosts, answer.evicts) == (True, ("h1",), ("a",))


def test_a_job_that_cannot_start_says_why() -> None:
    w = lending_world()
    for name in ("mine", "borrowed"):
        w.submit(a_job(name=name))
        w.pass_()
    answer = probe_then_submit(w, "j")
    assert answer.starts is False and answer.preempts == ()
    assert answer.wait is not None and answer.wait.code is WaitCode.NO_LENDABLE_CAPACITY


def test_a_misconfigured_job_says_so() -> None:
    w = lending_world()
    answer = probe_then_submit(w, "j", count=3)
    assert answer.wait is not None and answer.wait.code is WaitCode.MISCONFIGURATION


# ---- the fork under it --------------------------------------------------------------------


def test_folding_into_a_fork_leaves_the_original_as_it_was() -> None:
    w = lending_world()
    w.submit(a_job(name="a", keep_alive=600, attempts=2))
    w.submit(a_job(name="b"))
    w.pass_()
    w.start("a")
    before, whole = snapshot(w.state), image(w.state)
    probe = fork(w.state)
    for event in (
        ev.JobFailed(at=w.clock, job_id="a", attempt=1, host="h1", reason="boom"),
        ev.JobSucceeded(at=w.clock, job_id="b", attempt=1, host="h2"),
        ev.HostLost(at=w.clock, host_id="h2"),
        ev.JobPriorityUpdated(at=w.clock, job_id="a", scheduling_priority=7),
    ):
        fold(probe, event)
    settle(probe)
    assert snapshot(probe) != before
    assert snapshot(w.state) == before
    assert image(w.state) == whole  # indexes included
    check_allocation(w.state)
    assert w.state.jobs["a"].attempts[-1].stopped_at is None


def test_a_fork_must_know_every_state_attribute() -> None:
    state = State()
    state.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match=r"State\.extra"):
        fork(state)
