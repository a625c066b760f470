"""The scheduler's snapshots in a real JetStream object store: many chunks, old formats."""

from __future__ import annotations

import logging

import msgspec
import pytest

from qm_scheduler.snapshots import SnapshotStore
from quartermaster import events as ev
from quartermaster.bus import JetStreamLog
from quartermaster.core import State, decide, fold
from quartermaster.core.snapshot import take
from quartermaster.testing.invariants import snapshot as canonical

UNIT = "ml.g5.xlarge"


def a_state(jobs: int) -> State:
    state = State()
    for event in (
        ev.ServiceEnvironmentCreated(
            at=1.0, name="env", capacity_limits=(ev.CapacityLimit(UNIT, 50),)
        ),
        ev.SchedulingPolicyCreated(at=1.0, name="fifo"),
        ev.JobQueueCreated(at=1.0, name="q", service_environment="env", scheduling_policy="fifo"),
        ev.QuotaShareCreated(
            at=1.0,
            job_queue="q",
            name="A",
            capacity_limits=(ev.CapacityLimit(UNIT, 50),),
            strategy=ev.SharingStrategy.LEND_AND_BORROW,
        ),
    ):
        fold(state, event)
    for i in range(50):
        fold(state, ev.HostRegistered(at=1.0, host_id=f"h{i:02d}", instance_type=UNIT))
    for j in range(jobs):
        fold(
            state,
            ev.JobSubmitted(
                at=2 + j * 1e-3,
                job_id=f"j{j:06d}",
                job_name="snap",
                job_queue="q",
                quota_share="A",
                instance_type=UNIT,
                scheduling_priority=j % 7,
            ),
        )
    for decision in decide(state):
        fold(state, decision)
    return state


async def test_a_snapshot_of_many_chunks_restores_the_same_state(
    jetstream_log: JetStreamLog,
) -> None:
    state = a_state(20_000)
    store = await SnapshotStore.open(jetstream_log, f"snap-{jetstream_log.stream}")
    data = take(state, seq=1234, lean=True)
    assert len(data) > 1 << 20, "the test must cross many 128 KB chunks"
    await store.save(data)
    restored = await store.load_state()
    assert restored is not None
    got, seq = restored
    assert seq == 1234
    assert all(job.payload == "" for job in got.jobs.values()), "a lean snapshot"
    for job in got.jobs.values():
        job.payload = state.jobs[job.job_id].payload
    assert canonical(got) == canonical(state)
    assert decide(got) == decide(state)


async def test_a_snapshot_in_an_older_format_is_ignored_with_a_log_line(
    jetstream_log: JetStreamLog, caplog: pytest.LogCaptureFixture
) -> None:
    store = await SnapshotStore.open(jetstream_log, f"old-{jetstream_log.stream}")
    await store.save(msgspec.msgpack.encode({"format": 1, "seq": 7, "jobs": []}))
    with caplog.at_level(logging.WARNING, logger="qm_scheduler.snapshots"):
        assert await store.load_state() is None
    assert "format 1 is not 2" in caplog.text and "replaying the whole log" in caplog.text


async def test_no_snapshot_yet_means_a_replay(jetstream_log: JetStreamLog) -> None:
    store = await SnapshotStore.open(jetstream_log, f"none-{jetstream_log.stream}")
    assert await store.load_state() is None
