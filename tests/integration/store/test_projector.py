"""The projector against a real Postgres: its tables always say what the fold says.

Batches are applied directly (no log); `test_follow.py` runs it on JetStream.
"""

from __future__ import annotations

from typing import Any

import pytest

from quartermaster.core import State, fold
from quartermaster.store import (
    InvalidSchemaNameError,
    Projector,
    ReadModel,
    TransientStoreError,
)
from quartermaster.testing.builders import a_job

from .histories import Recording, random_history, seed_history
from .tables import assert_tables_match


async def count(pool: Any, query: str) -> int:
    async with pool.acquire() as conn:
        return int(await conn.fetchval(query))


async def test_the_tables_match_the_fold_after_every_message(
    pg_pool: Any, schema_name: str
) -> None:
    history = seed_history()
    projector = Projector(pg_pool, schema_name)
    replay = State()
    for seq, subject, events in history.batches():
        await projector.apply(seq, subject, events)
        for event in events:
            fold(replay, event)
        await assert_tables_match(pg_pool, schema_name, replay)
    assert await projector.position() == len(history.messages)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
async def test_random_histories_project_exactly(pg_pool: Any, schema_name: str, seed: int) -> None:
    history = random_history(seed, steps=90)
    projector = Projector(pg_pool, schema_name)
    replay = State()
    for seq, subject, events in history.batches():
        await projector.apply(seq, subject, events)
        for event in events:
            fold(replay, event)
        await assert_tables_match(pg_pool, schema_name, replay)


async def test_many_messages_in_one_transaction_give_the_same_tables(
    pg_pool: Any, schema_name: str
) -> None:
    history = random_history(7, steps=90)
    projector = Projector(pg_pool, schema_name)
    batches = history.batches()
    for start in range(0, len(batches), 17):
        await projector.apply_many(batches[start : start + 17])
    await assert_tables_match(pg_pool, schema_name, history.w.state)
    assert await projector.position() == len(batches)


async def test_every_event_is_audited_once_in_log_order(pg_pool: Any, schema_name: str) -> None:
    history = seed_history()
    projector = Projector(pg_pool, schema_name)
    for batch in history.batches():
        await projector.apply(*batch)
    async with pg_pool.acquire() as conn:
        rows = await conn.fetch(f"SELECT seq, idx, subject, type, body FROM {schema_name}.audit")
    expected = [
        (seq, idx, subject, type(event).__struct_config__.tag)
        for seq, subject, events in history.batches()
        for idx, event in enumerate(events)
    ]
    assert sorted((r["seq"], r["idx"], r["subject"], r["type"]) for r in rows) == expected
    assert len(rows) == len(history.w.log)


async def test_a_redelivered_message_changes_nothing(pg_pool: Any, schema_name: str) -> None:
    history = seed_history()
    batches = history.batches()
    projector = Projector(pg_pool, schema_name)
    for batch in batches:
        await projector.apply(*batch)
    async with pg_pool.acquire() as conn:
        before = await conn.fetch(f"SELECT job_id, updated_seq FROM {schema_name}.jobs")
    await projector.apply(*batches[-1])
    await projector.apply(*batches[3])

    # A second projector of the same name folds the same messages but writes nothing.
    again = Projector(pg_pool, schema_name)
    for batch in batches:
        await again.apply(*batch)
    async with pg_pool.acquire() as conn:
        after = await conn.fetch(f"SELECT job_id, updated_seq FROM {schema_name}.jobs")
    assert sorted(map(tuple, after)) == sorted(map(tuple, before))
    assert await count(pg_pool, f"SELECT count(*) FROM {schema_name}.audit") == len(history.w.log)
    assert again.seq == len(batches)

    # ... and goes on from there with the state it folded.
    history.submit(a_job(name="later").in_share("QS2"))
    history.pass_()
    for batch in history.batches(from_message=len(batches)):
        await again.apply(*batch)
    await assert_tables_match(pg_pool, schema_name, history.w.state)


class FlakyPool:
    """Our own stand-in: the real pool, except the next `failures` acquires fail."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.failures = 0

    def acquire(self) -> Any:
        if self.failures:
            self.failures -= 1
            return _Refused()
        return self.pool.acquire()


class _Refused:
    async def __aenter__(self) -> Any:
        raise ConnectionResetError("connection reset by peer")

    async def __aexit__(self, *exc: object) -> None:
        return None


async def test_a_failed_transaction_is_written_before_the_next_message(
    pg_pool: Any, schema_name: str
) -> None:
    history = seed_history()
    batches = history.batches()
    flaky = FlakyPool(pg_pool)
    projector = Projector(flaky, schema_name)
    for batch in batches[:10]:
        await projector.apply(*batch)
    flaky.failures = 1
    with pytest.raises(TransientStoreError):
        await projector.apply(*batches[10])
    assert await projector.position() == 10
    assert projector.seq == 10
    for batch in batches[10:]:  # the failed message is retried from its folded rows
        await projector.apply(*batch)
    await assert_tables_match(pg_pool, schema_name, history.w.state)
    assert await count(pg_pool, f"SELECT count(*) FROM {schema_name}.audit") == len(history.w.log)


async def test_configuration_keeps_its_creation_time_across_updates(
    pg_pool: Any, schema_name: str
) -> None:
    r = Recording()
    r.w.environment(ml_g5_xlarge=2)
    r.w.queue()
    r.w.share("QS1", 1, "LEND")
    r.cut()
    r.w.clock += 60
    r.w.share("QS1", 2, "LEND", updated=True)
    r.cut()
    projector = Projector(pg_pool, schema_name)
    for batch in r.batches():
        await projector.apply(*batch)
    read = ReadModel(pg_pool, schema_name)
    share = await read.describe_share("q", "QS1")
    assert share is not None
    assert share["quota_share"]["created_at"] == 1_000_000
    assert share["quota_share"]["capacity_limits"] == [
        {"capacity_unit": "ml.g5.xlarge", "max_capacity": 2}
    ]
    [queue] = await read.describe_queues()
    [environment] = await read.describe_environments()
    assert queue["created_at"] == environment["created_at"] == 1_000_000


async def test_a_deleted_share_leaves_the_tables(pg_pool: Any, schema_name: str) -> None:
    from quartermaster import events as ev

    r = Recording()
    r.w.environment(ml_g5_xlarge=2)
    r.w.queue()
    r.w.share("QS1", 1, "LEND")
    r.w.share("QS2", 1, "LEND")
    r.cut()
    r.w.apply(ev.QuotaShareDeleted(at=r.w.clock, job_queue="q", name="QS2"))
    r.cut()
    projector = Projector(pg_pool, schema_name)
    for batch in r.batches():
        await projector.apply(*batch)
    read = ReadModel(pg_pool, schema_name)
    assert await read.describe_share("q", "QS2") is None
    shares, token = await read.list_shares("q")
    assert [s["quota_share_name"] for s in shares] == ["QS1"]
    assert token is None


def test_a_schema_name_must_be_a_plain_identifier(pg_pool: Any) -> None:
    with pytest.raises(InvalidSchemaNameError):
        Projector(pg_pool, 'x"; DROP TABLE jobs; --')
    with pytest.raises(InvalidSchemaNameError):
        ReadModel(pg_pool, "Upper")
