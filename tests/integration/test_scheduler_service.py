"""The scheduler service against a real nats-server: leading, fencing, snapshots."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from qm_scheduler.service import Scheduler
from qm_scheduler.settings import SchedulerSettings
from quartermaster import events as ev
from quartermaster.bus import FencedAppendError, JetStreamLog
from quartermaster.core.model import JobStatus
from quartermaster.eventlog import LogFollower, encode_batch, subjects

UNIT = "ml.g5.xlarge"


def settings(name: str, **kw: object) -> SchedulerSettings:
    return SchedulerSettings(instance_id=name, lease_ttl_seconds=1.5, **kw)  # type: ignore[arg-type]


async def append(log: JetStreamLog, *events: ev.Event) -> int:
    return await log.append(subjects.requests(log.prefix), encode_batch(list(events)))


async def seed(log: JetStreamLog, hosts: int = 2) -> None:
    await append(
        log,
        ev.ServiceEnvironmentCreated(
            at=1, name="env", capacity_limits=(ev.CapacityLimit(UNIT, hosts),)
        ),
        ev.SchedulingPolicyCreated(at=1, name="fifo"),
        ev.JobQueueCreated(at=1, name="q", service_environment="env", scheduling_policy="fifo"),
        ev.QuotaShareCreated(
            at=1,
            job_queue="q",
            name="A",
            capacity_limits=(ev.CapacityLimit(UNIT, hosts),),
            strategy=ev.SharingStrategy.LEND_AND_BORROW,
        ),
    )
    for i in range(hosts):  # each host registers on its own subject, as its agent does
        registered = ev.HostRegistered(at=1, host_id=f"h{i}", instance_type=UNIT)
        await log.append(subjects.reports(f"h{i}", log.prefix), encode_batch([registered]))


def submit(job_id: str, at: float = 2.0) -> ev.JobSubmitted:
    return ev.JobSubmitted(
        at=at, job_id=job_id, job_name=job_id, job_queue="q", quota_share="A", instance_type=UNIT
    )


@contextlib.asynccontextmanager
async def running(scheduler: Scheduler) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(scheduler.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def until(predicate, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


async def test_scheduler_dispatches_what_is_submitted(jetstream_log: JetStreamLog) -> None:
    await seed(jetstream_log)
    watcher = LogFollower(jetstream_log)
    await watcher.start()
    async with running(Scheduler(settings("s1"), jetstream_log)):
        await append(jetstream_log, submit("j1"), submit("j2"), submit("j3"))
        await until(
            lambda: (
                "j2" in watcher.state.jobs
                and watcher.state.jobs["j2"].status is JobStatus.SCHEDULED
            )
        )
    state = watcher.state
    assert {state.jobs[j].status for j in ("j1", "j2")} == {JobStatus.SCHEDULED}
    assert state.jobs["j3"].status is JobStatus.RUNNABLE
    await watcher.stop()


async def test_standby_takes_over_and_deposed_leader_is_fenced(jetstream_log: JetStreamLog) -> None:
    await seed(jetstream_log)
    watcher = LogFollower(jetstream_log)
    await watcher.start()
    first = Scheduler(settings("first"), jetstream_log)
    second = Scheduler(settings("second"), jetstream_log)
    async with running(first):
        await append(jetstream_log, submit("j1"))
        await until(
            lambda: (
                watcher.state.jobs.get("j1") is not None
                and watcher.state.jobs["j1"].status is JobStatus.SCHEDULED
            )
        )
        async with running(second):
            await asyncio.sleep(1.0)
            assert first.led_queues() == {"q"} and second.led_queues() == frozenset()
            # A stale writer (expected position behind the log) cannot append decisions.
            subject = subjects.decisions("q", jetstream_log.prefix)
            with pytest.raises(FencedAppendError):
                await jetstream_log.append(subject, encode_batch([]), expected_last_subject_seq=0)
            first_task_cancelled = True
        assert first_task_cancelled
    # first is gone: its lease expires and a new scheduler leads and dispatches.
    async with running(second):
        await append(jetstream_log, submit("j2", at=3.0))
        await until(
            lambda: (
                watcher.state.jobs.get("j2") is not None
                and watcher.state.jobs["j2"].status is JobStatus.SCHEDULED
            ),
            timeout=15,
        )
        assert second.led_queues() == {"q"}
    await watcher.stop()


async def test_restart_resumes_from_snapshot(jetstream_log: JetStreamLog) -> None:
    await seed(jetstream_log)
    first = Scheduler(settings("a", snapshot_every=1), jetstream_log)
    async with running(first):
        await append(jetstream_log, submit("j1"))
        await until(
            lambda: (
                first.follower is not None
                and first.follower.state.jobs.get("j1") is not None
                and first.follower.state.jobs["j1"].status is JobStatus.SCHEDULED
            )
        )
        await asyncio.sleep(0.3)
    restarted = Scheduler(settings("a", snapshot_every=1), jetstream_log)
    await restarted.start()
    assert restarted.follower is not None
    assert restarted.follower.seq > 1, "a restart resumes from the snapshot, not from zero"
    await restarted.follower.catch_up()
    assert restarted.follower.state.jobs["j1"].status is JobStatus.SCHEDULED
    await restarted.stop()


async def test_queues_created_later_go_to_the_scheduler_that_relays_the_hosts_views(
    jetstream_log: JetStreamLog,
) -> None:
    """Two schedulers race for each new queue's lease; the holder of the hosts' lease gets
    it, so a dispatch and the host view it causes come from one process (no hop through
    the log between two schedulers). Without that, each queue went to the quicker one."""
    await seed(jetstream_log)  # queue q, before either starts
    # The other one looks for free leases 10x as often: without the preference it wins.
    first = Scheduler(settings("first", lease_renew_seconds=0.5), jetstream_log)
    second = Scheduler(settings("second", lease_renew_seconds=0.05), jetstream_log)
    async with running(first):
        await until(lambda: first.leadership is not None and first._leads_hosts())
        async with running(second):
            await until(lambda: second.leadership is not None and second.follower is not None)
            for name in ("q2", "q3", "q4"):
                await append(
                    jetstream_log,
                    ev.JobQueueCreated(
                        at=2, name=name, service_environment="env", scheduling_policy="fifo"
                    ),
                )
            await until(lambda: first.led_queues() == {"q", "q2", "q3", "q4"}, timeout=15)
            await asyncio.sleep(2.0)  # past a lease TTL: the other still takes none
            assert first.led_queues() == {"q", "q2", "q3", "q4"}
            assert second.led_queues() == frozenset() and not second._leads_hosts()


async def test_a_standby_reads_in_batches_and_is_sent_each_message_once_it_leads(
    jetstream_log: JetStreamLog,
) -> None:
    await seed(jetstream_log)
    watcher = LogFollower(jetstream_log)
    await watcher.start()
    first = Scheduler(settings("first"), jetstream_log)
    # Reads a minute apart: only a wait for a position (or leading) reads before that.
    second = Scheduler(settings("second", standby_read_interval_seconds=60.0), jetstream_log)
    folded: list[int] = []  # what the standby folded, in order
    first_task = asyncio.create_task(first.run())
    try:
        await until(lambda: first.follower is not None and first.led_queues() == {"q"})
        async with running(second):
            await until(lambda: second.follower is not None and second.role() == "standing by")
            assert first.follower is not None and second.follower is not None
            assert second.follower.paced and not first.follower.paced
            second.follower.listen(lambda seq, subject, events: folded.append(seq))
            last = await append(jetstream_log, submit("j1"))
            await first.follower.wait_for(last)
            await asyncio.sleep(0.3)
            assert second.follower.seq < last  # not sent it: it reads at its next interval
            await second.follower.wait_for(last, timeout=5)  # a wait reads at once
            first_task.cancel()  # the leader goes, releasing its leases
            with contextlib.suppress(asyncio.CancelledError):
                await first_task
            # The standby takes over, is sent each message from then on, and dispatches.
            await until(lambda: second.led_queues() == {"q"})
            await until(lambda: second.follower is not None and not second.follower.paced)
            await append(jetstream_log, submit("j2", at=3.0))
            await until(
                lambda: (
                    watcher.state.jobs.get("j2") is not None
                    and watcher.state.jobs["j2"].status is JobStatus.SCHEDULED
                )
            )
    finally:
        first_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first_task
    assert folded == sorted(set(folded)) and folded[-1] > last
    await watcher.stop()
