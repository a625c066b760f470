"""Admission in-process with its AWS-compatible endpoint, for the AWS fuzz and bench.

Starts a nats-server and a Postgres of its own under a temporary dir, then admission
as `tests/integration/admission/conftest.py` does (projector in-process, gRPC
plaintext without tokens, the HTTP endpoint with SigV4 keys of a key dir), and
issues one admin access key. `Admission.seed_queue()` makes a service environment,
a FIFO policy, queue `q` and share `QS1` whose instance type no host has (no
scheduler runs anyway), so submitted jobs stay queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import grpc

from qm_admission.aws.server import AwsEndpoint
from qm_admission.server import aws_endpoint, create_server, stop_server
from qm_admission.settings import Settings
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.api.qm.v1 import quartermaster_pb2_grpc as rpc
from quartermaster.auth import Role
from quartermaster.auth.access_keys import AccessKeyFile
from quartermaster.bus import JetStreamLog
from quartermaster.embedded import EmbeddedNats
from quartermaster.embedded.postgres import EmbeddedPostgres
from quartermaster.eventlog import LogFollower
from quartermaster.store import Projector, ReadModel

UNIT = "ml.p5.48xlarge"
QUEUE = "q"
SHARE = "QS1"
SCHEMA = "qm"
REGION = "us-east-1"


@dataclasses.dataclass
class Admission:
    grpc_port: int
    aws_port: int
    endpoint: AwsEndpoint
    log: JetStreamLog
    key: str
    secret: str
    keys_dir: Path
    server: grpc.aio.Server

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.aws_port}"

    async def seed_queue(self) -> None:
        """Environment `env`, policy `fifo`, queue `q`, share `QS1` (as admin over gRPC)."""
        async with grpc.aio.insecure_channel(f"127.0.0.1:{self.grpc_port}") as channel:
            quota = rpc.QuotaManagementStub(channel)  # type: ignore[no-untyped-call]
            limits = [pb.CapacityLimit(capacity_unit=UNIT, max_capacity=4)]
            await quota.CreateServiceEnvironment(
                pb.CreateServiceEnvironmentRequest(
                    service_environment_name="env",
                    service_environment_type="SAGEMAKER_TRAINING",
                    capacity_limits=limits,
                )
            )
            await quota.CreateSchedulingPolicy(
                pb.CreateSchedulingPolicyRequest(
                    name="fifo",
                    quota_share_policy=pb.QuotaSharePolicy(
                        idle_resource_assignment_strategy=pb.IDLE_RESOURCE_ASSIGNMENT_STRATEGY_FIFO
                    ),
                )
            )
            await quota.CreateJobQueue(
                pb.CreateJobQueueRequest(
                    job_queue_name=QUEUE,
                    job_queue_type="SAGEMAKER_TRAINING",
                    priority=1,
                    scheduling_policy_arn="fifo",
                    service_environment_order=[
                        pb.ServiceEnvironmentOrder(order=1, service_environment="env")
                    ],
                )
            )
            await quota.CreateQuotaShare(
                pb.CreateQuotaShareRequest(
                    job_queue=QUEUE,
                    quota_share_name=SHARE,
                    capacity_limits=[pb.CapacityLimit(capacity_unit=UNIT, max_capacity=2)],
                    resource_sharing_configuration=pb.ResourceSharingConfiguration(
                        strategy=pb.SHARING_STRATEGY_RESERVE
                    ),
                )
            )


@contextlib.asynccontextmanager
async def admission(directory: Path) -> AsyncIterator[Admission]:
    """nats-server, Postgres and admission (gRPC and AWS endpoint) under `directory`."""
    nats = EmbeddedNats(directory / "nats")
    postgres = EmbeddedPostgres(directory / "pg")
    await asyncio.to_thread(nats.start)
    try:
        await asyncio.to_thread(postgres.start)
        try:
            async with _admission(directory, nats.url, await postgres.create_database("qm")) as a:
                yield a
        finally:
            await asyncio.to_thread(postgres.stop)
    finally:
        await asyncio.to_thread(nats.stop)


@contextlib.asynccontextmanager
async def _admission(directory: Path, nats_url: str, dsn: str) -> AsyncIterator[Admission]:
    keys_dir = directory / "keys"
    record, secret = AccessKeyFile(keys_dir).add("ops", [Role.ADMIN], now=time.time())
    event_log = await JetStreamLog.connect(nats_url, stream="QM", subjects_prefix="qm")
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=16)
    await Projector(pool, SCHEMA).prepare()
    settings = Settings(
        stream=event_log.stream,
        subject_prefix=event_log.prefix,
        pg_schema=SCHEMA,
        aws_port=0,
        aws_keys_dir=str(keys_dir),
    )
    read_model = ReadModel(pool, SCHEMA)
    follower = LogFollower(event_log)
    projector = Projector(pool, SCHEMA)
    server, port = await create_server(settings, event_log, follower, read_model, projector)
    await follower.start()
    projecting = asyncio.create_task(projector.run(event_log))
    try:
        endpoint = aws_endpoint(server)
        assert endpoint is not None
        yield Admission(
            port, endpoint.port, endpoint, event_log, record.access_key_id, secret, keys_dir, server
        )
    finally:
        await stop_server(server, 0)
        projecting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await projecting
        await follower.stop()
        await read_model.close()
        await pool.close()
        await event_log.close()
