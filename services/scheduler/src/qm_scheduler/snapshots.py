"""Scheduler snapshots in a JetStream object store, so a restart replays only the tail.

The object's chunks are fetched in large batches by a pull consumer of its own
and joined once, the digest checked as the client does. The client's own `get`
appends each chunk to one bytes object (quadratic: an 84 MB snapshot took about
15 s to read, longer than replaying the log), and its push consumer paces the
chunks (about 10 ms each). A snapshot that does not decode in this version's
format is ignored with a log line: the log is replayed.

A store that does not answer yet (a just-created bucket on a cluster whose replicas
are still electing a leader, a node busy at start) is asked again with backoff for
`patience_s`; no snapshot yet is an INFO line, a store that never answered a WARNING,
and only a snapshot that is there but unreadable (chunks missing, digest wrong) an
ERROR. An operator sees damage only where there is some.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import hashlib
import logging
import time

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, ObjectStoreConfig
from nats.js.object_store import ObjectStore

from quartermaster.bus import JetStreamLog
from quartermaster.core.snapshot import SnapshotFormatError, restore
from quartermaster.core.state import State

log = logging.getLogger(__name__)


FETCH_BATCH = 64  # chunks (128 KB each) asked for at once
PATIENCE_S = 30.0  # how long a store that does not answer is asked again before a replay
# What a store that is there but not answering (yet) raises: a request timed out, no
# server serves the bucket's stream now, JetStream is electing (503).
NOT_ANSWERING = (
    TimeoutError,  # nats.errors.TimeoutError, asyncio's
    nats.errors.NoRespondersError,
    nats.js.errors.ServiceUnavailableError,
)


class SnapshotDamagedError(nats.js.errors.Error):
    """The chunks read do not match the object's size or digest."""


async def read_object(js: JetStreamContext, store: ObjectStore, bucket: str, name: str) -> bytes:
    """The object's bytes, fetched in batches and joined once."""
    info = await store.get_info(name)
    if not info.size:
        return b""
    stream = f"OBJ_{bucket}"
    consumer = await js.add_consumer(  # unnamed: the create API a `get` uses (same permission)
        stream,
        config=ConsumerConfig(
            filter_subject=f"$O.{bucket}.C.{info.nuid}",
            ack_policy=AckPolicy.NONE,
            deliver_policy=DeliverPolicy.ALL,
            inactive_threshold=30.0,
        ),
    )
    sub = await js.pull_subscribe_bind(consumer.name, stream=stream)
    parts: list[bytes] = []
    digest = hashlib.sha256()
    got = 0
    chunks = consumer.num_pending or 0  # the chunks stored: a lost one is damage, not a wait
    try:
        while got < info.size and len(parts) < chunks:
            for msg in await sub.fetch(min(FETCH_BATCH, chunks - len(parts)), timeout=10.0):
                parts.append(msg.data)
                digest.update(msg.data)
                got += len(msg.data)
    finally:
        await sub.unsubscribe()
        with contextlib.suppress(nats.errors.Error):
            await js.delete_consumer(stream, consumer.name)  # else it lapses in 30 s
    expected = base64.urlsafe_b64decode((info.digest or "").split("=", 1)[-1] + "==")
    if got != info.size or digest.digest() != expected:
        raise SnapshotDamagedError(f"object {name}: {got} of {info.size} bytes, digest differs")
    return b"".join(parts)


class SnapshotStore:
    def __init__(
        self,
        store: ObjectStore,
        name: str,
        js: JetStreamContext,
        bucket: str,
        *,
        patience_s: float = PATIENCE_S,
    ) -> None:
        self._store = store
        self._name = name
        self._js = js
        self._bucket = bucket
        self._patience_s = patience_s

    @classmethod
    async def open(
        cls,
        event_log: JetStreamLog,
        bucket: str,
        *,
        replicas: int = 1,
        patience_s: float = PATIENCE_S,
    ) -> SnapshotStore:
        """Create the object store (`replicas` copies, like the stream) or bind to it."""
        try:
            store = await event_log.js.create_object_store(
                bucket, config=ObjectStoreConfig(replicas=replicas)
            )
        except nats.js.errors.BadRequestError:
            store = await event_log.js.object_store(bucket)
        name = f"scheduler-{event_log.stream}"
        return cls(store, name, event_log.js, bucket, patience_s=patience_s)

    async def load(self) -> bytes | None:
        """The newest snapshot's bytes; None: replay the whole log (the line logged says why)."""
        deadline = time.monotonic() + self._patience_s
        wait = 0.2
        while True:
            try:
                data = await read_object(self._js, self._store, self._bucket, self._name)
            except nats.js.errors.ObjectNotFoundError:
                log.info(
                    "no snapshot %s in %s yet; replaying the whole log", self._name, self._bucket
                )
                return None
            except NOT_ANSWERING as err:
                if time.monotonic() + wait >= deadline:
                    log.warning(
                        "snapshot store %s did not answer within %.0f s (%s); "
                        "replaying the whole log",
                        self._bucket,
                        self._patience_s,
                        type(err).__name__,
                    )
                    return None
                log.info(
                    "snapshot store %s not answering yet (%r); asking again", self._bucket, err
                )
                await asyncio.sleep(wait)
                wait = min(wait * 2, 2.0)
                continue
            except Exception:  # a damaged snapshot only costs a full replay
                log.exception("snapshot %s unreadable; replaying the whole log", self._name)
                return None
            return data or None

    async def load_state(self) -> tuple[State, int] | None:
        """The restored state and its log position; None: replay from the start."""
        data = await self.load()
        if data is None:
            return None
        was_enabled = gc.isenabled()
        gc.disable()  # decoding makes ~5 containers a job: collections midway find nothing
        try:
            return restore(data)
        except SnapshotFormatError as e:
            log.warning("snapshot %s ignored (%s); replaying the whole log", self._name, e)
            return None
        finally:
            if was_enabled:
                gc.enable()

    async def save(self, data: bytes) -> None:
        await self._store.put(self._name, data)
