"""Scheduler failover between real processes: kill -9 of the leader.

Two `python -m qm_scheduler` replicas lead one queue by lease. The leader is
killed with SIGKILL (no release); a job submitted right after must be dispatched
by the standby, and no job may be dispatched twice. The time from the kill to
that dispatch is printed, never asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from quartermaster.bus import JetStreamLog, KvLease
from quartermaster.embedded.nats_server import EmbeddedNats
from quartermaster.testing.failover import (
    DispatchWatch,
    SchedulerReplica,
    failover_once,
    scheduler_env,
    seed,
    submit,
)

KILLS = 2


@pytest.fixture
async def replicas(
    nats_server: EmbeddedNats, jetstream_log: JetStreamLog, tmp_path: Path
) -> AsyncIterator[list[SchedulerReplica]]:
    env = scheduler_env(
        nats_server.url, jetstream_log.stream, jetstream_log.prefix, jetstream_log.stream
    )
    started = [SchedulerReplica(name, env, tmp_path / f"{name}.log") for name in ("sa", "sb")]
    try:
        for replica in started:
            replica.start()
        yield started
    finally:
        for replica in started:
            replica.stop()


async def test_standby_dispatches_after_kill_9_of_the_leader_and_nothing_twice(
    jetstream_log: JetStreamLog, replicas: list[SchedulerReplica]
) -> None:
    log = jetstream_log
    await seed(log, hosts=KILLS + 2)
    watch = DispatchWatch(log)
    await watch.follower.start()
    leases = await KvLease.open(log, f"{log.stream}-leases", max_ttl_s=3600)
    try:
        await submit(log, "warm-up", at=2)
        await watch.until_dispatched("warm-up", timeout_s=60)
        await asyncio.sleep(1.0)  # both replicas up: one leads, the other watches

        times = []
        for kill in range(KILLS):
            times.append(
                await failover_once(log, leases, replicas, watch, f"after-kill-{kill}", at=3 + kill)
            )
            await asyncio.sleep(2.0)  # the restarted replica is a standby again

        await watch.follower.catch_up()
        assert set(watch.dispatches) == {"warm-up", *(f"after-kill-{k}" for k in range(KILLS))}
        assert max(watch.dispatches.values()) == 1, f"dispatched twice: {watch.dispatches}"
        print("\nkill -9 of the leader -> next dispatch: " + ", ".join(f"{t:.2f}s" for t in times))
    finally:
        with contextlib.suppress(Exception):
            await log.js.delete_key_value(f"{log.stream}-leases")
        await watch.follower.stop()
