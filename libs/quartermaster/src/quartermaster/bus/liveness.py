"""Heartbeats outside the event log: a KV bucket, one key per host, with a TTL.

A heartbeat says only "host X was alive at t". As a log event it grew the log by
hosts / period forever and reached every reader; here each host's newest beat
replaces its last one (`history=1`) and a dead host's key goes away after
`LIVENESS_TTL_S`. The bucket is `<stream>_LIVENESS` (stream `KV_<stream>_LIVENESS`,
subjects `$KV.<stream>_LIVENESS.<host token>`), made with the log by
`JetStreamLog.ensure_stream`, so every deployment (secured or not) has it.

Node agent X may publish on its own key only (`embedded.nats_auth`). The scheduler
holding the `_hosts` lease reads the bucket (`LivenessWatch`) and hands each host's
newest instant to the pure pass, which judges a loss as before and records the
instant it judged on (`HostLost.last_heartbeat_at`): an auditor checks that record
against the log (`audit.verify.claimed_liveness`), never the bucket. Admission reads
it too, to show each node's last heartbeat.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import msgspec
import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType

from quartermaster.bus.reader import OrderedReader
from quartermaster.bus.translate import NATS_FAILURES, bus_error
from quartermaster.cancelling import cancel_and_wait
from quartermaster.core.provenance import token

log = logging.getLogger("qm.bus.liveness")

# Far above any heartbeat timeout: the TTL only bounds the bucket. A host silent for
# longer has lost its key, and the pass falls back to the log's signs of life (its
# registration), which are older still: it is judged lost all the same.
LIVENESS_TTL_S = 3600.0


class Beat(msgspec.Struct, frozen=True):
    """One heartbeat: the host and its agent's clock when it sent it."""

    host_id: str
    at: float


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(Beat).decode


def liveness_bucket(stream: str) -> str:
    """`QM` -> `QM_LIVENESS`."""
    return f"{stream}_LIVENESS"


def liveness_stream(stream: str) -> str:
    return f"KV_{liveness_bucket(stream)}"


def beat_subject(stream: str, host_id: str) -> str:
    return f"$KV.{liveness_bucket(stream)}.{token(host_id)}"


def liveness_subjects(stream: str) -> str:
    return f"$KV.{liveness_bucket(stream)}.>"


async def ensure_liveness_bucket(js: JetStreamContext, stream: str, replicas: int = 1) -> None:
    """Create the bucket; one that exists (with any config) is kept as it is."""
    config = KeyValueConfig(
        bucket=liveness_bucket(stream),
        history=1,
        ttl=LIVENESS_TTL_S,
        storage=StorageType.FILE,
        replicas=replicas,
    )
    try:
        try:
            await js.create_key_value(config=config)
        except nats.js.errors.BadRequestError:
            await js.key_value(config.bucket)
    except NATS_FAILURES as err:
        raise bus_error(err, f"create bucket {config.bucket}") from err


async def delete_liveness_bucket(js: JetStreamContext, stream: str) -> None:
    try:
        await js.delete_key_value(liveness_bucket(stream))
    except nats.js.errors.NotFoundError:
        return
    except NATS_FAILURES as err:
        raise bus_error(err, f"delete bucket {liveness_bucket(stream)}") from err


async def send_beat(js: JetStreamContext, stream: str, beat: Beat, timeout: float = 5.0) -> None:
    """Store `beat` as its host's newest (acknowledged by the server)."""
    try:
        await js.publish(beat_subject(stream, beat.host_id), _encode(beat), timeout=timeout)
    except NATS_FAILURES as err:
        raise bus_error(err, f"heartbeat of {beat.host_id}") from err


class LivenessWatch:
    """Each host's newest heartbeat instant, kept current from the bucket.

    `ready` once the bucket's content at start was read: before that a silent host
    cannot be told from one whose beat has not arrived yet, so no loss may be judged.
    A beat whose key is not its host's token is ignored (agent X may write key X
    only, but its value could name another host).
    """

    def __init__(self, nc: NatsClient, js: JetStreamContext, stream: str) -> None:
        self._reader = OrderedReader(
            nc, js, liveness_stream(stream), liveness_subjects(stream), start_seq=1
        )
        self._prefix = f"$KV.{liveness_bucket(stream)}."
        self.signs: dict[str, float] = {}
        self.ready = False
        self._task: asyncio.Task[None] | None = None
        self._on_ready: list[Callable[[], None]] = []

    def on_ready(self, callback: Callable[[], None]) -> None:
        self._on_ready.append(callback)

    def last_beat(self, host_id: str) -> float | None:
        return self.signs.get(host_id)

    async def start(self) -> None:
        await self._reader.start()
        self._task = asyncio.create_task(self._run(), name="liveness-watch")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        await self._reader.stop()

    async def _run(self) -> None:
        while True:
            try:
                delivered = await self._reader.next(timeout=1.0)
                if delivered is not None:
                    self._take(delivered.subject, delivered.data)
                    if delivered.num_pending == 0:
                        self._set_ready()
                elif not self.ready and await self._reader.caught_up():
                    self._set_ready()  # an empty bucket, or its last entry expired
            except asyncio.CancelledError:
                raise
            except Exception:  # a bus hiccup: the reader recreates its consumer
                log.warning("liveness watch: read failed; retrying", exc_info=True)
                await asyncio.sleep(1.0)

    def _take(self, subject: str, data: bytes) -> None:
        if not data:
            return  # a delete or purge marker
        try:
            beat = _decode(data)
        except msgspec.DecodeError:
            log.warning("liveness watch: unreadable beat on %s ignored", subject)
            return
        if subject != self._prefix + token(beat.host_id):
            log.warning("liveness watch: beat for %s on %s ignored", beat.host_id, subject)
            return
        if beat.at > self.signs.get(beat.host_id, float("-inf")):
            self.signs[beat.host_id] = beat.at

    def _set_ready(self) -> None:
        if self.ready:
            return
        self.ready = True
        for callback in self._on_ready:
            callback()
