"""Make the stream and the scheduler's buckets, as the admin user, before services start.

On a secured bus no service may create or change a stream (`embedded.nats_auth`),
so the bootstrap connection does it once; services then connect with
`create_stream=False`. The buckets are made here too: a bucket that exists already
cannot be re-created by the scheduler with another configuration.
"""

from __future__ import annotations

import nats.js.errors
from nats.js.api import KeyValueConfig, ObjectStoreConfig, StorageType

from quartermaster.bus import JetStreamLog
from quartermaster.bus.access import NatsCredentials
from quartermaster.bus.translate import NATS_FAILURES, bus_error
from quartermaster.embedded.nats_auth import BusLayout

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
        js = event_log.js
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
