"""A durable pull consumer for commands: fetch a batch, settle each message once.

Settling: `ack` (done), `nak(delay_s)` (transient failure, redeliver later), `term`
(never redeliver), `in_progress` (still working, push the ack deadline out; may repeat).
Poison messages go to `dead_letter`, which copies them to `<prefix>.dlq.<rest of the
subject>` with the reason in headers and then terms them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Mapping, Sequence

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from quartermaster.bus.errors import PermanentBusError
from quartermaster.bus.jetstream import JetStreamLog
from quartermaster.bus.translate import NATS_FAILURES, bus_error

DLQ_REASON = "Qm-Dlq-Reason"
DLQ_SUBJECT = "Qm-Dlq-Subject"
DLQ_SEQ = "Qm-Dlq-Seq"
DLQ_CONSUMER = "Qm-Dlq-Consumer"
DLQ_DELIVERIES = "Qm-Dlq-Deliveries"


class ConsumedMessage:
    """One delivery of a stream message; settle it exactly once."""

    __slots__ = ("_msg", "_settled", "data", "headers", "num_delivered", "seq", "subject")

    def __init__(self, msg: Msg) -> None:
        meta = msg.metadata
        self._msg = msg
        self._settled = False
        self.seq: int = meta.sequence.stream
        self.subject: str = msg.subject
        self.data: bytes = msg.data
        self.headers: Mapping[str, str] = msg.headers or {}
        self.num_delivered: int = meta.num_delivered

    @property
    def settled(self) -> bool:
        return self._settled

    async def ack(self) -> None:
        self._settle("ack")
        await self._reply(self._msg.ack(), "ack")

    async def ack_sync(self, timeout_s: float = 5.0) -> None:
        """Ack and wait until the server has recorded it."""
        self._settle("ack")
        try:
            await self._msg.ack_sync(timeout=timeout_s)
        except NATS_FAILURES as err:
            raise bus_error(err, f"ack seq {self.seq}") from err

    async def nak(self, delay_s: float | None = None) -> None:
        """Redeliver, after `delay_s` seconds if given."""
        self._settle("nak")
        await self._reply(self._msg.nak(delay=delay_s), "nak")

    async def term(self) -> None:
        self._settle("term")
        await self._reply(self._msg.term(), "term")

    async def in_progress(self) -> None:
        if self._settled:
            raise PermanentBusError(f"seq {self.seq} is already settled")
        await self._reply(self._msg.in_progress(), "in_progress")

    def _settle(self, how: str) -> None:
        if self._settled:
            raise PermanentBusError(f"cannot {how} seq {self.seq}: already settled")
        self._settled = True

    async def _reply(self, sending: Awaitable[None], how: str) -> None:
        try:
            await sending
        except NATS_FAILURES as err:
            raise bus_error(err, f"{how} seq {self.seq}") from err

    def __repr__(self) -> str:
        return (
            f"ConsumedMessage(seq={self.seq}, subject={self.subject!r}, "
            f"num_delivered={self.num_delivered}, settled={self._settled})"
        )


class DurableConsumer:
    """Durable pull consumer `durable_name` on `filter_subject` of the log's stream.

    The consumer is created, or updated to this config, on first use (`ensure`). It
    survives restarts: a new process with the same name continues where acks left off.
    """

    def __init__(
        self,
        log: JetStreamLog,
        durable_name: str,
        filter_subject: str,
        *,
        ack_wait_s: float = 30.0,
        max_deliver: int = -1,
        max_ack_pending: int = 1000,
        backoff_s: Sequence[float] | None = None,
    ) -> None:
        self._log = log
        self.durable_name = durable_name
        self.filter_subject = filter_subject
        self._config = ConsumerConfig(
            durable_name=durable_name,
            name=durable_name,
            filter_subject=filter_subject,
            deliver_policy=DeliverPolicy.ALL,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ack_wait_s,
            max_deliver=max_deliver,
            max_ack_pending=max_ack_pending,
            backoff=list(backoff_s) if backoff_s else None,
        )
        self._sub: JetStreamContext.PullSubscription | None = None

    async def ensure(self) -> None:
        if self._sub is not None:
            return
        js = self._log.js
        try:
            await js.add_consumer(self._log.stream, config=self._config)
            self._sub = await js.pull_subscribe_bind(
                durable=self.durable_name, stream=self._log.stream
            )
        except NATS_FAILURES as err:
            raise bus_error(err, f"create consumer {self.durable_name}") from err

    async def fetch(self, batch: int = 100, timeout: float = 1.0) -> list[ConsumedMessage]:
        """Up to `batch` messages; waits at most `timeout` s for the first; [] if none."""
        await self.ensure()
        assert self._sub is not None
        try:
            msgs = await self._sub.fetch(batch, timeout=timeout)
        except nats.errors.TimeoutError:
            return []
        except NATS_FAILURES as err:
            raise bus_error(err, f"fetch from {self.durable_name}") from err
        return [ConsumedMessage(msg) for msg in msgs]

    async def dead_letter(self, msg: ConsumedMessage, reason: str) -> int:
        """Copy `msg` to the dead-letter subject with `reason`, then term it.

        Idempotent: the copy's msg id is derived from the original seq, so a crash
        between the copy and the term stores one copy only.
        """
        headers = {k: v for k, v in msg.headers.items() if not k.startswith("Nats-")}
        headers.update(
            {
                DLQ_REASON: " ".join(reason.split())[:1024] or "unspecified",
                DLQ_SUBJECT: msg.subject,
                DLQ_SEQ: str(msg.seq),
                DLQ_CONSUMER: self.durable_name,
                DLQ_DELIVERIES: str(msg.num_delivered),
            }
        )
        seq = await self._log.append(
            self._log.dlq_subject(msg.subject),
            msg.data,
            msg_id=f"dlq:{self._log.stream}:{msg.seq}",
            headers=headers,
        )
        await msg.term()
        return seq

    async def num_pending(self) -> int:
        """Messages not yet delivered plus delivered but not yet settled."""
        try:
            info = await self._log.js.consumer_info(self._log.stream, self.durable_name)
        except NATS_FAILURES as err:
            raise bus_error(err, f"consumer info {self.durable_name}") from err
        return int(info.num_pending or 0) + int(info.num_ack_pending or 0)

    async def close(self) -> None:
        """Stop fetching; the durable consumer and its position stay on the server."""
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(*NATS_FAILURES):
                await sub.unsubscribe()

    async def delete(self) -> None:
        await self.close()
        try:
            await self._log.js.delete_consumer(self._log.stream, self.durable_name)
        except nats.js.errors.NotFoundError:
            return
        except NATS_FAILURES as err:
            raise bus_error(err, f"delete consumer {self.durable_name}") from err
