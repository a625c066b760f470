"""Exclusive, expiring leases on the keys of a JetStream KV bucket.

A lease is the key's value (holder name and TTL) written with compare-and-set on the
key's revision:
- `acquire` creates the key (expected revision 0): of many holders exactly one wins.
  A key held by another name is taken over, by its revision, once this contender has
  seen that revision unchanged for the lease's TTL on its own clock: the holder stopped
  renewing. A contender that saw the key held reads it at its next call instead of
  trying a create it would lose: a standby checks with one request, not two. Judging
  silence locally makes sub-second TTLs possible (the server's per-message TTL,
  `Nats-TTL`, counts whole seconds and only garbage-collects here).
- `renew` rewrites it expecting the revision this holder wrote last; if someone took
  it in between, the revision differs and renew fails. After a write whose ack was
  lost (it may be stored), a newer revision holding this holder's name is adopted.
- `held` is true only until the TTL has run out since the last write this holder
  sent: it stops believing in a lease before any contender may take it (a contender
  counts from when it saw the write stored, which comes later).
- `release` deletes it, again only at this holder's revision; contenders take a
  released key at once.

Same name, same holder. A holder finding its own name in the key takes the lease
back at once. That is right only when the name cannot belong to another live
process: the name must be unique per process (host name plus a random boot id,
made at each start by the service's composition root), or persisted across restarts
under an exclusive lock that the operating system drops when the process dies (the
scheduler's identity file), so the process finding its name is the same process
restarting. A name given by hand to two replicas would let them take the lease from
each other; decision appends are still fenced, but leadership would flap.

Safety does not rest on clocks: leaders append decisions with the expected last
subject sequence, so two instances that both believe they lead cannot both write.
The lease keeps one instance leading so that the other does not waste passes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import msgspec
import nats.js.errors
from nats.js.api import StorageType
from nats.js.kv import KeyValue

from quartermaster.bus.errors import BusError, PermanentBusError
from quartermaster.bus.jetstream import EXPECTED_LAST_SUBJECT_SEQ, JetStreamLog
from quartermaster.bus.puback import WRONG_LAST_SEQUENCE
from quartermaster.bus.translate import NATS_FAILURES, bus_error

_KV_OPERATION = "KV-Operation"
_GONE = ("DEL", "PURGE")


class _Record(msgspec.Struct, frozen=True):
    """The key's value: who holds it, and how long a silence ends the lease."""

    holder: str
    ttl_s: float


@dataclass(slots=True)
class _Held:
    holder: str
    revision: int
    ttl_s: float
    valid_until: float  # this holder's clock: sent + ttl of the last write it sent
    unsure: bool = False  # a write went unacknowledged: stored or not, nobody told us


@dataclass(frozen=True, slots=True)
class _Seen:
    revision: int
    since: float  # this contender's clock: when it first saw that revision


@dataclass(frozen=True, slots=True)
class _Entry:
    record: _Record | None  # None: the key is absent (never set, released or expired)
    revision: int  # 0 when it never existed


class KvLease:
    """Leases on bucket `bucket`; one instance tracks the leases this process holds."""

    def __init__(
        self,
        log: JetStreamLog,
        kv: KeyValue,
        bucket: str,
        max_ttl_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._kv = kv
        self.bucket = bucket
        self.max_ttl_s = max_ttl_s
        self._clock = clock
        self._held: dict[str, _Held] = {}
        self._seen: dict[str, _Seen] = {}

    @classmethod
    async def open(
        cls,
        log: JetStreamLog,
        bucket: str,
        *,
        max_ttl_s: float = 3600.0,
        replicas: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> KvLease:
        """Create the bucket (file storage, history 1, TTL `max_ttl_s`, `replicas`
        copies: 3 on a 3-node cluster, like the stream) or bind to it."""
        js = log.js
        try:
            try:
                kv = await js.create_key_value(
                    bucket=bucket,
                    history=1,
                    ttl=max_ttl_s,
                    storage=StorageType.FILE,
                    replicas=replicas,
                )
            except nats.js.errors.BadRequestError:
                kv = await js.key_value(bucket)  # exists with another config: use it
        except NATS_FAILURES as err:
            raise bus_error(err, f"open lease bucket {bucket}") from err
        return cls(log, kv, bucket, max_ttl_s, clock=clock)

    def held(self, key: str) -> bool:
        """Whether this instance may act as holder of `key` now (false once the TTL ran
        out since its last write, or a renew found the lease taken)."""
        return self.valid_until(key) is not None

    def valid_until(self, key: str) -> float | None:
        """Until when (on `clock`) this instance holds `key`; None if it does not now."""
        held = self._held.get(key)
        if held is None or self._clock() >= held.valid_until:
            return None
        return held.valid_until

    async def holder(self, key: str) -> str | None:
        """Who holds `key` now, by the server's word; None if nobody."""
        entry = await self._read(key)
        return entry.record.holder if entry.record is not None else None

    async def acquire(self, key: str, holder: str, ttl_s: float) -> bool:
        """Take `key` for `ttl_s` seconds if free, ours, or silent for its TTL; True if
        `holder` now holds it. Call it regularly: silence is judged across calls."""
        record = _Record(holder, ttl_s)
        ttl = self._server_ttl(ttl_s)  # a bad TTL is refused before anything is sent
        sent = self._clock()
        try:
            if key in self._seen:  # another held it when we last looked: a create would fail
                revision = await self._take_over(key, record, sent)
            else:
                revision = await self._create(key, record, ttl, sent)
        except BusError:
            # While we could not look, the holder may have renewed and failed alike:
            # count its silence afresh, so that it gets the first word once the
            # bucket answers again (say, after a leader election of the bucket).
            self._seen.pop(key, None)
            raise
        if revision is None:
            return False
        self._seen.pop(key, None)
        self._held[key] = _Held(holder, revision, ttl_s, sent + ttl_s)
        return True

    async def _create(self, key: str, record: _Record, ttl: int, sent: float) -> int | None:
        """Create the key (expected revision 0); one that exists is taken over if it may be."""
        try:
            revision: int = await self._kv.create(key, _encode(record), msg_ttl=ttl)
        except nats.js.errors.KeyWrongLastSequenceError:
            return await self._take_over(key, record, sent)
        except NATS_FAILURES as err:
            raise bus_error(err, f"acquire lease {key}") from err
        return revision

    async def renew(self, key: str) -> bool:
        """Extend a held lease by its TTL; False (and forgotten) if it was lost."""
        held = self._held.get(key)
        if held is None:
            return False
        record = _Record(held.holder, held.ttl_s)
        sent = self._clock()
        revision = await self._renew_write(key, held, record)
        if revision is None and held.unsure:
            # The last write's ack was lost: if it was stored, the key holds our name
            # at a newer revision; adopt it rather than give the lease up.
            entry = await self._read(key)
            if entry.record is not None and entry.record.holder == held.holder:
                held.revision = entry.revision
                revision = await self._renew_write(key, held, record)
        if revision is None:
            del self._held[key]
            return False
        held.revision = revision
        held.unsure = False
        held.valid_until = sent + held.ttl_s
        return True

    async def _renew_write(self, key: str, held: _Held, record: _Record) -> int | None:
        try:
            return await self._write_if(key, record, held.revision)
        except BusError:
            held.unsure = True  # it may have been stored all the same
            raise

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

    async def _take_over(self, key: str, record: _Record, sent: float) -> int | None:
        """The key exists: take it if it is ours, gone, or silent for the holder's TTL."""
        entry = await self._read(key)
        if entry.record is None or entry.record.holder == record.holder:
            return await self._write_if(key, record, entry.revision)
        seen = self._seen.get(key)
        if seen is None or seen.revision != entry.revision:
            self._seen[key] = _Seen(entry.revision, sent)
            return None
        if sent - seen.since < entry.record.ttl_s:
            return None
        return await self._write_if(key, record, entry.revision)  # the holder went silent

    async def _read(self, key: str) -> _Entry:
        try:
            entry = await self._kv.get(key)
        except nats.js.errors.KeyNotFoundError as err:
            # Deleted keys raise too; their marker's revision is what a write expects.
            marker = err.entry
            return _Entry(None, int(marker.revision or 0) if marker is not None else 0)
        except NATS_FAILURES as err:
            raise bus_error(err, f"read lease {key}") from err
        revision = int(entry.revision or 0)
        if entry.operation in _GONE or not entry.value:
            return _Entry(None, revision)
        return _Entry(_decode(entry.value), revision)

    async def _write_if(self, key: str, record: _Record, revision: int) -> int | None:
        headers = {EXPECTED_LAST_SUBJECT_SEQ: str(revision)}
        try:
            ack = await self._log.js.publish(
                self._subject(key),
                _encode(record),
                headers=headers,
                msg_ttl=self._server_ttl(record.ttl_s),
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

    def _server_ttl(self, ttl_s: float) -> int:
        """The server forgets a lease a second after contenders may take it (backstop)."""
        if not 0 < ttl_s <= self.max_ttl_s:
            raise PermanentBusError(
                f"lease ttl {ttl_s}s must be in (0, {self.max_ttl_s}] (the bucket's TTL)"
            )
        return max(1, math.ceil(ttl_s)) + 1


def _encode(record: _Record) -> bytes:
    return msgspec.json.encode(record)


def _decode(value: bytes) -> _Record | None:
    try:
        return msgspec.json.decode(value, type=_Record)
    except msgspec.DecodeError:
        return None  # not a lease record: nobody we know holds it
