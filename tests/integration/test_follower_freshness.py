"""`LogFollower.fresh()`: no round trip when the server said it had nothing more to push."""

from __future__ import annotations

import pytest

from quartermaster import events as ev
from quartermaster.bus import JetStreamLog
from quartermaster.eventlog import LogFollower, encode_batch, subjects

UNIT = "ml.g5.xlarge"


def submit(job_id: str) -> ev.JobSubmitted:
    return ev.JobSubmitted(
        at=2.0, job_id=job_id, job_name=job_id, job_queue="q", quota_share="A", instance_type=UNIT
    )


async def test_a_follower_pushed_to_the_newest_message_is_fresh_without_asking(
    jetstream_log: JetStreamLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    subject = subjects.requests(jetstream_log.prefix)
    for job_id in ("j1", "j2", "j3"):  # stored before the follower reads: a backlog
        last = await jetstream_log.append(subject, encode_batch([submit(job_id)]))
    follower = LogFollower(jetstream_log)
    assert not follower.pushed_current  # nothing read yet: unknown
    asked: list[int] = []
    last_seq = jetstream_log.last_seq

    async def counted() -> int:
        asked.append(1)
        return await last_seq()

    monkeypatch.setattr(jetstream_log, "last_seq", counted)
    await follower.start()
    try:
        await follower.wait_for(last)
        assert follower.pushed_current  # the last of the backlog said: nothing pending
        assert await follower.fresh() == last
        assert asked == []
        newer = await jetstream_log.append(subject, encode_batch([submit("j4")]))
        await follower.wait_for(newer)
        assert await follower.fresh() == newer and "j4" in follower.state.jobs
        assert asked == []
    finally:
        await follower.stop()
    assert not follower.pushed_current  # its reader is gone: unknown again
    assert await follower.catch_up() == newer  # catch_up always asks
    assert asked == [1]


async def test_a_follower_behind_a_backlog_asks_the_server(jetstream_log: JetStreamLog) -> None:
    subject = subjects.requests(jetstream_log.prefix)
    follower = LogFollower(jetstream_log)
    heard: list[bool] = []  # pushed_current as each message was folded
    follower.listen(lambda seq, subj, events: heard.append(follower.pushed_current))
    for job_id in ("j1", "j2", "j3"):
        last = await jetstream_log.append(subject, encode_batch([submit(job_id)]))
    await follower.start()
    try:
        assert await follower.fresh() == last  # not yet current: a catch_up
        assert heard == [False, False, True]
    finally:
        await follower.stop()
