"""Terminal jobs leave the folded state after the retention period, and only they."""

from __future__ import annotations

from quartermaster import events as ev
from quartermaster.core import decide, fork
from quartermaster.core.model import JobStatus, WarmPoolStatus
from quartermaster.core.snapshot import restore, take
from quartermaster.testing.builders import World, a_job


def a_world(retention: float | None = 60.0) -> World:
    w = World()
    w.state.retention_seconds = retention
    w.environment(ml_g5_xlarge=2).queue().hosts(2)
    w.share("QS1", 2)
    return w


def test_an_ended_job_is_forgotten_once_the_retention_has_passed() -> None:
    w = a_world()
    w.submit(a_job(name="done"))
    w.submit(a_job(name="running"))
    w.submit(a_job(name="waiting", count=2))
    w.pass_()
    w.start("done").succeed("done")
    w.pass_()
    w.tick(59)
    assert "done" in w.state.jobs, "kept until the retention has passed"
    w.tick(16)  # sweeps run a quarter period apart: gone at most 1.25 periods after
    assert "done" not in w.state.jobs
    assert {"running", "waiting"} <= set(w.state.jobs), "live jobs stay"
    assert w.state.jobs["waiting"].status is JobStatus.RUNNABLE


def test_no_retention_keeps_every_job() -> None:
    w = a_world(retention=None)
    w.submit(a_job(name="done"))
    w.pass_()
    w.start("done").succeed("done")
    w.tick(10**6)
    assert w.state.jobs["done"].status is JobStatus.SUCCEEDED


def test_a_job_kept_for_its_warm_pool_stays_until_the_pool_is_over() -> None:
    w = a_world()
    w.submit(a_job(name="pooled", keep_alive=600))
    w.pass_()
    w.start("pooled").succeed("pooled")
    w.pass_()
    assert w.state.pools["pooled"].status is WarmPoolStatus.AVAILABLE
    w.tick(300)
    w.pass_()
    assert "pooled" in w.state.jobs, "its pool is Available"
    w.tick(400)
    w.pass_()  # the pool expires
    assert w.state.pools["pooled"].status is WarmPoolStatus.TERMINATED
    w.tick(76)
    assert "pooled" not in w.state.jobs and "pooled" not in w.state.pools


def test_events_for_a_forgotten_job_change_nothing() -> None:
    w = a_world()
    w.submit(a_job(name="done"))
    w.pass_()
    w.start("done").succeed("done")
    w.tick(76)
    assert "done" not in w.state.jobs
    before = take(w.state, 0)
    for late in (
        ev.JobSucceeded(at=w.clock, job_id="done", attempt=1, host="h1"),
        ev.JobPriorityUpdated(at=w.clock, job_id="done", scheduling_priority=9),
        ev.JobTerminationRequested(at=w.clock, job_id="done", reason="late"),
        ev.WarmPoolKeepAliveUpdated(at=w.clock, job_id="done", keep_alive_seconds=60),
    ):
        w.apply(late)
    after = take(w.state, 0)
    assert restore(after)[0].jobs == restore(before)[0].jobs
    assert decide(w.state) == []


def test_a_fork_and_a_snapshot_keep_the_retention_of_their_caller() -> None:
    w = a_world()
    assert fork(w.state).retention_seconds == 60.0
    restored, _ = restore(take(w.state, 0))
    assert restored.retention_seconds is None, "a restored state gets its retention from its reader"
