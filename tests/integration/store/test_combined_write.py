"""The one-statement write (store.combined): all of it or none, and raced without doubles.

Writes of entity and audit rows go as one statement that moves the position too;
`test_projector.py` checks the tables it leaves, these check what one statement
must keep of the transaction it replaces.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from quartermaster import events as ev
from quartermaster.store import PermanentStoreError, Projector, combined
from quartermaster.store.rows import Writes
from quartermaster.testing.builders import a_job

from .histories import configured, seed_history
from .tables import assert_tables_match


def test_lifecycle_writes_go_as_one_statement_and_config_as_a_transaction() -> None:
    assert combined.fits(Writes(seq=1, at=0.0, jobs=[("j",)], audit=[(1,)], attempts=[("j",)]))
    assert not combined.fits(Writes(seq=1, at=0.0, jobs=[("j",)], shares=[("q", "s")]))


async def test_a_statement_that_fails_writes_no_row_and_keeps_the_position(
    pg_pool: Any, schema_name: str
) -> None:
    # given: a configured projection, then a job whose documents Postgres' jsonb refuses
    # (a NUL spelled \u0000: the statement fails as it runs, after the position moved)
    history = configured()
    batches = history.batches()
    projector = Projector(pg_pool, schema_name)
    await projector.apply_many(batches)
    bad = ev.JobSubmitted(
        at=2_000.0,
        job_id="bad",
        job_name="bad",
        job_queue="q",
        quota_share="QS1",
        instance_type="ml.g5.xlarge",
        tags={"team": "a\x00"},
    )
    # when
    with pytest.raises(PermanentStoreError):
        await projector.apply(len(batches) + 1, "qm.requests", [bad])
    # then: neither the job's row nor its audit row, and the position stayed
    async with pg_pool.acquire() as conn:
        jobs = await conn.fetchval(f"SELECT count(*) FROM {schema_name}.jobs")
        audited = await conn.fetchval(
            f"SELECT count(*) FROM {schema_name}.audit WHERE seq = $1", len(batches) + 1
        )
    assert (jobs, audited) == (0, 0)
    assert await projector.position() == len(batches)


async def test_two_projectors_of_one_name_racing_write_each_message_once(
    pg_pool: Any, schema_name: str
) -> None:
    # given: one history, two projectors of the same name applying it at the same time
    history = seed_history()
    history.submit(a_job(name="raced").in_share("QS2"))
    batches = history.batches()
    one, two = Projector(pg_pool, schema_name), Projector(pg_pool, schema_name)
    await one.prepare()

    async def follow(projector: Projector) -> None:
        for batch in batches:
            await projector.apply(*batch)
            await asyncio.sleep(0)  # let the other one race for the same message

    # when
    await asyncio.gather(follow(one), follow(two))
    # then: the tables say what the fold says, every event audited once
    await assert_tables_match(pg_pool, schema_name, history.w.state)
    async with pg_pool.acquire() as conn:
        audited = await conn.fetchval(f"SELECT count(*) FROM {schema_name}.audit")
    assert audited == len(history.w.log)
    assert one.seq == two.seq == await one.position() == len(batches)
