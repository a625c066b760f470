"""The projector fed by a fold the process runs anyway (`Projector.run(feed=...)`), on a
real JetStream log and Postgres: a gap behind the fold is read from the log, a fold
behind the projection changes nothing twice, and its listener leaves with it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from quartermaster.bus import JetStreamLog
from quartermaster.eventlog import LogFollower
from quartermaster.store import Projector
from quartermaster.testing.builders import a_job

from .histories import append_all, seed_history
from .tables import assert_tables_match


@contextlib.asynccontextmanager
async def fed(
    projector: Projector, event_log: JetStreamLog, fold: LogFollower
) -> AsyncIterator[list[LogFollower]]:
    shares: list[LogFollower] = []

    def share() -> LogFollower:
        shares.append(fold.share())
        return shares[-1]

    task = asyncio.create_task(projector.run(event_log, retry_delay=0.05, feed=share))
    try:
        yield shares
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def count(pool: Any, query: str) -> int:
    async with pool.acquire() as conn:
        return int(await conn.fetchval(query))


async def test_a_fed_projector_reads_its_gap_then_takes_the_fold_s_messages(
    jetstream_log: JetStreamLog, pg_pool: Any, schema_name: str
) -> None:
    history = seed_history()
    first = list(history.messages)
    gap = await append_all(jetstream_log, first)
    fold = LogFollower(jetstream_log)
    await fold.start()
    try:
        await fold.wait_for(gap)  # the fold is ahead: the projector reads up to it
        projector = Projector(pg_pool, schema_name)
        heard: list[int] = []
        fold.share().listen(lambda seq, subject, events: heard.append(seq))
        async with fed(projector, jetstream_log, fold) as shares:
            await projector.wait_for(gap, timeout=20)
            await assert_tables_match(pg_pool, schema_name, history.w.state)
            history.submit(a_job(name="after", priority=8).in_share("QS1"))
            history.pass_()
            history.cut()
            last = await append_all(jetstream_log, history.messages[len(first) :])
            await projector.wait_for(last, timeout=20)
            await assert_tables_match(pg_pool, schema_name, history.w.state)
            assert [s.shared for s in shares] == [True]
        assert heard[-1] == last  # the fold went on feeding its other listener
        audit = f"SELECT count(*) FROM {schema_name}.audit"
        assert await count(pg_pool, audit) == len(history.w.log)
        history.submit(a_job(name="unseen").in_share("QS1"))
        history.cut()
        after = await append_all(jetstream_log, history.messages[-1:])
        await fold.wait_for(after)
        assert projector.seq == last  # its listener left with it: nothing more is written
        assert await projector.position() == last
    finally:
        await fold.stop()


async def test_a_fold_behind_the_projection_writes_nothing_twice(
    jetstream_log: JetStreamLog, pg_pool: Any, schema_name: str
) -> None:
    history = seed_history()
    last = await append_all(jetstream_log, list(history.messages))
    earlier = Projector(pg_pool, schema_name)
    for_earlier = LogFollower(jetstream_log)
    await for_earlier.start()
    async with fed(earlier, jetstream_log, for_earlier):
        await earlier.wait_for(last, timeout=20)
    await for_earlier.stop()
    audit = f"SELECT count(*) FROM {schema_name}.audit"
    audited = await count(pg_pool, audit)

    restarted = Projector(pg_pool, schema_name)  # at `last`; a new fold starts at 0
    fold = LogFollower(jetstream_log)
    try:
        async with fed(restarted, jetstream_log, fold):
            await restarted.wait_for(last, timeout=20)
            await fold.start()
            await fold.wait_for(last)
            history.submit(a_job(name="after").in_share("QS1"))
            history.cut()
            newest = await append_all(jetstream_log, history.messages[-1:])
            await restarted.wait_for(newest, timeout=20)
            await assert_tables_match(pg_pool, schema_name, history.w.state)
        assert await count(pg_pool, audit) == audited + len(history.messages[-1][1])
    finally:
        await fold.stop()


async def test_messages_arriving_within_the_interval_share_one_transaction(
    jetstream_log: JetStreamLog, pg_pool: Any, schema_name: str
) -> None:
    history = seed_history()
    first = await append_all(jetstream_log, history.messages[:1])
    fold = LogFollower(jetstream_log)
    await fold.start()
    projector = Projector(pg_pool, schema_name, interval=5.0)
    try:
        async with fed(projector, jetstream_log, fold):
            await projector.wait_for(first, timeout=20)
            assert projector.transactions == 1  # idle: the first message alone
            last = await append_all(jetstream_log, history.messages[1:])
            await projector.wait_for(last, timeout=20)
            assert projector.transactions == 2  # the rest, within 5 s of it: one more
            await assert_tables_match(pg_pool, schema_name, history.w.state)
    finally:
        await fold.stop()
