"""The JetStream adapters against a real nats-server (one stream per test).

Run with `pytest -p quartermaster.testing.servers tests/integration/test_jetstream_log.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from quartermaster.bus import (
    DurableConsumer,
    FencedAppendError,
    JetStreamLog,
    KvLease,
    LogEntry,
    PermanentBatchAppendError,
    PermanentBusError,
    TransientBusError,
    jetstream,
)
from quartermaster.bus.consumer import DLQ_REASON, DLQ_SEQ, DLQ_SUBJECT
from quartermaster.bus.reader import Delivered, OrderedReader
from quartermaster.embedded import EmbeddedNats


async def read_all(log: JetStreamLog, from_seq: int = 1, **kw: str) -> list[LogEntry]:
    last = await log.last_seq()
    async with contextlib.aclosing(log.read(from_seq, last, **kw)) as entries:
        return [entry async for entry in entries]


def subject(log: JetStreamLog, *tokens: str) -> str:
    return ".".join((log.prefix, *tokens))


# --- append and read -------------------------------------------------------------------


async def test_appended_events_read_back_in_order(jetstream_log: JetStreamLog) -> None:
    log = jetstream_log
    seqs = [
        await log.append(subject(log, "evt", "job"), f"event {i}".encode(), msg_id=f"e{i}")
        for i in range(3)
    ]

    entries = await read_all(log)

    assert seqs == [1, 2, 3]
    assert [(e.seq, e.subject, e.data) for e in entries] == [
        (1, subject(log, "evt", "job"), b"event 0"),
        (2, subject(log, "evt", "job"), b"event 1"),
        (3, subject(log, "evt", "job"), b"event 2"),
    ]
    assert entries[0].headers["Nats-Msg-Id"] == "e0"
    assert await log.last_seq() == 3


async def test_a_repeated_msg_id_returns_the_first_seq_and_stores_once(
    jetstream_log: JetStreamLog,
) -> None:
    log = jetstream_log
    first = await log.append(subject(log, "cmd", "submit"), b"submit A", msg_id="client-token-1")
    again = await log.append(subject(log, "cmd", "submit"), b"submit A", msg_id="client-token-1")

    assert again == first
    assert [e.data for e in await read_all(log)] == [b"submit A"]


async def test_a_stale_writer_is_fenced_and_stores_nothing(jetstream_log: JetStreamLog) -> None:
    log = jetstream_log
    await log.append(subject(log, "evt"), b"genesis", msg_id="g")
    seen_by_both = await log.last_seq()
    await log.append(subject(log, "evt"), b"winner", "w", expected_last_seq=seen_by_both)

    with pytest.raises(FencedAppendError) as fenced:
        await log.append(subject(log, "evt"), b"loser", "l", expected_last_seq=seen_by_both)

    assert fenced.value.expected_last_seq == seen_by_both
    assert fenced.value.actual_last_seq == seen_by_both + 1
    assert [e.data for e in await read_all(log)] == [b"genesis", b"winner"]


async def test_retrying_a_fenced_append_that_went_through_returns_its_seq(
    jetstream_log: JetStreamLog,
) -> None:
    # The server checks the expectation before dedupe; the adapter recognises its own
    # earlier write, so a retry after a lost ack is idempotent, not fenced.
    log = jetstream_log
    first = await log.append(subject(log, "evt"), b"decided", "d-1", expected_last_seq=0)
    retried = await log.append(subject(log, "evt"), b"decided", "d-1", expected_last_seq=0)

    assert retried == first == 1
    assert await log.last_seq() == 1


async def test_expected_last_subject_seq_fences_per_subject(jetstream_log: JetStreamLog) -> None:
    log = jetstream_log
    job_a, job_b = subject(log, "evt", "a"), subject(log, "evt", "b")
    a1 = await log.append(job_a, b"a1", expected_last_subject_seq=0)
    await log.append(job_b, b"b1", expected_last_subject_seq=0)  # other subject: no conflict
    await log.append(job_a, b"a2", expected_last_subject_seq=a1)

    with pytest.raises(FencedAppendError):
        await log.append(job_a, b"stale", expected_last_subject_seq=a1)


# --- batches ---------------------------------------------------------------------------


async def test_a_batch_is_stored_in_list_order(jetstream_log: JetStreamLog) -> None:
    log = jetstream_log
    items = [(subject(log, "evt", str(i % 3)), f"{i}".encode(), f"b{i}") for i in range(500)]

    seqs = await log.append_batch(items)

    assert seqs == list(range(1, 501))
    assert [e.data for e in await read_all(log)] == [data for _, data, _ in items]


async def test_a_repeated_batch_dedupes_to_the_same_seqs(jetstream_log: JetStreamLog) -> None:
    log = jetstream_log
    items = [(subject(log, "evt"), f"{i}".encode(), f"b{i}") for i in range(50)]

    assert await log.append_batch(items) == await log.append_batch(items)
    assert await log.last_seq() == 50


async def test_a_fenced_batch_after_a_foreign_append_stores_nothing(
    jetstream_log: JetStreamLog,
) -> None:
    log = jetstream_log
    await log.append(subject(log, "evt"), b"genesis", "g")
    seen = await log.last_seq()
    await log.append(subject(log, "evt"), b"foreign", "f")  # another writer got in
    items = [(subject(log, "evt"), f"mine {i}".encode(), f"m{i}") for i in range(5)]

    with pytest.raises(PermanentBatchAppendError) as failed:
        await log.append_batch(items, expected_last_seq=seen)

    assert failed.value.seqs == [None] * 5
    assert all(isinstance(e, FencedAppendError) for e in failed.value.errors.values())
    assert [e.data for e in await read_all(log)] == [b"genesis", b"foreign"]


async def test_retrying_a_fenced_batch_that_went_through_returns_its_seqs(
    jetstream_log: JetStreamLog,
) -> None:
    log = jetstream_log
    items = [(subject(log, "evt"), f"{i}".encode(), f"m{i}") for i in range(5)]
    first = await log.append_batch(items, expected_last_seq=0)

    assert await log.append_batch(items, expected_last_seq=0) == first == [1, 2, 3, 4, 5]
    assert await log.last_seq() == 5


async def test_a_fenced_batch_needs_msg_ids(jetstream_log: JetStreamLog) -> None:
    log = jetstream_log
    with pytest.raises(PermanentBusError, match="msg id"):
        await log.append_batch([(subject(log, "evt"), b"x", None)], expected_last_seq=0)
    assert await log.last_seq() == 0


# --- reading ---------------------------------------------------------------------------


async def test_read_catches_up_then_follows_live_appends(jetstream_log: JetStreamLog) -> None:
    log = jetstream_log
    await log.append_batch([(subject(log, "evt"), f"old {i}".encode(), None) for i in range(100)])
    received: list[LogEntry] = []
    caught_up = asyncio.Event()
    all_in = asyncio.Event()

    async def follow() -> None:
        async with contextlib.aclosing(log.read(1)) as entries:
            async for entry in entries:
                received.append(entry)
                if len(received) == 100:
                    caught_up.set()
                if len(received) == 110:
                    all_in.set()

    follower = asyncio.create_task(follow())
    await asyncio.wait_for(caught_up.wait(), 10)
    for i in range(10):
        await log.append(subject(log, "evt"), f"new {i}".encode())
    await asyncio.wait_for(all_in.wait(), 10)
    follower.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await follower

    assert [e.seq for e in received] == list(range(1, 111))
    assert received[-1].data == b"new 9"


async def test_read_from_the_middle_up_to_a_seq(jetstream_log: JetStreamLog) -> None:
    log = jetstream_log
    await log.append_batch([(subject(log, "evt"), f"{i}".encode(), None) for i in range(20)])

    async with contextlib.aclosing(log.read(5, 9)) as entries:
        seqs = [entry.seq async for entry in entries]

    assert seqs == [5, 6, 7, 8, 9]


async def test_a_filtered_read_ends_when_no_match_up_to_until_seq_remains(
    jetstream_log: JetStreamLog,
) -> None:
    log = jetstream_log
    events, commands = subject(log, "evt", "x"), subject(log, "cmd", "x")
    await log.append_batch([(events if i < 5 else commands, b"", None) for i in range(10)])

    found = await asyncio.wait_for(read_all(log, subject_filter=subject(log, "evt", ">")), 5)

    assert [e.seq for e in found] == [1, 2, 3, 4, 5]


async def test_a_large_catch_up_with_a_slow_reader_gets_every_message(
    jetstream_log: JetStreamLog,
) -> None:
    # Enough bytes to pass the server's flow-control window several times while the
    # reader pauses now and then: flow control must be answered, nothing lost.
    log = jetstream_log
    payload = b"x" * 2048
    await log.append_batch([(subject(log, "evt"), payload, None) for _ in range(6000)])

    count = 0
    async with contextlib.aclosing(log.read(1, 6000)) as entries:
        async for entry in entries:
            count += 1
            assert entry.seq == count
            if count % 1000 == 0:
                await asyncio.sleep(0.05)

    assert count == 6000


async def test_a_reader_whose_consumer_vanishes_resumes_without_gaps(
    jetstream_log: JetStreamLog,
) -> None:
    log = jetstream_log
    await log.append_batch([(subject(log, "evt"), f"{i}".encode(), None) for i in range(10)])
    reader = OrderedReader(log.nc, log.js, log.stream, subject(log, ">"), 1, heartbeat_s=0.3)
    await reader.start()
    try:
        seqs = []
        for _ in range(10):
            entry = await reader.next(timeout=2)
            assert entry is not None
            seqs.append(entry.seq)
        assert reader.consumer is not None
        await log.js.delete_consumer(log.stream, reader.consumer)  # e.g. a server restart
        await log.append_batch([(subject(log, "evt"), f"{i}".encode(), None) for i in range(5)])

        while len(seqs) < 15:
            entry = await reader.next(timeout=5)
            assert entry is not None, "the reader did not recover"
            seqs.append(entry.seq)
    finally:
        await reader.stop()

    assert seqs == list(range(1, 16))


# --- the embedded server ---------------------------------------------------------------


async def test_a_restarted_server_on_the_same_store_and_port_keeps_the_log(
    tmp_path: Path,
) -> None:
    first = EmbeddedNats(tmp_path / "nats")
    async with first:
        port = first.port
        log = await JetStreamLog.connect(first.url, stream="KEEP", subjects_prefix="keep")
        await log.append("keep.evt", b"survives", msg_id="s")
        await log.close()

    async with EmbeddedNats(tmp_path / "nats", port=port) as again:
        assert again.url == f"nats://127.0.0.1:{port}"
        log = await JetStreamLog.connect(again.url, stream="KEEP", subjects_prefix="keep")
        try:
            assert [e.data for e in await read_all(log)] == [b"survives"]
        finally:
            await log.close()


# --- durable consumers -----------------------------------------------------------------


async def test_a_nakd_command_comes_back_and_an_acked_one_does_not(
    jetstream_log: JetStreamLog,
) -> None:
    log = jetstream_log
    consumer = DurableConsumer(log, "scheduler", subject(log, "cmd", ">"), ack_wait_s=1.0)
    await log.append(subject(log, "cmd", "submit"), b"retry me")
    await log.append(subject(log, "cmd", "submit"), b"done with me")

    first = await consumer.fetch(10, timeout=2)
    assert [m.data for m in first] == [b"retry me", b"done with me"]
    await first[0].nak()
    await first[1].ack_sync()

    again = await consumer.fetch(10, timeout=2)
    assert [(m.data, m.num_delivered) for m in again] == [(b"retry me", 2)]
    await again[0].ack_sync()

    await asyncio.sleep(1.3)  # past ack_wait: an acked message would be back by now
    assert await consumer.fetch(10, timeout=0.5) == []
    assert await consumer.num_pending() == 0
    await consumer.delete()


async def test_nak_with_delay_holds_the_redelivery_back(jetstream_log: JetStreamLog) -> None:
    log = jetstream_log
    consumer = DurableConsumer(log, "delayed", subject(log, "cmd", ">"))
    await log.append(subject(log, "cmd", "start"), b"busy host")
    (msg,) = await consumer.fetch(1, timeout=2)

    await msg.nak(delay_s=1.0)

    assert await consumer.fetch(1, timeout=0.5) == []
    (back,) = await consumer.fetch(1, timeout=2)
    assert back.seq == msg.seq and back.num_delivered == 2
    await back.ack()


async def test_an_unsettled_command_is_redelivered_after_ack_wait(
    jetstream_log: JetStreamLog,
) -> None:
    log = jetstream_log
    consumer = DurableConsumer(log, "crashy", subject(log, "cmd", ">"), ack_wait_s=1.0)
    await log.append(subject(log, "cmd", "start"), b"worker died")
    (lost,) = await consumer.fetch(1, timeout=2)

    (back,) = await consumer.fetch(1, timeout=3)

    assert back.seq == lost.seq and back.num_delivered == 2
    await back.ack()


async def test_a_message_settles_once(jetstream_log: JetStreamLog) -> None:
    log = jetstream_log
    consumer = DurableConsumer(log, "once", subject(log, "cmd", ">"))
    await log.append(subject(log, "cmd", "x"), b"x")
    (msg,) = await consumer.fetch(1, timeout=2)
    await msg.in_progress()
    await msg.ack()

    with pytest.raises(PermanentBusError, match="already settled"):
        await msg.nak()


async def test_a_poison_command_goes_to_the_dead_letter_subject(
    jetstream_log: JetStreamLog,
) -> None:
    log = jetstream_log
    consumer = DurableConsumer(log, "worker", subject(log, "cmd", ">"), ack_wait_s=1.0)
    await log.append(subject(log, "cmd", "submit"), b"\xff not msgpack")
    (poison,) = await consumer.fetch(1, timeout=2)

    dlq_seq = await consumer.dead_letter(poison, "cannot decode:\nbad tag")

    await asyncio.sleep(1.3)
    assert await consumer.fetch(1, timeout=0.5) == []  # termed: never redelivered
    (dead,) = await read_all(log, subject_filter=subject(log, "dlq", ">"))
    assert dead.seq == dlq_seq
    assert dead.subject == subject(log, "dlq", "cmd", "submit")
    assert dead.data == b"\xff not msgpack"
    assert dead.headers[DLQ_REASON] == "cannot decode: bad tag"
    assert dead.headers[DLQ_SUBJECT] == subject(log, "cmd", "submit")
    assert dead.headers[DLQ_SEQ] == str(poison.seq)


# --- leases ----------------------------------------------------------------------------


async def lease_bucket(log: JetStreamLog) -> str:
    return f"LEASES_{log.stream}"


async def test_only_one_of_many_holders_gets_the_lease(jetstream_log: JetStreamLog) -> None:
    bucket = await lease_bucket(jetstream_log)
    contenders = [await KvLease.open(jetstream_log, bucket, max_ttl_s=60) for _ in range(5)]

    won = await asyncio.gather(
        *(
            lease.acquire("scheduler", f"replica-{i}", ttl_s=30)
            for i, lease in enumerate(contenders)
        )
    )

    assert sorted(won) == [False, False, False, False, True]
    winner = won.index(True)
    assert await contenders[0].holder("scheduler") == f"replica-{winner}"
    assert await contenders[winner].renew("scheduler")
    assert not await contenders[(winner + 1) % 5].renew("scheduler")  # never held it
    await jetstream_log.js.delete_key_value(bucket)


async def test_an_expired_lease_passes_to_another_holder(jetstream_log: JetStreamLog) -> None:
    bucket = await lease_bucket(jetstream_log)
    first = await KvLease.open(jetstream_log, bucket, max_ttl_s=60)
    second = await KvLease.open(jetstream_log, bucket, max_ttl_s=60)
    assert await first.acquire("scheduler", "replica-a", ttl_s=1)
    assert not await second.acquire("scheduler", "replica-b", ttl_s=1)

    await asyncio.sleep(1.5)

    assert await second.acquire("scheduler", "replica-b", ttl_s=5)
    assert not await first.renew("scheduler")  # it lapsed: renewing must not steal it back
    assert await first.holder("scheduler") == "replica-b"
    await jetstream_log.js.delete_key_value(bucket)


async def test_renewing_keeps_a_lease_past_its_ttl(jetstream_log: JetStreamLog) -> None:
    bucket = await lease_bucket(jetstream_log)
    first = await KvLease.open(jetstream_log, bucket, max_ttl_s=60)
    second = await KvLease.open(jetstream_log, bucket, max_ttl_s=60)
    assert await first.acquire("scheduler", "replica-a", ttl_s=1)

    for _ in range(3):
        await asyncio.sleep(0.5)
        assert await first.renew("scheduler")

    assert not await second.acquire("scheduler", "replica-b", ttl_s=1)
    assert await first.release("scheduler")
    assert await second.acquire("scheduler", "replica-b", ttl_s=1)  # released: free at once
    await jetstream_log.js.delete_key_value(bucket)


async def test_a_restarted_holder_takes_its_own_lease_back(jetstream_log: JetStreamLog) -> None:
    bucket = await lease_bucket(jetstream_log)
    before = await KvLease.open(jetstream_log, bucket, max_ttl_s=60)
    assert await before.acquire("scheduler", "replica-a", ttl_s=30)

    after_restart = await KvLease.open(jetstream_log, bucket, max_ttl_s=60)

    assert await after_restart.acquire("scheduler", "replica-a", ttl_s=30)
    assert not await before.renew("scheduler")  # the old handle's revision is stale
    await jetstream_log.js.delete_key_value(bucket)


async def test_a_reader_is_drained_only_once_what_the_server_sent_was_seen(
    jetstream_log: JetStreamLog,
) -> None:
    """The server may have sent everything (nothing pending) while the messages are still
    on their way to the client: a bounded read must not end there (it ended short)."""
    log = jetstream_log
    for i in range(10):
        await log.append(subject(log, "a"), f"m{i}".encode())
    reader = OrderedReader(log.nc, log.js, log.stream, subject(log, ">"), 1)
    await reader.start()
    try:
        for _ in range(100):  # wait until the server has delivered all ten
            info = await log.js.consumer_info(log.stream, reader.consumer)
            if info.num_pending == 0 and info.delivered.stream_seq == 10:
                break
            await asyncio.sleep(0.02)
        assert not await reader.drained(0)  # delivered, not yet seen by the caller
        seen = 0
        while seen < 10:
            entry = await reader.next(timeout=5)
            assert entry is not None
            seen = entry.seq
        assert await reader.drained(seen)
    finally:
        await reader.stop()


def change_delivery(
    monkeypatch: pytest.MonkeyPatch, seq: int, change: Callable[[Delivered], Delivered | None]
) -> None:
    """Readers get `change(delivered)` in place of the delivery of `seq` (None: nothing)."""
    real_next = OrderedReader.next

    async def changed(self: OrderedReader, timeout: float | None) -> Delivered | None:
        delivered = await real_next(self, timeout)
        if delivered is not None and delivered.seq == seq:
            return change(delivered)
        return delivered

    monkeypatch.setattr(OrderedReader, "next", changed)


async def test_a_bounded_read_does_not_end_where_the_consumer_says_so_one_message_early(
    jetstream_log: JetStreamLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after a stream leader change the consumer said nothing was pending one
    message before the end (a kill -9 test's read ended one short of an acked append);
    an unfiltered read asks the stream for the next message before it ends."""
    log = jetstream_log
    for i in range(5):
        await log.append(subject(log, "a"), f"m{i}".encode())
    change_delivery(monkeypatch, 4, lambda d: dataclasses.replace(d, num_pending=0))
    assert [entry.seq for entry in await read_all(log)] == [1, 2, 3, 4, 5]


async def test_a_bounded_read_fails_rather_than_end_short_when_never_sent_the_next(
    jetstream_log: JetStreamLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = jetstream_log
    for i in range(3):
        await log.append(subject(log, "a"), f"m{i}".encode())
    # As if the consumer had skipped seq 3 and said it was drained.
    change_delivery(monkeypatch, 3, lambda _: None)

    async def drained(self: OrderedReader, last_seen: int) -> bool:
        return True

    monkeypatch.setattr(OrderedReader, "drained", drained)
    monkeypatch.setattr(jetstream, "WITHHELD_S", 0.5)
    with pytest.raises(TransientBusError, match="holds seq 3"):
        await asyncio.wait_for(read_all(log), 10)
