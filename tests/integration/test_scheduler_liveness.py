"""Host liveness from the liveness bucket: the scheduler judges losses on heartbeats that
never enter the log, records what it judged on, and the auditor's verify agrees."""

from __future__ import annotations

import asyncio

import pytest
from test_scheduler_service import running, seed, settings, until

from qm_scheduler.service import Scheduler
from quartermaster import events as ev
from quartermaster.audit.stream import read_range
from quartermaster.audit.verify import verify
from quartermaster.bus import JetStreamLog
from quartermaster.bus.liveness import Beat, LivenessWatch, send_beat
from quartermaster.core.model import HostStatus
from quartermaster.eventlog import LogFollower, encode_batch, subjects

TIMEOUT = 10.0


async def tick(log: JetStreamLog, at: float) -> None:
    await log.append(subjects.timers(log.prefix), encode_batch([ev.ClockTicked(at=at)]))


async def test_a_silent_host_is_lost_and_a_beating_one_is_not(jetstream_log: JetStreamLog) -> None:
    await seed(jetstream_log, hosts=2)  # h0 and h1 register at t=1
    await send_beat(jetstream_log.js, jetstream_log.stream, Beat(host_id="h0", at=20.0))
    watcher = LogFollower(jetstream_log)
    await watcher.start()

    def status(host: str) -> HostStatus:
        return watcher.state.hosts[host].status

    scheduler = Scheduler(
        settings("s1", heartbeat_timeout_seconds=TIMEOUT, liveness_grace_seconds=0), jetstream_log
    )
    try:
        async with running(scheduler):
            await until(lambda: scheduler.liveness is not None and scheduler.liveness.ready)
            await tick(jetstream_log, 15.0)  # h1 silent since 1, h0 beat at 20
            await until(lambda: status("h1") is HostStatus.LOST)
            await asyncio.sleep(0.3)  # a pass had its chance to (wrongly) lose h0 too
            assert status("h0") is HostStatus.HEALTHY

            await tick(jetstream_log, 35.0)  # h0's beat at 20 is older than the timeout
            await until(lambda: status("h0") is HostStatus.LOST)
        last = await jetstream_log.last_seq()
        await watcher.wait_for(last)
    finally:
        await watcher.stop()

    envelopes = [e async for e in read_range(jetstream_log)]
    losses = {e.host_id: e for env in envelopes for e in env.events if isinstance(e, ev.HostLost)}
    assert losses["h1"].last_heartbeat_at == 1 and losses["h1"].at == 15.0
    assert losses["h0"].last_heartbeat_at == 20.0 and losses["h0"].at == 35.0
    assert not any(isinstance(e, ev.HostHeartbeat) for env in envelopes for e in env.events)
    report = verify(envelopes)
    assert report.ok, report.differences
    assert report.heartbeat_timeout_seconds == TIMEOUT


async def test_the_watch_ignores_a_beat_claiming_another_host(jetstream_log: JetStreamLog) -> None:
    # Agent h1 may write key h1 only; a value naming h0 there must not keep h0 alive.
    bucket_key = f"$KV.{jetstream_log.stream}_LIVENESS.h1"
    await jetstream_log.js.publish(bucket_key, b'{"host_id":"h0","at":99.0}')
    await send_beat(jetstream_log.js, jetstream_log.stream, Beat(host_id="h2", at=5.0))
    watch = LivenessWatch(jetstream_log.nc, jetstream_log.js, jetstream_log.stream)
    await watch.start()
    try:
        await until(lambda: watch.ready)
        assert watch.last_beat("h2") == 5.0
        assert watch.last_beat("h0") is None
        await send_beat(jetstream_log.js, jetstream_log.stream, Beat(host_id="h2", at=7.0))
        await until(lambda: watch.last_beat("h2") == 7.0)
    finally:
        await watch.stop()


async def test_a_restarted_scheduler_judges_no_loss_before_it_read_the_bucket(
    jetstream_log: JetStreamLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given: a log whose clock is far past h0's registration, and h0 beating in the bucket
    await seed(jetstream_log, hosts=1)
    await tick(jetstream_log, 100.0)
    await send_beat(jetstream_log.js, jetstream_log.stream, Beat(host_id="h0", at=99.0))
    # the bucket reads slowly: a pass that did not wait for it would see h0 silent
    run = LivenessWatch._run

    async def slow_run(self: LivenessWatch) -> None:
        await asyncio.sleep(0.5)
        await run(self)

    monkeypatch.setattr(LivenessWatch, "_run", slow_run)
    scheduler = Scheduler(
        settings("s1", heartbeat_timeout_seconds=TIMEOUT, liveness_grace_seconds=0), jetstream_log
    )
    watcher = LogFollower(jetstream_log)
    await watcher.start()

    def status() -> HostStatus:
        return watcher.state.hosts["h0"].status

    try:
        # when
        async with running(scheduler):
            await until(lambda: scheduler.liveness is not None and scheduler.liveness.ready)
            await asyncio.sleep(0.3)  # passes ran with the bucket read
            # then
            assert status() is HostStatus.HEALTHY
            await tick(jetstream_log, 120.0)  # and silence is still judged afterwards
            await until(lambda: status() is HostStatus.LOST)
    finally:
        await watcher.stop()
    assert scheduler.passes > 0


async def test_a_restarted_stack_loses_no_host_whose_agent_beats_again_within_the_grace(
    jetstream_log: JetStreamLog,
) -> None:
    # given: both hosts last beat at 50, before the stack stopped, and the log's clock
    # jumps past their timeout as it comes back (the warm pool's first tick)
    await seed(jetstream_log, hosts=2)
    for host in ("h0", "h1"):
        await send_beat(jetstream_log.js, jetstream_log.stream, Beat(host_id=host, at=50.0))
    await tick(jetstream_log, 200.0)
    grace = 3.0
    scheduler = Scheduler(
        settings("s1", heartbeat_timeout_seconds=TIMEOUT, liveness_grace_seconds=grace),
        jetstream_log,
    )
    watcher = LogFollower(jetstream_log)
    await watcher.start()

    def status(host: str) -> HostStatus:
        return watcher.state.hosts[host].status

    try:
        async with running(scheduler):
            await until(lambda: scheduler.liveness is not None and scheduler.liveness.ready)
            await asyncio.sleep(0.3)  # passes ran, within the grace
            assert not scheduler.judges_liveness()
            assert status("h0") is status("h1") is HostStatus.HEALTHY
            # h0's agent is back and beats; h1's is not
            await send_beat(jetstream_log.js, jetstream_log.stream, Beat(host_id="h0", at=200.5))
            await tick(jetstream_log, 201.0)
            # then: once the grace is over (a pass is woken for it), only h1 is lost
            await until(lambda: status("h1") is HostStatus.LOST, timeout=grace + 5)
            assert status("h0") is HostStatus.HEALTHY and scheduler.judges_liveness()
    finally:
        await watcher.stop()
