"""Pipelined JetStream publishes: many in flight on one connection, one ack inbox.

nats-py 2.16 has `JetStreamContext.publish_async`, but an error reply (wrong last
sequence, bad request) raises inside its reply callback instead of failing the future,
so the future never completes. This small replacement resolves every future: a PubAck
becomes a `PubAck`, an error becomes a `BusError`, silence becomes a timeout.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from dataclasses import dataclass
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from quartermaster.bus.errors import BusError, PermanentBusError, TransientBusError
from quartermaster.bus.inline import subscribe_inline, write_now

WRONG_LAST_SEQUENCE = 10071  # JSStreamWrongLastSequenceErrF
WRONG_LAST_MSG_ID = 10070  # JSStreamWrongLastMsgIDErrF
_WRONG_LAST_SEQ_TEXT = re.compile(r"wrong last sequence: (\d+)")
SWEEP_AT = 1024  # waiting tokens before ended futures are swept out (at least)


@dataclass(frozen=True, slots=True)
class PubAck:
    seq: int
    duplicate: bool


class PubRejected(PermanentBusError):
    """The stream refused the message; `code` is the NATS API error code (`err_code`)."""

    def __init__(self, subject: str, code: int, description: str) -> None:
        super().__init__(f"append to {subject} rejected: {description} (err_code {code})")
        self.subject = subject
        self.code = code
        self.description = description

    def actual_last_seq(self) -> int | None:
        found = _WRONG_LAST_SEQ_TEXT.search(self.description)
        return int(found.group(1)) if found else None


class AckInbox:
    """One wildcard reply subscription; each publish gets a token and a future."""

    def __init__(self, nc: NatsClient) -> None:
        self._nc = nc
        self._prefix = nc.new_inbox()
        self._tokens = itertools.count()
        self._waiting: dict[str, tuple[str, asyncio.Future[PubAck]]] = {}
        self._sweep_at = SWEEP_AT
        self._sub: Subscription | None = None

    async def start(self) -> None:
        if self._sub is None:
            # Acks resolve their futures in the read loop: no task hop per append.
            self._sub = await subscribe_inline(self._nc, f"{self._prefix}.*", self._on_reply)

    async def stop(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            await sub.unsubscribe()
        for _, future in self._waiting.values():
            if not future.done():
                future.set_exception(TransientBusError("connection closed before the ack"))
        self._waiting.clear()

    async def publish(
        self, subject: str, data: bytes, headers: dict[str, str] | None, *, now: bool = True
    ) -> asyncio.Future[PubAck]:
        """Send one message; the returned future resolves with its ack or a BusError.

        `now`: written to the socket at once (`inline.write_now`); False leaves it to
        nats-py's flusher, which writes all that is queued in one go (a batch's
        messages but its last)."""
        await self.start()
        token = str(next(self._tokens))
        future: asyncio.Future[PubAck] = asyncio.get_running_loop().create_future()
        # A reply takes its token out; futures that end without one (a timeout, a
        # cancelled batch) are swept out now and then, not by a done callback each: a
        # callback is one more loop turn per append.
        if len(self._waiting) >= self._sweep_at:
            self._sweep()
        self._waiting[token] = (subject, future)
        await self._nc.publish(subject, data, reply=f"{self._prefix}.{token}", headers=headers)
        if now:
            write_now(self._nc)
        return future

    def _sweep(self) -> None:
        """Drop the tokens of futures that ended without a reply."""
        self._waiting = {t: w for t, w in self._waiting.items() if not w[1].done()}
        self._sweep_at = max(SWEEP_AT, 2 * len(self._waiting))

    def _on_reply(self, msg: Msg) -> None:
        token = msg.subject.rsplit(".", 1)[1]
        waiting = self._waiting.pop(token, None)
        if waiting is None:
            return
        subject, future = waiting
        if future.done():
            return
        outcome = _parse_reply(subject, msg)
        if isinstance(outcome, BusError):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)


def _parse_reply(subject: str, msg: Msg) -> PubAck | BusError:
    if not msg.data and msg.headers and msg.headers.get("Status") == "503":
        return TransientBusError(f"no stream answered on {subject} (no responders)")
    try:
        reply: dict[str, Any] = json.loads(msg.data)
    except ValueError:
        return PermanentBusError(f"unreadable ack for {subject}: {msg.data[:200]!r}")
    error = reply.get("error")
    if error is not None:
        status = int(error.get("code", 0))
        code = int(error.get("err_code", 0))
        description = str(error.get("description", ""))
        if status in (500, 503):
            return TransientBusError(f"append to {subject}: {description} (status {status})")
        return PubRejected(subject, code, description)
    return PubAck(seq=int(reply["seq"]), duplicate=bool(reply.get("duplicate", False)))
