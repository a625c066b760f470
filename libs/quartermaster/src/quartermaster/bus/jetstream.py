"""The event log port over a JetStream stream (file storage, one stream per deployment).

Every append is a JetStream publish that waits for its ack and returns the stream
sequence. Idempotence comes from `Nats-Msg-Id` (dedupe within the stream's duplicate
window); races are fenced with `Nats-Expected-Last-Sequence`. Reads use an ordered push
consumer (flow controlled, no acks), which is the fast path for catch-up and replay.

Order semantics of `append_batch`: items are sent in list order on one connection and
the server stores them in that order, so their seqs ascend in list order. Other appends
on the same connection (or other connections) may land between them: a batch is
pipelined, not atomic. Pass `expected_last_seq` (and a msg id on every item) to make it
gap-free: the first item expects the stream to end at `expected_last_seq`, each later
item expects the stream's last msg id to be its predecessor's (`Nats-Expected-Last-Msg-Id`),
so once a foreign message gets in, every item after it is fenced.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from types import TracebackType
from typing import Any

import nats
import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.api import StorageType, StreamConfig

from quartermaster.bus.access import NatsCredentials, server_list
from quartermaster.bus.entry import LogEntry
from quartermaster.bus.errors import (
    BatchAppendError,
    BusError,
    FencedAppendError,
    PermanentBusError,
    TransientBusError,
)
from quartermaster.bus.feed import delete_feed_stream, ensure_feed_stream
from quartermaster.bus.liveness import delete_liveness_bucket, ensure_liveness_bucket
from quartermaster.bus.near_leader import connection_near_leader
from quartermaster.bus.puback import (
    WRONG_LAST_MSG_ID,
    WRONG_LAST_SEQUENCE,
    AckInbox,
    PubAck,
    PubRejected,
)
from quartermaster.bus.reader import OrderedReader
from quartermaster.bus.stored import StoredBatches
from quartermaster.bus.translate import NATS_FAILURES, bus_error
from quartermaster.cancelling import cancel_and_wait

log = logging.getLogger(__name__)

MSG_ID = "Nats-Msg-Id"
EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
WITHHELD_S = 5.0  # a bounded read stays drained while the next message is stored: fail
_STREAM_NAME_IN_USE = 10058  # a stream with this name exists with another config
_AUTHORIZATION_VIOLATION = "authorization violation"  # the server's -ERR for bad credentials

BatchItem = tuple[str, bytes, str | None]  # subject, data, msg id


class JetStreamLog:
    """Append to and read from stream `stream`, which holds subjects `<prefix>.>`."""

    def __init__(
        self,
        nc: NatsClient,
        stream: str,
        subjects_prefix: str,
        *,
        owns_connection: bool,
        timeout_s: float = 5.0,
        max_in_flight: int = 1024,
    ) -> None:
        self._nc = nc
        self._js: JetStreamContext = nc.jetstream(timeout=timeout_s)
        self._stream = stream
        self._prefix = subjects_prefix
        self._owns_connection = owns_connection
        self._timeout_s = timeout_s
        self._max_in_flight = max_in_flight
        self._acks = AckInbox(nc)
        self._stored: StoredBatches | None = None  # batched reads, made on first use

    @classmethod
    async def connect(
        cls,
        url: str,
        stream: str = "QM",
        subjects_prefix: str = "qm",
        *,
        duplicate_window_s: float = 120.0,
        timeout_s: float = 5.0,
        max_in_flight: int = 1024,
        connection_name: str = "quartermaster",
        credentials: NatsCredentials | None = None,
        replicas: int = 1,
        create_stream: bool = True,
        near_leader: bool = False,
    ) -> JetStreamLog:
        """Connect (to any node of `url`, a comma-separated list), then create the stream or
        update it to this config; with `create_stream=False` only check that it exists (a
        service whose NATS user may not manage streams). `near_leader`: then move to the
        node that leads the stream, where one of `url`'s reaches it (`bus.near_leader`)."""
        who = credentials or NatsCredentials()

        async def open_on(servers: list[str], **extra: Any) -> NatsClient:
            return await _open(servers, who, connection_name, timeout_s, **extra)

        def log_on(nc: NatsClient) -> JetStreamLog:
            return cls(
                nc,
                stream,
                subjects_prefix,
                owns_connection=True,
                timeout_s=timeout_s,
                max_in_flight=max_in_flight,
            )

        servers = server_list(url)
        self = log_on(await open_on(servers))
        moved: NatsClient | None = None
        try:  # closed on any failure, or a cancel (the service stops while it starts)
            if create_stream:
                await self.ensure_stream(duplicate_window_s=duplicate_window_s, replicas=replicas)
            else:
                await self.last_seq()  # raises when the stream is missing
            if near_leader and len(servers) > 1:
                moved = await connection_near_leader(
                    self._nc, self._js, stream, servers, open_on, timeout_s
                )
        except BaseException:
            await self.close()
            raise
        if moved is None:
            return self
        await self.close()
        return log_on(moved)

    @classmethod
    async def attach(
        cls,
        nc: NatsClient,
        stream: str = "QM",
        subjects_prefix: str = "qm",
        *,
        duplicate_window_s: float = 120.0,
        timeout_s: float = 5.0,
    ) -> JetStreamLog:
        """Use a connection owned by the caller (`close()` leaves it open)."""
        self = cls(nc, stream, subjects_prefix, owns_connection=False, timeout_s=timeout_s)
        await self.ensure_stream(duplicate_window_s=duplicate_window_s)
        return self

    @property
    def stream(self) -> str:
        return self._stream

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def nc(self) -> NatsClient:
        return self._nc

    @property
    def js(self) -> JetStreamContext:
        return self._js

    def dlq_subject(self, subject: str) -> str:
        """`qm.cmd.submit` -> `qm.dlq.cmd.submit` (the prefix is not repeated)."""
        rest = subject.removeprefix(f"{self._prefix}.")
        return f"{self._prefix}.dlq.{rest}"

    async def ensure_stream(self, *, duplicate_window_s: float = 120.0, replicas: int = 1) -> None:
        config = StreamConfig(
            name=self._stream,
            subjects=[f"{self._prefix}.>"],
            storage=StorageType.FILE,
            duplicate_window=duplicate_window_s,
            allow_direct=True,
            num_replicas=replicas,
        )
        try:
            try:
                await self._js.add_stream(config)
            except nats.js.errors.BadRequestError as err:
                if err.err_code != _STREAM_NAME_IN_USE:
                    raise
                await self._js.update_stream(config)
        except NATS_FAILURES as err:
            raise bus_error(err, f"create stream {self._stream}") from err
        await ensure_feed_stream(self._js, self._stream, self._prefix, replicas)
        await ensure_liveness_bucket(self._js, self._stream, replicas)

    async def append(
        self,
        subject: str,
        data: bytes,
        msg_id: str | None = None,
        expected_last_seq: int | None = None,
        *,
        expected_last_subject_seq: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> int:
        """Store one message and return its stream seq.

        A repeated `msg_id` (within the duplicate window) returns the first seq. With
        `expected_last_seq`, the append succeeds only if the stream ends at that seq, else
        `FencedAppendError`; a retry of an append that already went through (same
        msg id, same expectation) returns its seq instead of being fenced.
        """
        hdrs = _headers(
            msg_id,
            expected_last_seq=expected_last_seq,
            expected_last_subject_seq=expected_last_subject_seq,
            extra=headers,
        )
        try:
            ack = await self._await_ack(subject, await self._send(subject, data, hdrs))
        except PubRejected as err:
            if err.code != WRONG_LAST_SEQUENCE:
                raise
            seq = await self._already_stored(subject, msg_id, expected_last_seq)
            if seq is not None:
                return seq
            expected = expected_last_seq if expected_last_seq is not None else -1
            if expected_last_subject_seq is not None:
                expected = expected_last_subject_seq
            raise FencedAppendError(
                subject, expected, err.actual_last_seq(), err.description
            ) from err
        return ack.seq

    async def append_batch(
        self, items: Sequence[BatchItem], *, expected_last_seq: int | None = None
    ) -> list[int]:
        """Pipeline the appends (up to `max_in_flight` unacked) and return seqs in order.

        See the module docstring for order semantics. On failure raises a
        `BatchAppendError` that says which items were stored (`seqs`) and why the others
        were not (`errors`). Retrying a fenced batch that went through returns its seqs.
        """
        if expected_last_seq is not None and any(msg_id is None for _, _, msg_id in items):
            raise PermanentBusError("a fenced batch needs a msg id on every item")
        window = asyncio.Semaphore(self._max_in_flight)
        futures: list[asyncio.Future[PubAck]] = []
        previous_id: str | None = None
        for index, (subject, data, msg_id) in enumerate(items):
            if expected_last_seq is None:
                headers = _headers(msg_id)
            elif index == 0:
                headers = _headers(msg_id, expected_last_seq=expected_last_seq)
            else:
                headers = _headers(msg_id, expected_last_msg_id=previous_id)
            previous_id = msg_id
            await window.acquire()
            try:  # written in one go with the last (or once the window is full)
                last = index == len(items) - 1 or window.locked()
                future = await self._send(subject, data, headers, now=last)
            except BusError:
                window.release()
                for sent in futures:
                    sent.cancel()
                raise
            future.add_done_callback(lambda _: window.release())
            futures.append(future)
        seqs: list[int | None] = []
        errors: dict[int, BusError] = {}
        for index, future in enumerate(futures):
            subject, _, msg_id = items[index]
            try:
                seqs.append((await self._await_ack(subject, future)).seq)
                continue
            except PubRejected as err:
                failure: BusError = err
                fenced = err.code in (WRONG_LAST_SEQUENCE, WRONG_LAST_MSG_ID)
                if fenced and expected_last_seq is not None:
                    expected = expected_last_seq + index
                    seq = await self._already_stored(subject, msg_id, expected)
                    if seq is not None:
                        seqs.append(seq)  # a retried batch: this item went in before
                        continue
                    failure = FencedAppendError(
                        subject, expected, err.actual_last_seq(), err.description
                    )
            except BusError as err:
                failure = err
            seqs.append(None)
            errors[index] = failure
        if errors:
            raise BatchAppendError.of(seqs, errors)
        return [seq for seq in seqs if seq is not None]

    async def read(
        self,
        from_seq: int = 1,
        until_seq: int | None = None,
        *,
        subject_filter: str | None = None,
    ) -> AsyncGenerator[LogEntry, None]:
        """Yield entries from `from_seq` on; stop after `until_seq` (inclusive) or follow live.

        `subject_filter` narrows to matching subjects (default: all of `<prefix>.>`).
        Close the iterator (`contextlib.aclosing`) when leaving early so its consumer
        goes away at once.
        """
        if until_seq is not None and (until_seq < from_seq or until_seq < 1):
            return
        reader = OrderedReader(
            self._nc, self._js, self._stream, subject_filter or f"{self._prefix}.>", from_seq
        )
        await reader.start()
        last_seen = from_seq - 1
        unfiltered = subject_filter is None
        withheld_since: float | None = None  # drained, yet the next message is stored
        try:
            while True:
                entry = await reader.next(timeout=None if until_seq is None else 0.2)
                if entry is None:
                    # Nothing came for a while: done if no match up to until_seq can come.
                    assert until_seq is not None
                    if not await reader.drained(last_seen):
                        continue
                    if await self._read_through(last_seen, until_seq, unfiltered):
                        return
                    withheld_since = self._withheld(withheld_since, last_seen)
                    continue
                last_seen, withheld_since = entry.seq, None
                yield LogEntry(
                    entry.seq, entry.subject, entry.data, entry.headers, entry.num_pending
                )
                if until_seq is not None and (
                    entry.seq >= until_seq
                    or (
                        entry.num_pending == 0
                        and await self._read_through(entry.seq, until_seq, unfiltered)
                    )
                ):
                    return
        finally:
            await reader.stop()

    async def read_stored(self, from_seq: int, limit: int = 1000) -> list[LogEntry]:
        """Up to `limit` messages stored from `from_seq` on, in one request (`bus.stored`;
        empty: none yet): for a reader that asks now and then instead of being sent each
        message as it is stored."""
        if self._stored is None:
            self._stored = StoredBatches(self._nc, self._stream, f"{self._prefix}.>")
        return await self._stored.read(from_seq, limit, self._timeout_s)

    async def _read_through(self, last_seen: int, until_seq: int, unfiltered: bool) -> bool:
        """Whether a read that saw up to `last_seen` has all the stream holds up to
        `until_seq`. The consumer's word (nothing pending) is taken for a filtered read;
        an unfiltered one also asks the stream for the next message: right after a
        stream leader change the consumer said so one message early (a `qm log export`
        could have ended one short)."""
        if await self.last_seq() < until_seq:
            return False  # not stored yet: it comes
        if not unfiltered or last_seen >= until_seq:
            return True
        try:
            await self._js.get_msg(self._stream, seq=last_seen + 1)
        except nats.js.errors.NotFoundError:
            return True  # deleted: nothing more to read up to it
        except NATS_FAILURES as err:
            raise bus_error(err, f"get message {last_seen + 1}") from err
        return False

    def _withheld(self, since: float | None, last_seen: int) -> float:
        """Fail loudly, not short, if the reader stays drained while the stream holds the
        next message (`WITHHELD_S`): the caller may read again from `last_seen + 1`."""
        now = time.monotonic()
        if since is None:
            return now
        if now - since > WITHHELD_S:
            raise TransientBusError(
                f"stream {self._stream} holds seq {last_seen + 1} but its reader was not "
                f"sent it within {WITHHELD_S:g} s"
            )
        return since

    async def last_seq(self) -> int:
        """Seq of the newest message in the stream (0 when empty)."""
        try:
            info = await self._js.stream_info(self._stream)
        except NATS_FAILURES as err:
            raise bus_error(err, f"stream info {self._stream}") from err
        return int(info.state.last_seq)

    async def delete_stream(self) -> None:
        await delete_feed_stream(self._js, self._stream)
        await delete_liveness_bucket(self._js, self._stream)
        try:
            await self._js.delete_stream(self._stream)
        except nats.js.errors.NotFoundError:
            return
        except NATS_FAILURES as err:
            raise bus_error(err, f"delete stream {self._stream}") from err

    async def close(self) -> None:
        # A connection already lost has nothing left to unsubscribe from: close quietly.
        with contextlib.suppress(*NATS_FAILURES, ConnectionError):
            await self._acks.stop()
        if self._stored is not None:
            await self._stored.stop()
        if self._owns_connection and not self._nc.is_closed:
            # Not drain(): it waits (30 s) on subscriptions holding messages nobody will
            # read, e.g. a pull subscription's late "request timeout" status messages.
            # Nor a flush while the server is gone: its PING waits out the whole timeout
            # for a PONG that cannot come, and what is pending is lost on close anyway.
            if self._nc.is_connected:
                with contextlib.suppress(*NATS_FAILURES):
                    await self._nc.flush(timeout=max(1, round(self._timeout_s)))
            # Bounded and quiet: closing a TLS connection whose transport is already gone
            # raises from inside asyncio's SSL protocol (or waits on it) in nats-py.
            with contextlib.suppress(*NATS_FAILURES, ConnectionError, AttributeError, TimeoutError):
                await asyncio.wait_for(self._nc.close(), self._timeout_s)

    async def __aenter__(self) -> JetStreamLog:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _send(
        self, subject: str, data: bytes, headers: dict[str, str] | None, *, now: bool = True
    ) -> asyncio.Future[PubAck]:
        try:
            return await self._acks.publish(subject, data, headers, now=now)
        except NATS_FAILURES as err:
            raise bus_error(err, f"append to {subject}") from err

    async def _await_ack(self, subject: str, future: asyncio.Future[PubAck]) -> PubAck:
        if future.done():
            return future.result()  # the common case inside a batch: no timer needed
        try:
            async with asyncio.timeout(self._timeout_s):  # not wait_for: keeps cancels
                return await future
        except TimeoutError as err:
            raise TransientBusError(
                f"append to {subject}: no ack within {self._timeout_s}s (it may be stored; "
                "retry with the same msg id)"
            ) from err

    async def _already_stored(
        self, subject: str, msg_id: str | None, expected_last_seq: int | None
    ) -> int | None:
        """After a fence: is this msg id already stored by an earlier try of this append?

        The server checks expectations before dedupe, so a retried fenced append that went
        through the first time is fenced, not deduped. If it went through, it sits right
        after the expected seq (or is the subject's last message).
        """
        if msg_id is None:
            return None
        try:
            if expected_last_seq is not None:
                stored = await self._js.get_msg(self._stream, seq=expected_last_seq + 1)
            else:
                stored = await self._js.get_last_msg(self._stream, subject)
        except nats.js.errors.NotFoundError:
            return None
        except NATS_FAILURES as err:
            raise bus_error(err, f"check msg id {msg_id}") from err
        if stored.subject == subject and (stored.headers or {}).get(MSG_ID) == msg_id:
            return int(stored.seq or 0) or None
        return None


def _headers(
    msg_id: str | None,
    *,
    expected_last_seq: int | None = None,
    expected_last_subject_seq: int | None = None,
    expected_last_msg_id: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str] | None:
    headers: dict[str, str] = dict(extra) if extra else {}
    if msg_id is not None:
        if not msg_id:
            raise PermanentBusError("msg_id must not be empty")
        headers[MSG_ID] = msg_id
    if expected_last_seq is not None:
        headers[EXPECTED_LAST_SEQ] = str(expected_last_seq)
    if expected_last_subject_seq is not None:
        headers[EXPECTED_LAST_SUBJECT_SEQ] = str(expected_last_subject_seq)
    if expected_last_msg_id is not None:
        headers[EXPECTED_LAST_MSG_ID] = expected_last_msg_id
    return headers or None


async def _log_async_error(err: Exception) -> None:
    log.warning("nats error: %s", err)


async def _log_disconnected() -> None:
    log.info("nats disconnected")


async def _log_reconnected() -> None:
    log.info("nats reconnected")


async def _open(
    servers: list[str], who: NatsCredentials, name: str, timeout_s: float, **extra: Any
) -> NatsClient:
    """A connection to one of `servers` as `who` (`extra`: more of nats.connect's options)."""
    refused: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def on_error(err: Exception) -> None:
        await _log_async_error(err)
        if _AUTHORIZATION_VIOLATION in str(err).lower() and not refused.done():
            refused.set_result(str(err))

    # Waiting for a server that is not up yet is right (it retries for ever); one
    # that refuses these credentials will not change its mind: fail at once.
    connecting = asyncio.ensure_future(
        nats.connect(
            servers,
            name=name,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.25,
            **who.connect_options(),
            **({"inbox_prefix": inbox} if (inbox := who.inbox_prefix()) else {}),
            connect_timeout=timeout_s,
            error_cb=on_error,
            disconnected_cb=_log_disconnected,
            reconnected_cb=_log_reconnected,
            **extra,
        )
    )
    gave_up = False
    try:
        either: set[asyncio.Future[Any]] = {connecting, refused}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not connecting.done():
            gave_up = True
            # Again until it ends: nats-py's connect can drop one cancel (3.11's
            # wait_for) and go on retrying for ever, holding up a service's stop.
            await cancel_and_wait(connecting)
            if not connecting.cancelled() and connecting.exception() is None:
                with contextlib.suppress(*NATS_FAILURES, ConnectionError, TimeoutError):
                    await asyncio.wait_for(connecting.result().close(), timeout_s)
    if gave_up:
        user = who.user or who.creds_file or "anonymous"
        raise PermanentBusError(
            f"connect to {','.join(servers)}: the server refused {user}: {refused.result()}"
        )
    try:
        nc = connecting.result()
    except NATS_FAILURES as err:
        raise bus_error(err, f"connect to {','.join(servers)}") from err
    return nc
