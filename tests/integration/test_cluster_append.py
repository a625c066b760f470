"""A 3-node JetStream cluster: kill -9 of the stream leader while appending.

Appends are retried with the same msg id (and the same expectation on fenced
subjects) until acknowledged, as services do; the stream must end up with every
append exactly once, in order, and a live ordered reader must see the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from quartermaster.bus import JetStreamLog, KvLease, LogEntry
from quartermaster.bus.consumer import ConsumedMessage, DurableConsumer
from quartermaster.bus.errors import BusError, TransientBusError
from quartermaster.bus.jetstream import MSG_ID
from quartermaster.embedded.nats_cluster import NatsCluster, wait_for_jetstream

APPENDS = 600
KILL_AT = 200


@pytest.fixture
async def clustered_log(nats_cluster: NatsCluster) -> AsyncIterator[JetStreamLog]:
    await wait_for_jetstream(nats_cluster.url)
    log = await _connect(nats_cluster.url)
    try:
        yield log
    finally:
        await log.close()


async def _connect(url: str) -> JetStreamLog:
    deadline = time.monotonic() + 20
    while True:  # the meta leader may still be settling after the first election
        try:
            return await JetStreamLog.connect(
                url, "CL", "cl", replicas=3, timeout_s=2.0, connection_name="test-cluster"
            )
        except TransientBusError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _append_until_acked(log: JetStreamLog, i: int, fenced_expect: int | None) -> int:
    """One append, retried with the same msg id (and expectation) until it is acked."""
    subject = "cl.fenced" if fenced_expect is not None else "cl.plain"
    while True:
        try:
            return await log.append(
                subject,
                f"event {i}".encode(),
                msg_id=f"m{i}",
                expected_last_subject_seq=fenced_expect,
            )
        except TransientBusError:
            await asyncio.sleep(0.1)


async def _leader_of(log: JetStreamLog, stream: str) -> str:
    while True:
        with contextlib.suppress(Exception):
            info = await log.js.stream_info(stream)
            if info.cluster is not None and info.cluster.leader:
                return str(info.cluster.leader)
        await asyncio.sleep(0.1)


async def _read_all(log: JetStreamLog, until: int, tries: int = 5) -> list[LogEntry]:
    """Every entry up to `until`. A read that fails transiently is tried again, as
    LogFollower does: right after a node's restart the cluster may not answer a
    consumer create within its timeout (seen once in a full CI run; this file also
    failed once in three runs of the code before it under two busy loops)."""
    read: list[LogEntry] = []
    for attempt in range(1, tries + 1):
        try:
            async with contextlib.aclosing(log.read(1, until)) as entries:
                read = [entry async for entry in entries]
        except TransientBusError:
            if attempt == tries:
                raise
        else:
            # A read that ends short of `until` is made again: right after the restart,
            # the consumer's replica once said it was drained one message short of the
            # acked end (m599 missing from the read, 1 in ~10 full runs; `read` now asks
            # the stream for the next message before it ends there); a lost append stays
            # short on every try and fails the test.
            if (read and read[-1].seq >= until) or attempt == tries:
                return read
        await asyncio.sleep(0.5)
    return read


async def test_kill_9_of_the_stream_leader_loses_and_duplicates_no_append(
    nats_cluster: NatsCluster, clustered_log: JetStreamLog
) -> None:
    log = clustered_log
    seen: list[LogEntry] = []

    async def follow() -> None:
        while True:  # as LogFollower does: a reader that dies is resumed after the last seq
            try:
                async for entry in log.read(from_seq=(seen[-1].seq + 1) if seen else 1):
                    seen.append(entry)
            except BusError:
                await asyncio.sleep(0.2)

    reader = asyncio.create_task(follow())
    killed = None
    last_fenced = 0
    acked = 0  # the highest seq acked: everything up to it must be read back
    began = time.monotonic()
    leader_gone_for = 0.0
    for i in range(APPENDS):
        if i == KILL_AT:
            leader = await _leader_of(log, "CL")
            killed = nats_cluster.index_of(leader)
            nats_cluster.kill(killed)
            killed_at = time.monotonic()
        fenced = i % 2 == 1
        seq = await _append_until_acked(log, i, last_fenced if fenced else None)
        acked = max(acked, seq)
        if fenced:
            last_fenced = seq
        if i == KILL_AT:
            leader_gone_for = time.monotonic() - killed_at
    elapsed = time.monotonic() - began
    assert killed is not None
    new_leader = await _leader_of(log, "CL")
    nats_cluster.start_node(killed)  # the operator's supervisor restarts it
    await _leader_of(log, "CL")  # the stream has a leader again: its info is current

    # At least up to the highest ack: right after the restart, the stream's info has once
    # come back one message short (CI), which ended the read before the last append.
    last = max(acked, await log.last_seq())
    stored = await _read_all(log, last)
    ids = [entry.headers.get(MSG_ID) for entry in stored]
    assert sorted(ids, key=lambda m: int(str(m)[1:])) == [f"m{i}" for i in range(APPENDS)]
    assert len(set(ids)) == APPENDS, "a retried append was stored twice"
    assert [entry.seq for entry in stored] == list(range(1, APPENDS + 1))

    deadline = time.monotonic() + 30
    while len(seen) < APPENDS and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    reader.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reader
    assert [entry.seq for entry in seen] == list(range(1, APPENDS + 1)), "reader gap or repeat"
    print(
        f"\n{APPENDS} appends in {elapsed:.2f}s; leader {leader} killed, {new_leader} took "
        f"over; the append at the kill waited {leader_gone_for:.2f}s"
    )


async def test_lease_bucket_has_the_streams_replicas(clustered_log: JetStreamLog) -> None:
    leases = await KvLease.open(clustered_log, "CL_LEASES", max_ttl_s=60, replicas=3)
    info = await clustered_log.js.stream_info("KV_CL_LEASES")
    assert info.config.num_replicas == 3
    assert await leases.acquire("q", "replica-a", ttl_s=5)
    assert await leases.holder("q") == "replica-a"


async def test_a_durable_consumer_delivers_everything_across_a_leader_kill(
    nats_cluster: NatsCluster, clustered_log: JetStreamLog
) -> None:
    log = clustered_log
    for i in range(200):
        await _append_until_acked(log, i, None)
    consumer = DurableConsumer(log, "cl-worker", "cl.plain", ack_wait_s=2.0)
    acked: set[int] = set()
    redelivered_after_ack: list[int] = []

    async def drain(limit: int) -> None:
        while len(acked) < limit:
            try:
                batch = await consumer.fetch(25, timeout=1.0)
            except TransientBusError:
                await asyncio.sleep(0.2)
                continue
            for msg in batch:
                if msg.seq in acked:
                    redelivered_after_ack.append(msg.seq)
                    await _settle(msg)
                    continue
                if await _settle(msg):
                    acked.add(msg.seq)

    await drain(100)
    nats_cluster.kill(nats_cluster.index_of(await _leader_of(log, "CL")))
    await asyncio.wait_for(drain(200), timeout=60)

    assert len(acked) == 200  # every message delivered and acknowledged
    assert not redelivered_after_ack, "a message acknowledged (ack_sync) came back"
    await consumer.close()


async def _settle(msg: ConsumedMessage) -> bool:
    """ack_sync; False when the ack's answer was lost (the message may come again)."""
    try:
        await msg.ack_sync(timeout_s=2.0)
    except TransientBusError:
        return False
    return True
