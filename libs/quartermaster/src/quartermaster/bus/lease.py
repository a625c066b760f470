"""Exclusive, expiring leases on the keys of a JetStream KV bucket.

A lease is the key's value (the holder's name) written with compare-and-set on the
key's revision and a per-message TTL (`Nats-TTL`, whole seconds, at least 1):
- `acquire` creates the key (expected revision 0): of many holders exactly one wins;
  a holder that finds its own name there (a restart) takes it over by revision.
- `renew` rewrites it expecting the revision this holder wrote last; if the lease
  expired or someone else took it in between, the revision differs and renew fails.
- `release` deletes it, again only at this holder's revision.
Holder names must be unique per running process (say, host name plus boot id): a
holder that finds its own name takes the lease over, which is right after a restart
and wrong if two live processes share a name.
The bucket is created with a TTL (`max_ttl_s`, the longest lease allowed) that also
clears delete markers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import nats.js.errors
from nats.js.api import StorageType
from nats.js.kv import KeyValue

from quartermaster.bus.errors import PermanentBusError
from quartermaster.bus.jetstream import EXPECTED_LAST_SUBJECT_SEQ, JetStreamLog
from quartermaster.bus.puback import WRONG_LAST_SEQUENCE
from quartermaster.bus.translate import NATS_FAILURES, bus_error

_KV_OPERATION = "KV-Operation"


@dataclass(slots=True)
class _Held:
    holder: str
    revision: int
    ttl_s: int


class KvLease:
    """Leases on bucket `bucket`; one instance tracks the leases this process holds."""

    def __init__(self, log: JetStreamLog, kv: KeyValue, bucket: str, max_ttl_s: float) -> None:
        self._log = log
        self._kv = kv
        self.bucket = bucket
        self.max_ttl_s = max_ttl_s
        self._held: dict[str, _Held] = {}

    @classmethod
    async def open(cls, log: JetStreamLog, bucket: str, *, max_ttl_s: float = 3600.0) -> KvLease:
        """Create the bucket (file storage, history 1, TTL `max_ttl_s`) or bind to it."""
        js = log.js
        try:
            try:
                kv = await js.create_key_value(
                    bucket=bucket, history=1, ttl=max_ttl_s, storage=StorageType.FILE
                )
            except nats.js.errors.BadRequestError:
                kv = await js.key_value(bucket)  # exists with another config: use it
        except NATS_FAILURES as err:
            raise bus_error(err, f"open lease bucket {bucket}") from err
        return cls(log, kv, bucket, max_ttl_s)

    def held(self, key: str) -> bool:
        """Whether this instance believes it holds `key` (true until a renew fails)."""
        return key in self._held

    async def holder(self, key: str) -> str | None:
        """Who holds `key` now, by the server's word; None if nobody."""
        try:
            entry = await self._kv.get(key)
        except nats.js.errors.KeyNotFoundError:
            return None
        except NATS_FAILURES as err:
            raise bus_error(err, f"read lease {key}") from err
        return entry.value.decode() if entry.value is not None else None

    async def acquire(self, key: str, holder: str, ttl_s: float) -> bool:
        """Take `key` for `ttl_s` seconds; True if `holder` now holds it."""
        ttl = self._ttl(ttl_s)
        value = holder.encode()
        try:
            revision = await self._kv.create(key, value, msg_ttl=ttl)
        except nats.js.errors.KeyWrongLastSequenceError:
            try:
                entry = await self._kv.get(key)
            except nats.js.errors.KeyNotFoundError:
                return False  # it expired or was released just now; try again later
            except NATS_FAILURES as err:
                raise bus_error(err, f"read lease {key}") from err
            if entry.value != value or entry.revision is None:
                return False
            taken = await self._write_if(key, value, entry.revision, ttl)
            if taken is None:
                return False
            revision = taken
        except NATS_FAILURES as err:
            raise bus_error(err, f"acquire lease {key}") from err
        self._held[key] = _Held(holder, revision, ttl)
        return True

    async def renew(self, key: str) -> bool:
        """Extend a held lease by its TTL; False (and forgotten) if it was lost."""
        held = self._held.get(key)
        if held is None:
            return False
        revision = await self._write_if(key, held.holder.encode(), held.revision, held.ttl_s)
        if revision is None:
            del self._held[key]
            return False
        held.revision = revision
        return True

    async def release(self, key: str) -> bool:
        """Give a held lease up at once; False if it was not held (any more)."""
        held = self._held.pop(key, None)
        if held is None:
            return False
        headers = {_KV_OPERATION: "DEL", EXPECTED_LAST_SUBJECT_SEQ: str(held.revision)}
        try:
            await self._log.js.publish(self._subject(key), b"", headers=headers)
        except nats.js.errors.APIError as err:
            if err.err_code == WRONG_LAST_SEQUENCE:
                return False
            raise bus_error(err, f"release lease {key}") from err
        except NATS_FAILURES as err:
            raise bus_error(err, f"release lease {key}") from err
        return True

    async def _write_if(self, key: str, value: bytes, revision: int, ttl_s: int) -> int | None:
        headers = {EXPECTED_LAST_SUBJECT_SEQ: str(revision)}
        try:
            ack = await self._log.js.publish(
                self._subject(key), value, headers=headers, msg_ttl=ttl_s
            )
        except nats.js.errors.APIError as err:
            if err.err_code == WRONG_LAST_SEQUENCE:
                return None
            raise bus_error(err, f"write lease {key}") from err
        except NATS_FAILURES as err:
            raise bus_error(err, f"write lease {key}") from err
        return int(ack.seq)

    def _subject(self, key: str) -> str:
        return f"$KV.{self.bucket}.{key}"

    def _ttl(self, ttl_s: float) -> int:
        if not 0 < ttl_s <= self.max_ttl_s:
            raise PermanentBusError(
                f"lease ttl {ttl_s}s must be in (0, {self.max_ttl_s}] (the bucket's TTL)"
            )
        return max(1, math.ceil(ttl_s))
