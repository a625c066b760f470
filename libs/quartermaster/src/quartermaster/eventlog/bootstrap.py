"""Make the stream and the scheduler's buckets, as the admin user, before services start.

On a secured bus no service may create or change a stream (`embedded.nats_auth`),
so the bootstrap connection does it once; services then connect with
`create_stream=False`. The buckets are made here too: a bucket that exists already
cannot be re-created by the scheduler with another configuration.

Operators run it once per deployment, as the admin NATS user, before the services:
`QM_BOOTSTRAP_NATS_URL=... QM_BOOTSTRAP_NATS_USER=admin QM_BOOTSTRAP_NATS_PASSWORD=...
python -m quartermaster.eventlog.bootstrap` (stream, prefix, bucket names and
replicas as the services are configured).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, ObjectStoreConfig, StorageType

from quartermaster.bus import JetStreamLog
from quartermaster.bus.access import BusSettings, NatsCredentials
from quartermaster.bus.translate import NATS_FAILURES, bus_error
from quartermaster.embedded.nats_auth import BusLayout
from quartermaster.envsettings import from_env

LEASE_MAX_TTL_S = 3600.0  # as `KvLease.open` makes the scheduler's lease bucket


async def bootstrap(
    url: str, layout: BusLayout, admin: NatsCredentials, *, replicas: int = 1
) -> None:
    """Create (or update to this config) the stream, then the lease and snapshot buckets."""
    async with await JetStreamLog.connect(
        url,
        layout.stream,
        layout.subject_prefix,
        connection_name="qm-bootstrap",
        credentials=admin,
        replicas=replicas,
    ) as event_log:
        await make_buckets(event_log.js, layout, replicas=replicas)


async def make_buckets(js: JetStreamContext, layout: BusLayout, *, replicas: int = 1) -> None:
    """The scheduler's lease and snapshot buckets, as the admin user (kept if they exist)."""
    lease = KeyValueConfig(
        bucket=layout.lease_bucket,
        history=1,
        ttl=LEASE_MAX_TTL_S,
        storage=StorageType.FILE,
        replicas=replicas,
    )
    snapshots = ObjectStoreConfig(bucket=layout.snapshot_bucket, replicas=replicas)
    try:
        try:
            await js.create_key_value(config=lease)
        except nats.js.errors.BadRequestError:
            await js.key_value(layout.lease_bucket)  # exists with another config: keep it
        try:
            await js.create_object_store(layout.snapshot_bucket, config=snapshots)
        except nats.js.errors.BadRequestError:
            await js.object_store(layout.snapshot_bucket)
    except NATS_FAILURES as err:
        raise bus_error(err, "create the scheduler's buckets") from err


class BootstrapSettings(BusSettings, frozen=True, kw_only=True):
    """`QM_BOOTSTRAP_*`: the bus (as the admin user) and the scheduler's bucket names."""

    lease_bucket: str = "qm-leases"
    snapshot_bucket: str = "qm-snapshots"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> BootstrapSettings:
        return from_env(cls, "QM_BOOTSTRAP_", env)

    def layout(self) -> BusLayout:
        return BusLayout(
            stream=self.stream,
            subject_prefix=self.subject_prefix,
            lease_bucket=self.lease_bucket,
            snapshot_bucket=self.snapshot_bucket,
        )


def main() -> None:
    logging.basicConfig(level=logging.INFO)
    settings = BootstrapSettings.from_env()
    asyncio.run(
        bootstrap(
            settings.nats_url,
            settings.layout(),
            settings.nats_credentials(),
            replicas=settings.stream_replicas,
        )
    )
    logging.getLogger(__name__).info("stream %s and buckets ready", settings.stream)


if __name__ == "__main__":
    main()
