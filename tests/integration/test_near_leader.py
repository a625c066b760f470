"""A service's log connection moves to the node that leads the stream (3-node cluster)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NatsClient

from quartermaster.bus import JetStreamLog
from quartermaster.bus import jetstream as jetstream_module
from quartermaster.bus import reader as reader_module
from quartermaster.bus.errors import TransientBusError
from quartermaster.bus.near_leader import connection_near_leader, server_name, stream_leader
from quartermaster.bus.reader import OrderedReader
from quartermaster.embedded.nats_cluster import NatsCluster, wait_for_jetstream

STREAM = "NL"


@pytest.fixture
async def leader(nats_cluster: NatsCluster) -> AsyncIterator[str]:
    """The stream made at 3 replicas; the name of the node that leads it."""
    await wait_for_jetstream(nats_cluster.url)
    deadline = time.monotonic() + 20
    while True:  # the meta leader may still be settling after the first election
        try:
            log = await JetStreamLog.connect(
                nats_cluster.url, STREAM, "nl", replicas=3, timeout_s=2
            )
            break
        except TransientBusError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
    try:
        while (name := await stream_leader(log.js, STREAM)) is None:
            await asyncio.sleep(0.1)
        yield name
    finally:
        await log.close()


async def _open_on(servers: list[str], **extra: Any) -> NatsClient:
    return await nats.connect(servers, **extra)


def _url_of(nats_cluster: NatsCluster, name: str) -> str:
    return nats_cluster.urls[nats_cluster.index_of(name)]


async def test_a_connection_to_another_node_is_moved_to_the_leader(
    nats_cluster: NatsCluster, leader: str
) -> None:
    elsewhere = next(url for url in nats_cluster.urls if url != _url_of(nats_cluster, leader))
    nc = await nats.connect(elsewhere)
    try:
        assert server_name(nc) != leader
        moved = await connection_near_leader(
            nc, nc.jetstream(), STREAM, nats_cluster.urls, _open_on, 2.0
        )
        assert moved is not None
        try:
            assert server_name(moved) == leader
            assert moved.connected_url is not None
            assert moved.connected_url.netloc == _url_of(nats_cluster, leader).split("://")[1]
        finally:
            await moved.close()
        # Only its own node's URL: nothing reaches the leader, the connection stays.
        assert (
            await connection_near_leader(nc, nc.jetstream(), STREAM, [elsewhere], _open_on, 2.0)
            is None
        )
    finally:
        await nc.close()


async def test_a_connection_on_the_leader_stays(nats_cluster: NatsCluster, leader: str) -> None:
    nc = await nats.connect(_url_of(nats_cluster, leader))
    try:
        assert (
            await connection_near_leader(
                nc, nc.jetstream(), STREAM, nats_cluster.urls, _open_on, 2.0
            )
            is None
        )
    finally:
        await nc.close()


async def test_every_log_connected_near_the_leader_is_on_it_and_appends(
    nats_cluster: NatsCluster, leader: str
) -> None:
    """Whichever node nats-py picks first (it shuffles the URLs), the log ends on the
    leader, and appends and reads there."""
    for i in range(6):
        log = await JetStreamLog.connect(
            nats_cluster.url, STREAM, "nl", near_leader=True, timeout_s=2
        )
        try:
            assert server_name(log.nc) == leader
            seq = await log.append("nl.x", f"m{i}".encode(), msg_id=f"m{i}")
            assert (await log.read_stored(seq, 1))[0].data == f"m{i}".encode()
        finally:
            await log.close()


async def test_an_ordered_readers_consumer_sits_on_the_readers_own_node(
    nats_cluster: NatsCluster, leader: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server places it on any node of the stream; the reader creates it again until
    it is on its own (every node here, the leader and the followers alike)."""
    monkeypatch.setattr(reader_module, "PLACE_TRIES", 40)  # a miss: (2/3)^40
    for url in nats_cluster.urls:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            reader = OrderedReader(nc, js, STREAM, "nl.>", 1)
            await reader.start()
            try:
                assert reader.consumer is not None
                info = await js.consumer_info(STREAM, reader.consumer)
                assert info.cluster is not None and info.cluster.leader == server_name(nc)
                consumers = await js.consumers_info(STREAM)
                assert [c.name for c in consumers] == [reader.consumer]  # the misplaced: gone
            finally:
                await reader.stop()
        finally:
            await nc.close()


async def test_a_connect_cancelled_while_it_looks_for_the_leader_closes_what_it_opened(
    nats_cluster: NatsCluster, leader: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service stopped while it starts leaves no connection behind."""
    looking = asyncio.Event()
    seen: list[NatsClient] = []

    async def never(current: NatsClient, *_: Any) -> NatsClient | None:
        seen.append(current)
        looking.set()
        await asyncio.Event().wait()
        return None

    monkeypatch.setattr(jetstream_module, "connection_near_leader", never)
    connecting = asyncio.create_task(
        JetStreamLog.connect(nats_cluster.url, STREAM, "nl", near_leader=True, timeout_s=2)
    )
    await asyncio.wait_for(looking.wait(), 10)
    connecting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await connecting
    assert seen and seen[0].is_closed
