"""The projector on a real JetStream log: follow, restart, read-your-writes, poison."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from quartermaster.bus import JetStreamLog
from quartermaster.store import (
    PositionTimeoutError,
    ProjectionAheadOfLogError,
    Projector,
    ReadModel,
)
from quartermaster.testing.builders import a_job

from .histories import append_all, seed_history
from .tables import assert_tables_match


@contextlib.asynccontextmanager
async def running(
    projector: Projector, event_log: JetStreamLog
) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(projector.run(event_log, retry_delay=0.05))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def table_rows(pool: Any, query: str) -> list[tuple[Any, ...]]:
    async with pool.acquire() as conn:
        return [tuple(r) for r in await conn.fetch(query)]


async def test_the_projector_follows_the_log_and_resumes_where_it_stopped(
    jetstream_log: JetStreamLog, pg_pool: Any, schema_name: str
) -> None:
    history = seed_history()
    first = list(history.messages)
    last = await append_all(jetstream_log, first)
    projector = Projector(pg_pool, schema_name)
    async with running(projector, jetstream_log):
        await projector.wait_for(last, timeout=20)
        await assert_tables_match(pg_pool, schema_name, history.w.state)
    jobs_before = dict(
        await table_rows(pg_pool, f"SELECT job_id, updated_seq FROM {schema_name}.jobs")
    )

    # While it is down the log grows; the new jobs need what it folded before.
    history.submit(a_job(name="after", priority=8).in_share("QS1"))
    history.pass_()
    history.w.set_priority("huge", 0)
    history.cut()
    history.pass_()
    last = await append_all(jetstream_log, history.messages[len(first) :])

    restarted = Projector(pg_pool, schema_name)
    async with running(restarted, jetstream_log):
        await restarted.wait_for(last, timeout=20)
        await assert_tables_match(pg_pool, schema_name, history.w.state)
    assert restarted.seq == last
    audit = await table_rows(
        pg_pool, f"SELECT count(*), count(DISTINCT (seq, idx)) FROM {schema_name}.audit"
    )
    assert audit == [(len(history.w.log), len(history.w.log))]
    jobs_after = dict(
        await table_rows(pg_pool, f"SELECT job_id, updated_seq FROM {schema_name}.jobs")
    )
    untouched = {"warm1", "warm2", "flaky", "doomed"}  # no event named them since
    assert {j: jobs_after[j] for j in untouched} == {j: jobs_before[j] for j in untouched}
    assert jobs_after["after"] > len(first)


async def test_a_reader_waits_for_its_write_to_be_projected(
    jetstream_log: JetStreamLog, pg_pool: Any, schema_name: str
) -> None:
    history = seed_history()
    projector = Projector(pg_pool, schema_name)
    await projector.prepare()
    read = ReadModel(pg_pool, schema_name)
    try:
        async with running(projector, jetstream_log):
            first = await append_all(jetstream_log, history.messages[:5])
            assert await read.wait_for(first, timeout=20) >= first
            waiting = asyncio.create_task(read.wait_for(len(history.messages), timeout=20))
            await asyncio.sleep(0.05)
            assert not waiting.done()
            last = await append_all(jetstream_log, history.messages[5:])
            assert await waiting >= last
            assert await read.position() == last
            assert (await read.describe_job("huge")) is not None  # read after the wait: there
            with pytest.raises(PositionTimeoutError):
                await read.wait_for(last + 1, timeout=0.3)
            with pytest.raises(TimeoutError):  # a PositionTimeoutError is a TimeoutError
                await projector.wait_for(last + 1, timeout=0.1)
    finally:
        await read.close()


async def test_an_undecodable_message_is_skipped(
    jetstream_log: JetStreamLog, pg_pool: Any, schema_name: str
) -> None:
    history = seed_history()
    await append_all(jetstream_log, history.messages[:3])
    poison = await jetstream_log.append(f"{jetstream_log.prefix}.requests", b"\xc1 not msgpack")
    last = await append_all(jetstream_log, history.messages[3:])
    projector = Projector(pg_pool, schema_name)
    async with running(projector, jetstream_log):
        await projector.wait_for(last, timeout=20)
    await assert_tables_match(pg_pool, schema_name, history.w.state)
    rows = await table_rows(
        pg_pool, f"SELECT count(*) FROM {schema_name}.audit WHERE seq = {poison}"
    )
    assert rows == [(0,)]


async def test_a_projection_ahead_of_its_log_refuses_to_run(
    jetstream_log: JetStreamLog, pg_pool: Any, schema_name: str
) -> None:
    history = seed_history()
    projector = Projector(pg_pool, schema_name)
    await projector.apply_many(history.batches())  # projected from another log
    with pytest.raises(ProjectionAheadOfLogError):
        await asyncio.wait_for(Projector(pg_pool, schema_name).run(jetstream_log), 20)
