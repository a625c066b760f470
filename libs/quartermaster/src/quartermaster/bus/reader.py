"""An ordered push consumer that reads a stream in order, fast, with backpressure.

Why not nats-py's `subscribe(ordered_consumer=True)`: with `next_msg` it costs a task
and a timer per message (~15k msg/s here); with a callback it answers flow control as
soon as messages arrive, so a slow reader buffers without bound. This reader keeps the
callback's speed and answers each flow-control request only when the reader has taken
every message that came before it, so the server never runs more than its flow-control
window ahead.

Like the Go client's ordered consumer: ack none, one delivery, memory storage, idle
heartbeats. A consumer-sequence gap, a heartbeat that reports messages we did not get,
silence for three heartbeats, or a reconnect of the client recreates the consumer from
the next stream seq.

On a cluster the server places the consumer (one replica, in memory) on any node of the
stream, by chance. This reader creates it again, a few times at most, until it sits on
the node the reader is connected to: what it pushes then crosses no route, and on the
stream's leader (where `bus.near_leader` puts the services) a message is pushed as it is
acked, where a follower pushed it 0.3 ms later (it learns of the commit after the leader).
A consumer dies with its node: a reconnect says so at once, and heartbeats every second
bound the wait to about 3 s when it sits on another node than the client's.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from quartermaster.bus.inline import subscribe_inline
from quartermaster.bus.near_leader import server_name
from quartermaster.bus.translate import NATS_FAILURES, bus_error

log = logging.getLogger(__name__)

_STATUS = "Status"
_DESCRIPTION = "Description"
_LAST_CONSUMER = "Nats-Last-Consumer"
_CONSUMER_STALLED = "Nats-Consumer-Stalled"
PLACE_TRIES = 10  # creates to land the consumer on the reader's node (R3: 1 in 3 each)


@dataclass(frozen=True, slots=True)
class Delivered:
    seq: int
    subject: str
    data: bytes
    headers: dict[str, str]
    num_pending: int


@dataclass(frozen=True, slots=True)
class _FlowControl:
    reply: str
    generation: int


class OrderedReader:
    """Deliveries of `filter_subject` in `stream` from `start_seq` on, in stream order."""

    def __init__(
        self,
        nc: NatsClient,
        js: JetStreamContext,
        stream: str,
        filter_subject: str,
        start_seq: int,
        *,
        heartbeat_s: float = 1.0,
        named: bool = False,
    ) -> None:
        """`named`: give each consumer a name, so its create request's subject carries
        the filter (`CONSUMER.CREATE.<stream>.<name>.<filter>`) and permissions can
        allow one filter only."""
        self._nc = nc
        self._named = named
        self._js = js
        self._stream = stream
        self._filter = filter_subject
        self._next_seq = max(start_seq, 1)  # stream seq to restart from after a reset
        self._heartbeat_s = heartbeat_s
        self._buffer: collections.deque[Delivered | _FlowControl] = collections.deque()
        self._arrived = asyncio.Event()
        self._generation = 0
        self._expected_dseq = 1
        self._reset_needed = False
        self._last_activity = time.monotonic()
        self._sub: Subscription | None = None
        self._consumer: str | None = None
        self._reconnects = self._reconnect_count()

    @property
    def consumer(self) -> str | None:
        """Name of the server-side consumer now feeding this reader."""
        return self._consumer

    async def start(self) -> None:
        await self._create()

    async def next(self, timeout: float | None) -> Delivered | None:
        """The next delivery, or None if none came within `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            while self._buffer:
                item = self._buffer.popleft()
                if isinstance(item, Delivered):
                    return item
                if item.generation == self._generation:
                    await self._publish_quietly(item.reply)
            if self._reset_needed:
                await self._reset()
                continue
            if self._reconnect_count() != self._reconnects:
                log.info("ordered reader on %s: client reconnected, recreating", self._stream)
                self._reset_needed = True
                continue
            self._arrived.clear()
            wait = self._heartbeat_s
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    return None
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel
                # that races with the event being set, and the reader never stops.
                async with asyncio.timeout(wait):
                    await self._arrived.wait()
            except TimeoutError:
                if time.monotonic() - self._last_activity > 3 * self._heartbeat_s:
                    log.info("ordered reader on %s: no heartbeat, recreating", self._stream)
                    self._reset_needed = True

    async def drained(self, last_seen: int) -> bool:
        """Nothing is left for this reader: the server has no more to send, and everything
        it sent (up to its delivered stream seq) was seen. the consumer's pending count alone
        is not enough: sent messages may still be on their way to this client (under load the
        read then ended short of messages already delivered)."""
        info = await self._info()
        if info is None or int(info.num_pending or 0) != 0:
            return False
        delivered = info.delivered.stream_seq if info.delivered is not None else 0
        return int(delivered or 0) <= last_seen

    async def caught_up(self) -> bool:
        """`drained` by consumer seq: every message the consumer sent was taken (right on a
        filtered consumer, whose delivered stream seq runs ahead over other subjects)."""
        info = await self._info()
        if info is None or int(info.num_pending or 0) != 0 or self._buffer:
            return False
        delivered = info.delivered.consumer_seq if info.delivered is not None else 0
        return int(delivered or 0) <= self._expected_dseq - 1

    async def _info(self) -> Any:
        if self._consumer is None:
            return None
        try:
            return await self._js.consumer_info(self._stream, self._consumer)
        except nats.js.errors.NotFoundError:
            return None  # being recreated; unknown
        except NATS_FAILURES as err:
            raise bus_error(err, f"read {self._stream}") from err

    async def stop(self) -> None:
        await self._drop_consumer()

    async def _create(self) -> None:
        """A consumer from `_next_seq`, on the reader's own node where it lands there
        within `PLACE_TRIES` creates (else where the last one landed)."""
        here = server_name(self._nc)
        for _ in range(PLACE_TRIES - 1):
            placed = await self._create_once()
            if here is None or placed is None or placed == here:
                return
            await self._drop_consumer()
        await self._create_once()

    async def _create_once(self) -> str | None:
        """A consumer; the name of the node it sits on (None: no cluster says)."""
        self._generation += 1
        self._expected_dseq = 1
        self._reset_needed = False
        self._last_activity = time.monotonic()
        self._reconnects = self._reconnect_count()
        generation = self._generation
        inbox = self._nc.new_inbox()

        config = ConsumerConfig(
            deliver_subject=inbox,
            filter_subject=self._filter,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=self._next_seq,
            ack_policy=AckPolicy.NONE,
            max_deliver=1,
            flow_control=True,
            idle_heartbeat=self._heartbeat_s,
            mem_storage=True,
            num_replicas=1,
            inactive_threshold=max(30.0, 6 * self._heartbeat_s),
            name=f"ordered_{secrets.token_hex(8)}" if self._named else None,
        )
        try:
            # Deliveries join the buffer in the read loop (no task hop per message);
            # unbounded there, since flow control bounds what the server sends.
            self._sub = await subscribe_inline(
                self._nc, inbox, lambda msg: self._on_message(msg, generation)
            )
            info = await self._js.add_consumer(self._stream, config=config)
        except NATS_FAILURES as err:
            await self._drop_consumer()
            raise bus_error(err, f"read {self._stream} from {self._next_seq}") from err
        self._consumer = info.name
        return info.cluster.leader if info.cluster is not None else None

    async def _reset(self) -> None:
        await self._drop_consumer()
        await self._create()

    async def _drop_consumer(self) -> None:
        sub, self._sub = self._sub, None
        consumer, self._consumer = self._consumer, None
        if sub is not None:
            try:
                await sub.unsubscribe()
            except NATS_FAILURES as err:
                log.debug("ordered reader unsubscribe failed: %s", err)
        # Not while the server is gone (the request would wait out its timeout, e.g. on a
        # stopping service): one left over goes away by itself after its inactive threshold.
        if consumer is not None and self._nc.is_connected:
            try:
                # Briefly: a consumer on a dead node cannot answer.
                async with asyncio.timeout(1.0):
                    await self._js.delete_consumer(self._stream, consumer)
            except NATS_FAILURES as err:
                log.debug("ordered reader could not delete consumer %s: %s", consumer, err)

    def _on_message(self, msg: Msg, generation: int) -> None:
        if generation != self._generation:
            return  # a message for a consumer we already dropped
        self._last_activity = time.monotonic()
        headers = msg.headers
        if not msg.data and headers and headers.get(_STATUS) == "100":
            self._on_control(msg, headers, generation)
            return
        sseq, dseq, pending = _ack_fields(msg)
        if self._reset_needed:
            return  # everything after a gap is dropped; the new consumer resends it
        if dseq != self._expected_dseq:
            log.info(
                "ordered reader on %s: consumer seq %d, expected %d; recreating",
                self._stream,
                dseq,
                self._expected_dseq,
            )
            self._reset_needed = True
            self._arrived.set()
            return
        self._expected_dseq = dseq + 1
        self._next_seq = sseq + 1
        self._buffer.append(Delivered(sseq, msg.subject, msg.data, headers or {}, pending))
        self._arrived.set()

    def _on_control(self, msg: Msg, headers: dict[str, str], generation: int) -> None:
        description = headers.get(_DESCRIPTION, "")
        if description.startswith("FlowControl") and msg.reply:
            # Answer once the reader has taken everything that came before this.
            self._buffer.append(_FlowControl(msg.reply, generation))
            self._arrived.set()
        elif description.startswith("Idle"):
            stalled = headers.get(_CONSUMER_STALLED)
            if stalled:
                self._buffer.append(_FlowControl(stalled, generation))
                self._arrived.set()
            last = headers.get(_LAST_CONSUMER)
            if last is not None and int(last) != self._expected_dseq - 1:
                self._reset_needed = True
                self._arrived.set()

    def _reconnect_count(self) -> int:
        return int(self._nc.stats.get("reconnects", 0))

    async def _publish_quietly(self, subject: str) -> None:
        try:
            await self._nc.publish(subject, b"")
        except NATS_FAILURES as err:
            log.debug("flow control reply failed: %s", err)


def _ack_fields(msg: Msg) -> tuple[int, int, int]:
    """Stream seq, consumer seq and pending count from the ack subject."""
    tokens = msg.reply.split(".")
    if len(tokens) == 9:  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>
        return int(tokens[5]), int(tokens[6]), int(tokens[8])
    meta = msg.metadata  # newer form with domain and account hash
    return meta.sequence.stream, meta.sequence.consumer, meta.num_pending
