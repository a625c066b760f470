"""The host feed stream: one subject per host, the newest view of each kept.

`<stream>_HOSTS` holds `<p>_hosts.<host>.cmd` (its own stream: the log's readers
never see it; `<p>.>` would have swallowed `<p>.hosts.…`). One message is kept
per subject, so a reader starting from the beginning gets its host's newest view
and then every newer one. A reader's consumer is named and filtered, so its
create request carries the filter in its subject (`CONSUMER.CREATE.<s>.<n>.<f>`)
and NATS permissions can let node agent X create consumers on X's subject only.

Each view also goes out at once, unstored, on `<p>_hosts.<host>.now` (outside the
stream's subjects): the agent acts on it without waiting for the feed's replication,
which was a third of an idle dispatch's way to the agent on a 3-replica stream. What a
view says is already in the log when it is sent, so acting on it early is safe; the
feed stays what a restarted agent reads, and the same view read twice is applied once.
"""

from __future__ import annotations

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, StorageType, StreamConfig

from quartermaster.bus.translate import NATS_FAILURES, bus_error
from quartermaster.core.provenance import token

_STREAM_NAME_IN_USE = 10058


def feed_stream(stream: str) -> str:
    """`QM` -> `QM_HOSTS`."""
    return f"{stream}_HOSTS"


def feed_subjects(prefix: str) -> str:
    return f"{prefix}_hosts.*.cmd"


def feed_subject(host_id: str, prefix: str) -> str:
    return f"{prefix}_hosts.{token(host_id)}.cmd"


def fast_subjects(prefix: str) -> str:
    """Where every view also goes at once, unstored (not the stream's: `*.now`)."""
    return f"{prefix}_hosts.*.now"


def fast_subject(host_id: str, prefix: str) -> str:
    return f"{prefix}_hosts.{token(host_id)}.now"


def feed_config(stream: str, prefix: str, replicas: int = 1) -> StreamConfig:
    return StreamConfig(
        name=feed_stream(stream),
        subjects=[feed_subjects(prefix)],
        storage=StorageType.FILE,
        max_msgs_per_subject=1,
        discard=DiscardPolicy.OLD,
        duplicate_window=120.0,
        allow_direct=True,
        num_replicas=replicas,
    )


async def ensure_feed_stream(
    js: JetStreamContext, stream: str, prefix: str, replicas: int = 1
) -> None:
    """Create the feed stream of `stream`, or update it to this config."""
    config = feed_config(stream, prefix, replicas)
    try:
        try:
            await js.add_stream(config)
        except nats.js.errors.BadRequestError as err:
            if err.err_code != _STREAM_NAME_IN_USE:
                raise
            await js.update_stream(config)
    except NATS_FAILURES as err:
        raise bus_error(err, f"create stream {config.name}") from err


async def delete_feed_stream(js: JetStreamContext, stream: str) -> None:
    try:
        await js.delete_stream(feed_stream(stream))
    except nats.js.errors.NotFoundError:
        return
    except NATS_FAILURES as err:
        raise bus_error(err, f"delete stream {feed_stream(stream)}") from err
