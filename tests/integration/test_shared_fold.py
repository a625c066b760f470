"""One fold read by several followers (`LogFollower.share`), against a real nats-server."""

from __future__ import annotations

from quartermaster import events as ev
from quartermaster.bus import JetStreamLog
from quartermaster.eventlog import LogFollower, encode_batch, subjects

UNIT = "ml.g5.xlarge"


async def append(log: JetStreamLog, *events: ev.Event) -> int:
    return await log.append(subjects.requests(log.prefix), encode_batch(list(events)))


def submit(job_id: str) -> ev.JobSubmitted:
    return ev.JobSubmitted(
        at=2.0, job_id=job_id, job_name=job_id, job_queue="q", quota_share="A", instance_type=UNIT
    )


async def test_shares_see_one_fold_and_keep_their_own_listeners(
    jetstream_log: JetStreamLog,
) -> None:
    reader = LogFollower(jetstream_log)
    first, second = reader.share(), reader.share()
    heard: dict[str, list[int]] = {"first": [], "second": []}
    first.listen(lambda seq, subject, events: heard["first"].append(seq))
    second.listen(lambda seq, subject, events: heard["second"].append(seq))
    await reader.start()
    await first.start()  # a share reads nothing of its own
    await second.start()
    try:
        one = await append(jetstream_log, submit("j1"))
        await second.wait_for(one)
        assert first.state is second.state is reader.state
        assert "j1" in first.state.jobs and first.seq == second.seq == one
        assert first.last_on_subject[subjects.requests(jetstream_log.prefix)] == one
        await first.stop()  # its listener leaves; the fold and the other share go on
        two = await append(jetstream_log, submit("j2"))
        assert await second.catch_up() == two
        assert "j2" in second.state.jobs
        assert heard == {"first": [one], "second": [one, two]}
        assert first.shared and second.shared and not reader.shared
    finally:
        await second.stop()
        await reader.stop()


async def test_a_share_that_starts_later_folds_nothing_twice(jetstream_log: JetStreamLog) -> None:
    reader = LogFollower(jetstream_log)
    await reader.start()
    try:
        one = await append(jetstream_log, submit("j1"))
        await reader.wait_for(one)
        late = reader.share()
        folded: list[int] = []
        late.listen(lambda seq, subject, events: folded.append(seq))
        await late.start()
        assert late.seq == one and "j1" in late.state.jobs  # the fold so far, at once
        two = await append(jetstream_log, submit("j2"))
        await late.wait_for(two)
        assert folded == [two]
        await late.stop()
    finally:
        await reader.stop()
