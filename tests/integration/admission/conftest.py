"""Admission servers in-process, on a free port, against real nats-server and Postgres.

The servers themselves come from `quartermaster.testing.servers`, loaded by the
top-level `tests/conftest.py` (pytest honours `pytest_plugins` only there). Each
test gets its own stream and database; `start_admission()` can start several
admission instances on the same log and database (like replicas).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import grpc
import pytest_asyncio

from qm_admission.consistency import MIN_SEQ_KEY, SEQ_KEY
from qm_admission.server import aws_endpoint, create_server, stop_server
from qm_admission.settings import Settings
from quartermaster.api.qm.v1 import quartermaster_pb2_grpc as rpc
from quartermaster.bus import JetStreamLog
from quartermaster.eventlog import LogFollower
from quartermaster.store import Projector, ReadModel

SCHEMA = "qm"
TEARDOWN_SECONDS = 15.0


class Client:
    """Async stubs of one admission instance; `call` keeps the read-your-writes position."""

    def __init__(
        self, channel: grpc.aio.Channel, port: int, event_log: JetStreamLog, aws_port: int = 0
    ) -> None:
        self.channel = channel
        self.port = port
        self.aws_port = aws_port  # the AWS-compatible endpoint's (0: not served)
        self.log = event_log
        self.quota = rpc.QuotaManagementStub(channel)  # type: ignore[no-untyped-call]
        self.jobs = rpc.ServiceJobsStub(channel)  # type: ignore[no-untyped-call]
        self.pools = rpc.WarmPoolsStub(channel)  # type: ignore[no-untyped-call]
        self.nodes = rpc.NodesStub(channel)  # type: ignore[no-untyped-call]
        self.seq = 0  # the newest x-qm-seq this client saw

    async def call(self, method: Any, request: Any, *, min_seq: int | None = None) -> Any:
        """A unary call; sends `x-qm-min-seq` when given, records the `x-qm-seq` answered."""
        metadata = () if min_seq is None else ((MIN_SEQ_KEY, str(min_seq)),)
        call = method(request, metadata=metadata, timeout=20)
        response = await call
        for key, value in await call.initial_metadata() or ():
            if key == SEQ_KEY:
                self.seq = max(self.seq, int(value))
        return response


Starter = Callable[..., Awaitable[Client]]


@pytest_asyncio.fixture
async def start_admission(jetstream_log: JetStreamLog, pg_dsn: str) -> AsyncIterator[Starter]:
    """Start admission instances on this test's stream and database.

    `start_admission()` runs the projector in-process (reads wait on it);
    `start_admission(projector=False)` waits on the stored position instead, like a
    replica whose projection runs elsewhere; `page_token_secret` keys its page tokens
    (replicas given the same one accept each other's tokens); `roles_file` is
    `Settings.roles_file` (the execution roles jobs may name); `aws=True` serves the
    AWS-compatible endpoint too (`aws_keys_dir`: SigV4 keys; "": unsigned, as admin).
    """
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=16)
    await Projector(pool, SCHEMA).prepare()
    cleanups: list[Callable[[], Awaitable[None]]] = []

    async def start(
        *,
        projector: bool = True,
        page_token_secret: str = "",
        roles_file: str = "",
        aws: bool = False,
        aws_keys_dir: str = "",
    ) -> Client:
        settings = Settings(
            stream=jetstream_log.stream,
            subject_prefix=jetstream_log.prefix,
            pg_schema=SCHEMA,
            read_timeout_seconds=10.0,
            page_token_secret=page_token_secret,
            roles_file=roles_file,
            aws_port=0 if aws else -1,
            aws_keys_dir=aws_keys_dir,
        )
        read_model = ReadModel(pool, SCHEMA)
        follower = LogFollower(jetstream_log)
        projection = Projector(pool, SCHEMA) if projector else None
        server, port = await create_server(
            settings, jetstream_log, follower, read_model, projection or read_model
        )
        await follower.start()
        task = asyncio.create_task(projection.run(jetstream_log)) if projection else None
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")

        async def stop() -> None:
            await channel.close()
            await stop_server(server, 0)
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await follower.stop()
            await read_model.close()

        cleanups.append(stop)
        endpoint = aws_endpoint(server)
        return Client(channel, port, jetstream_log, endpoint.port if endpoint else 0)

    try:
        yield start
    finally:
        # Bounded, so a stuck step fails here with its traceback instead of at the test timeout.
        for stop in reversed(cleanups):
            await asyncio.wait_for(stop(), TEARDOWN_SECONDS)
        try:
            await asyncio.wait_for(pool.close(), TEARDOWN_SECONDS)
        except TimeoutError:
            pool.terminate()
            raise


@pytest_asyncio.fixture
async def admission(start_admission: Starter) -> Client:
    return await start_admission()
