"""Scheduler snapshots in a JetStream object store, so a restart replays only the tail.

The object is read chunk by chunk into a list and joined once: the client's own
`get` appends each chunk to one bytes object (quadratic: an 84 MB snapshot took
about 15 s to read, longer than replaying the log). A snapshot that does not
decode in this version's format is ignored with a log line: the log is replayed.
"""

from __future__ import annotations

import logging

import nats.js.errors
from nats.js.api import ObjectStoreConfig
from nats.js.object_store import ObjectStore

from quartermaster.bus import JetStreamLog
from quartermaster.core.snapshot import SnapshotFormatError, restore
from quartermaster.core.state import State

log = logging.getLogger(__name__)


class _Chunks:
    """A sink for `ObjectStore.get(writeinto=...)`: keeps the chunks, joins them once."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def joined(self) -> bytes:
        return b"".join(self.parts)


class SnapshotStore:
    def __init__(self, store: ObjectStore, name: str) -> None:
        self._store = store
        self._name = name

    @classmethod
    async def open(
        cls, event_log: JetStreamLog, bucket: str, *, replicas: int = 1
    ) -> SnapshotStore:
        """Create the object store (`replicas` copies, like the stream) or bind to it."""
        try:
            store = await event_log.js.create_object_store(
                bucket, config=ObjectStoreConfig(replicas=replicas)
            )
        except nats.js.errors.BadRequestError:
            store = await event_log.js.object_store(bucket)
        return cls(store, f"scheduler-{event_log.stream}")

    async def load(self) -> bytes | None:
        sink = _Chunks()
        try:
            await self._store.get(self._name, writeinto=sink)  # type: ignore[arg-type]
        except nats.js.errors.ObjectNotFoundError:
            return None
        except Exception:  # a damaged snapshot only costs a full replay
            log.exception("snapshot %s unreadable; replaying the whole log", self._name)
            return None
        data = sink.joined()
        return data or None

    async def load_state(self) -> tuple[State, int] | None:
        """The restored state and its log position; None: replay from the start."""
        data = await self.load()
        if data is None:
            return None
        try:
            return restore(data)
        except SnapshotFormatError as e:
            log.warning("snapshot %s ignored (%s); replaying the whole log", self._name, e)
            return None

    async def save(self, data: bytes) -> None:
        await self._store.put(self._name, data)
