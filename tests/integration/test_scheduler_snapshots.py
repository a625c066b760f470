"""The scheduler's snapshots in a real JetStream object store: many chunks, old formats,
a store that answers late (a fresh cluster) and one whose snapshot lost a chunk."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from qm_scheduler.snapshots import SnapshotStore
from quartermaster import events as ev
from quartermaster.bus import JetStreamLog
from quartermaster.core import State, decide, fold
from quartermaster.core.snapshot import take
from quartermaster.embedded.errors import EmbeddedServerError
from quartermaster.embedded.nats_server import EmbeddedNats
from quartermaster.testing.invariants import snapshot as canonical
from quartermaster.testing.servers import unavailable

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


@pytest.fixture
async def pausable_log(tmp_path: Path) -> AsyncIterator[tuple[EmbeddedNats, JetStreamLog]]:
    """A nats-server of this test's own (it is paused) and a log whose requests wait 0.5 s."""
    server = EmbeddedNats(tmp_path / "nats")
    try:
        server.start()
    except EmbeddedServerError as err:
        unavailable("nats-server", err)
    event_log = await JetStreamLog.connect(server.url, "PAUSED", "paused", timeout_s=0.5)
    try:
        yield server, event_log
    finally:
        assert server.pid is not None
        os.kill(server.pid, signal.SIGCONT)
        await event_log.close()
        server.stop()


async def test_a_store_that_does_not_answer_at_first_is_asked_again_not_called_damaged(
    pausable_log: tuple[EmbeddedNats, JetStreamLog], caplog: pytest.LogCaptureFixture
) -> None:
    """A fresh cluster's first read of a just-created bucket timed out and was logged as
    damage (ERROR, traceback); a server that answers late is a wait, an empty store INFO."""
    server, event_log = pausable_log
    store = await SnapshotStore.open(event_log, "fresh-snapshots")
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)  # requests time out, as on an electing cluster
    with caplog.at_level(logging.INFO, logger="qm_scheduler.snapshots"):
        loading = asyncio.create_task(store.load_state())
        await asyncio.sleep(1.5)  # at least two timed-out reads
        os.kill(server.pid, signal.SIGCONT)
        assert await loading is None
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert "not answering yet" in caplog.text
    assert "no snapshot scheduler-PAUSED in fresh-snapshots yet" in caplog.text


async def test_a_store_that_never_answers_is_a_warning_and_a_replay(
    pausable_log: tuple[EmbeddedNats, JetStreamLog], caplog: pytest.LogCaptureFixture
) -> None:
    server, event_log = pausable_log
    store = await SnapshotStore.open(event_log, "stalled-snapshots", patience_s=1.0)
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)
    with caplog.at_level(logging.INFO, logger="qm_scheduler.snapshots"):
        assert await store.load_state() is None
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.levelno for r in warnings] == [logging.WARNING], caplog.text
    assert "did not answer within 1 s" in warnings[0].getMessage()
    assert warnings[0].exc_info is None  # no traceback: nothing is damaged


async def test_a_snapshot_with_a_lost_chunk_is_still_an_error(
    jetstream_log: JetStreamLog, caplog: pytest.LogCaptureFixture
) -> None:
    bucket = f"lost-{jetstream_log.stream}"
    store = await SnapshotStore.open(jetstream_log, bucket)
    data = take(a_state(2_000), seq=99, lean=True)
    assert len(data) > 3 * 128 * 1024, "the test needs an object of several chunks"
    await store.save(data)
    await jetstream_log.js.delete_msg(f"OBJ_{bucket}", 2)  # the second chunk
    with caplog.at_level(logging.INFO, logger="qm_scheduler.snapshots"):
        assert await asyncio.wait_for(store.load_state(), 20) is None
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "unreadable" in errors[0].getMessage(), caplog.text
    assert errors[0].exc_info is not None
