"""Scheduler snapshots in a JetStream object store, so a restart replays only the tail."""

from __future__ import annotations

import logging

import nats.js.errors
from nats.js.api import ObjectStoreConfig
from nats.js.object_store import ObjectStore

from quartermaster.bus import JetStreamLog

log = logging.getLogger(__name__)


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
        try:
            result = await self._store.get(self._name)
        except nats.js.errors.ObjectNotFoundError:
            return None
        except Exception:  # a damaged snapshot only costs a full replay
            log.exception("snapshot %s unreadable; replaying the whole log", self._name)
            return None
        data = result.data
        return bytes(data) if data else None

    async def save(self, data: bytes) -> None:
        await self._store.put(self._name, data)
