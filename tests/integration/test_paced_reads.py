"""Paced reads of the log: batched direct gets, and a follower that reads in batches."""

from __future__ import annotations

import asyncio

import pytest

from quartermaster import events as ev
from quartermaster.bus import JetStreamLog
from quartermaster.eventlog import LogFollower, encode_batch, subjects

UNIT = "ml.g5.xlarge"


def submit(job_id: str) -> ev.JobSubmitted:
    return ev.JobSubmitted(
        at=2.0, job_id=job_id, job_name=job_id, job_queue="q", quota_share="A", instance_type=UNIT
    )


async def append(log: JetStreamLog, job_id: str, headers: dict[str, str] | None = None) -> int:
    data = encode_batch([submit(job_id)])
    return await log.append(subjects.requests(log.prefix), data, msg_id=job_id, headers=headers)


async def test_a_batched_read_returns_what_is_stored_from_a_seq_in_order(
    jetstream_log: JetStreamLog,
) -> None:
    seqs = [await append(jetstream_log, f"j{i}", {"traceparent": f"t{i}"}) for i in range(5)]
    whole = await jetstream_log.read_stored(seqs[0])
    assert [entry.seq for entry in whole] == seqs
    assert [entry.num_pending for entry in whole] == [4, 3, 2, 1, 0]
    assert {entry.subject for entry in whole} == {subjects.requests(jetstream_log.prefix)}
    assert whole[2].data == encode_batch([submit("j2")])
    # The message's own headers come back; what the direct get adds to them does not.
    assert dict(whole[2].headers) == {"traceparent": "t2", "Nats-Msg-Id": "j2"}

    part = await jetstream_log.read_stored(seqs[1], limit=2)
    assert [entry.seq for entry in part] == seqs[1:3]
    assert part[-1].num_pending == 2  # more is stored than the read took
    assert await jetstream_log.read_stored(seqs[-1] + 1) == []  # nothing stored yet


async def test_a_paced_follower_reads_at_its_interval_or_when_waited_on(
    jetstream_log: JetStreamLog,
) -> None:
    backlog = [await append(jetstream_log, f"b{i}") for i in range(3)]
    follower = LogFollower(jetstream_log)
    follower.pace(60.0)  # one read at start, the next a minute on unless waited on
    heard: list[int] = []
    follower.listen(lambda seq, subject, events: heard.append(seq))
    await follower.start()
    try:
        await follower.wait_for(backlog[-1], timeout=5)
        newer = await append(jetstream_log, "n1")
        await asyncio.sleep(0.5)
        assert follower.seq == backlog[-1]  # not sent: paced
        assert not follower.pushed_current  # so `fresh` reads to the head
        assert await follower.fresh(timeout=5) == newer
        assert "n1" in follower.state.jobs

        follower.pace(None)  # sent each message from now on, without being waited on
        assert not follower.paced
        sent = await append(jetstream_log, "s1")
        for _ in range(100):
            if follower.seq >= sent:
                break
            await asyncio.sleep(0.05)
        assert follower.seq == sent and "s1" in follower.state.jobs
    finally:
        await follower.stop()
    assert heard == [*backlog, newer, sent]  # each message once, in order


async def test_a_paced_follower_takes_a_backlog_longer_than_one_read(
    jetstream_log: JetStreamLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    import quartermaster.eventlog.follower as follower_module

    monkeypatch.setattr(follower_module, "PACED_BATCH", 4)
    seqs = [await append(jetstream_log, f"j{i}") for i in range(10)]
    reads: list[int] = []
    read_stored = jetstream_log.read_stored

    async def counted(from_seq: int, limit: int = 1000) -> list:  # type: ignore[type-arg]
        batch = await read_stored(from_seq, limit)
        reads.append(len(batch))
        return batch

    monkeypatch.setattr(jetstream_log, "read_stored", counted)
    follower = LogFollower(jetstream_log)
    follower.pace(60.0)
    await follower.start()
    try:
        for _ in range(100):  # no wait_for: the reads go on while more is stored
            if follower.seq >= seqs[-1]:
                break
            await asyncio.sleep(0.05)
        assert follower.seq == seqs[-1] and len(follower.state.jobs) == 10
        assert reads[:3] == [4, 4, 2]
    finally:
        await follower.stop()


async def test_a_share_of_a_fold_cannot_pace_its_reads(jetstream_log: JetStreamLog) -> None:
    with pytest.raises(RuntimeError, match="share"):
        LogFollower(jetstream_log).share().pace(1.0)
