"""Messages handed over in the connection's read loop (`quartermaster.bus.inline`),
against a real nats-server: in order, none kept, a failing handler drops only its
message, and the two hot paths (publish acks, the ordered reader) use it.
"""

from __future__ import annotations

import asyncio

import nats
from nats.aio.msg import Msg

from quartermaster.bus import JetStreamLog
from quartermaster.bus.inline import subscribe_inline
from quartermaster.embedded import EmbeddedNats


async def test_messages_reach_the_handler_in_order_inside_the_read_loop(
    nats_server: EmbeddedNats,
) -> None:
    # given
    nc = await nats.connect(nats_server.url)
    seen: list[tuple[bytes, str | None]] = []

    def handler(msg: Msg) -> None:
        task = asyncio.current_task()
        seen.append((msg.data, task.get_name() if task is not None else None))

    reading = {t.get_name() for t in asyncio.all_tasks()}
    sub = await subscribe_inline(nc, "inline.order", handler)
    try:
        # when
        for i in range(200):
            await nc.publish("inline.order", str(i).encode())
        await nc.flush()
        while len(seen) < 200:
            await asyncio.sleep(0.01)
        # then: in order, each in a task nats-py had before the subscription (its read
        # loop), none in a task of the subscription's own; nothing left pending
        assert [data for data, _ in seen] == [str(i).encode() for i in range(200)]
        assert {name for _, name in seen} <= reading
        assert sub.pending_msgs == 0
        assert sub.pending_bytes == 0
    finally:
        await sub.unsubscribe()
        await nc.close()


async def test_a_failing_handler_drops_its_message_and_the_connection_goes_on(
    nats_server: EmbeddedNats,
) -> None:
    nc = await nats.connect(nats_server.url)
    seen: list[bytes] = []

    def handler(msg: Msg) -> None:
        if msg.data == b"bad":
            raise ValueError("cannot take it")
        seen.append(msg.data)

    sub = await subscribe_inline(nc, "inline.fail", handler)
    try:
        for data in (b"a", b"bad", b"b"):
            await nc.publish("inline.fail", data)
        await nc.flush()
        while len(seen) < 2:
            await asyncio.sleep(0.01)
        assert seen == [b"a", b"b"]
        assert nc.is_connected
    finally:
        await sub.unsubscribe()
        await nc.close()


async def test_appends_and_reads_go_through_read_loop_hand_overs(
    jetstream_log: JetStreamLog,
) -> None:
    """The log's acks and its ordered reader take no subscription task: the one
    subscription of the connection that has one is nats-py's own request inbox."""
    subject = f"{jetstream_log.prefix}.jobs"
    seqs = [await jetstream_log.append(subject, f"e{i}".encode()) for i in range(5)]
    async with asyncio.timeout(10):
        entries = jetstream_log.read(1)
        got = [await anext(entries) for _ in range(5)]
        nc = jetstream_log.nc
        subs = list(nc._subs.values())
        tasked = [sub.subject for sub in subs if sub._wait_for_msgs_task is not None]
        await entries.aclose()
    assert [e.seq for e in got] == seqs
    assert [e.data for e in got] == [f"e{i}".encode() for i in range(5)]
    assert len(subs) == 3  # the acks, the reader, nats-py's request inbox
    assert tasked == [f"{bytes(nc._resp_sub_prefix).decode()}*"]


class _Stalled(asyncio.Queue[asyncio.Future[None]]):
    """A flush queue whose flusher is never woken: what is queued stays queued."""

    def put_nowait(self, item: asyncio.Future[None]) -> None:
        pass

    async def put(self, item: asyncio.Future[None]) -> None:
        pass


async def test_appends_are_written_at_once_not_at_the_flushers_next_turn(
    jetstream_log: JetStreamLog,
) -> None:
    """With nats-py's flusher never woken, single appends and a batch are still stored
    and acked (`inline.write_now`); a publish left to the flusher is not."""
    subject = f"{jetstream_log.prefix}.jobs"
    nc = jetstream_log.nc
    flush_queue = nc._flush_queue
    nc._flush_queue = _Stalled()
    try:
        async with asyncio.timeout(10):
            first = await jetstream_log.append(subject, b"one")
            batch = await jetstream_log.append_batch(
                [(subject, f"b{i}".encode(), None) for i in range(3)]
            )
        assert batch == [first + 1, first + 2, first + 3]
        left = await jetstream_log._acks.publish(subject, b"queued", None, now=False)
        await asyncio.sleep(0.3)
        assert not left.done()  # still in nats-py's queue, for the flusher
    finally:
        nc._flush_queue = flush_queue
    await nc.flush()
    async with asyncio.timeout(10):
        assert (await left).seq == first + 4
